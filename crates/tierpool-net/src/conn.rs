//! One framed connection.

use bytes::{Bytes, BytesMut};
use std::time::Duration;
use tierpool_proto::frame::{FrameHeader, FRAME_HEADER_LEN, KIND_REQUEST, KIND_RESPONSE};
use tierpool_proto::{Request, Response};
use tierpool_types::{Error, ErrorKind, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Payloads smaller than this are sent in the same write as their header.
const COALESCE_LIMIT: usize = 64 << 10;

pub struct Connection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    peer: String,
}

impl Connection {
    pub fn new(stream: TcpStream) -> Connection {
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        let (r, w) = stream.into_split();
        Connection { reader: BufReader::with_capacity(256 << 10, r), writer: w, peer }
    }

    pub async fn connect(addr: &str, timeout: Duration) -> Result<Connection> {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => Ok(Connection::new(s)),
            Ok(Err(e)) => Err(Error::new(ErrorKind::Unavailable, format!("cannot connect to {addr}: {e}"))),
            Err(_) => Err(Error::new(
                ErrorKind::Unavailable,
                format!("cannot connect to {addr}: timed out after {timeout:?}"),
            )),
        }
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    async fn write_frame(&mut self, kind: u8, msg: Vec<u8>, payload: &[u8]) -> Result<()> {
        let fh = FrameHeader { kind, header_len: msg.len() as u32, payload_len: payload.len() as u32 };
        let mut head = Vec::with_capacity(FRAME_HEADER_LEN + msg.len() + payload.len().min(COALESCE_LIMIT));
        head.extend_from_slice(&fh.encode());
        head.extend_from_slice(&msg);
        if payload.len() < COALESCE_LIMIT {
            head.extend_from_slice(payload);
            self.writer.write_all(&head).await?;
        } else {
            self.writer.write_all(&head).await?;
            self.writer.write_all(payload).await?;
        }
        Ok(())
    }

    /// Reads one frame. `Ok(None)` on a clean end of stream before a frame starts.
    async fn read_frame(&mut self, kind: u8) -> Result<Option<(Bytes, Bytes)>> {
        let mut fh = [0u8; FRAME_HEADER_LEN];
        match self.reader.read_exact(&mut fh[..1]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        self.reader.read_exact(&mut fh[1..]).await?;
        let h = FrameHeader::decode(&fh)?;
        if h.kind != kind {
            return Err(Error::new(ErrorKind::Protocol, format!("unexpected frame kind {}", h.kind)));
        }
        let header = self.read_exact_bytes(h.header_len as usize).await?;
        let payload = self.read_exact_bytes(h.payload_len as usize).await?;
        Ok(Some((header, payload)))
    }

    async fn read_exact_bytes(&mut self, n: usize) -> Result<Bytes> {
        let mut buf = BytesMut::with_capacity(n);
        while buf.len() < n {
            let mut limited = (&mut self.reader).take((n - buf.len()) as u64);
            if limited.read_buf(&mut buf).await? == 0 {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("connection to {} closed mid-frame", self.peer),
                ));
            }
        }
        Ok(buf.freeze())
    }

    /// Sends a request and waits for its response.
    pub async fn call(&mut self, req: &Request, payload: &[u8]) -> Result<(Response, Bytes)> {
        self.write_frame(KIND_REQUEST, tierpool_proto::encode(req), payload).await?;
        match self.read_frame(KIND_RESPONSE).await? {
            Some((h, p)) => Ok((tierpool_proto::decode(&h)?, p)),
            None => Err(Error::new(ErrorKind::Unavailable, format!("{} closed the connection", self.peer))),
        }
    }

    /// Server side: the next request, `None` at end of stream.
    /// A body that does not decode is returned as `Err(Protocol)` after the
    /// whole frame was consumed.
    pub async fn next_request(&mut self) -> Result<Option<(Result<Request>, Bytes)>> {
        Ok(self.read_frame(KIND_REQUEST).await?.map(|(h, p)| (tierpool_proto::decode(&h), p)))
    }

    pub async fn send_response(&mut self, resp: &Response, payload: &[u8]) -> Result<()> {
        self.write_frame(KIND_RESPONSE, tierpool_proto::encode(resp), payload).await
    }
}
