//! One framed connection.

use bytes::{Bytes, BytesMut};
use std::time::Duration;
use tierpool_proto::frame::{FrameHeader, FRAME_HEADER_LEN, KIND_RESPONSE};
use tierpool_proto::Service;
use tierpool_types::{Error, ErrorKind, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Payloads smaller than this are sent in the same write as their header.
const COALESCE_LIMIT: usize = 64 << 10;

/// A frame as read: its kind, message bytes and payload.
pub struct Frame {
    pub kind: u8,
    pub header: Bytes,
    pub payload: Bytes,
}

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

    pub(crate) async fn write_frame(&mut self, kind: u8, msg: Vec<u8>, payload: &[u8]) -> Result<()> {
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

    /// Reads one frame of any kind. `Ok(None)` on a clean end of stream
    /// before a frame starts.
    pub(crate) async fn read_frame(&mut self) -> Result<Option<Frame>> {
        let mut fh = [0u8; FRAME_HEADER_LEN];
        match self.reader.read_exact(&mut fh[..1]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        self.reader.read_exact(&mut fh[1..]).await?;
        let h = FrameHeader::decode(&fh)?;
        let header = self.read_exact_bytes(h.header_len as usize).await?;
        let payload = self.read_exact_bytes(h.payload_len as usize).await?;
        Ok(Some(Frame { kind: h.kind, header, payload }))
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

    /// Sends a request to service `S` and waits for its response; an error
    /// answer becomes `Err`.
    pub async fn call<S: Service>(&mut self, req: &S::Request, payload: &[u8]) -> Result<(S::Response, Bytes)> {
        self.write_frame(S::KIND, tierpool_proto::encode(req), payload).await?;
        match self.read_frame().await? {
            Some(f) if f.kind == KIND_RESPONSE => {
                let r: std::result::Result<S::Response, Error> = tierpool_proto::decode(&f.header)?;
                Ok((r?, f.payload))
            }
            Some(f) => {
                Err(Error::new(ErrorKind::Protocol, format!("{} answered with a frame of kind {}", self.peer, f.kind)))
            }
            None => Err(Error::new(ErrorKind::Unavailable, format!("{} closed the connection", self.peer))),
        }
    }

    /// Server side: answers the request just read.
    pub async fn send_response<T: serde::Serialize>(
        &mut self,
        resp: &std::result::Result<T, Error>,
        payload: &[u8],
    ) -> Result<()> {
        self.write_frame(KIND_RESPONSE, tierpool_proto::encode(resp), payload).await
    }
}
