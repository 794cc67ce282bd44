//! One framed connection, client or server side.
//!
//! A connection carries frames only after the handshake (`auth`): a client
//! connection is handed out by [`Connection::connect`] once the server
//! proved it knows the secret, a server connection is handed to its
//! session, which runs [`Connection::accept_handshake`] first. Either runs
//! over TCP or over a local socket to a server on the same machine
//! (`local.rs`); a client connection names the address dialled either way.
//!
//! Reading goes through `frame_io`: bodies grow as bytes arrive,
//! on both sides (a client reads a large listing the same way). Both read
//! through a small buffer (16 KiB): past what it holds with the head, a
//! body is read from the socket straight into its own buffer. A server
//! connection has a stall bound for its writes, since it may have a
//! thousand peers; a client connection has none (its pool bounds each
//! call as a whole).

use crate::auth::{self, Credentials, Refusal, Secret};
use crate::budget::Charge;
use crate::buffers::ChunkBuffers;
use crate::frame_io::{self, FrameError};
use crate::local;
use crate::stream::{ReadHalf, Stream, WriteHalf};
use bytes::Bytes;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::Duration;
use tierpool_proto::frame::{FrameHeader, FRAME_HEADER_LEN, KIND_RESPONSE};
use tierpool_proto::{Payload, Service};
use tierpool_types::{Error, ErrorKind, Result};
use tokio::io::BufReader;
use tokio::net::TcpStream;

/// Payloads smaller than this are sent in the same write as their header.
const COALESCE_LIMIT: usize = 64 << 10;
/// Read buffer of a connection, either side (on a server, counted outside
/// the budget, per connection): a body past it is read straight into its
/// own buffer.
pub(crate) const READ_BUFFER: usize = 16 << 10;

/// A frame as read: its kind, message bytes and payload.
pub struct Frame {
    pub kind: u8,
    pub header: Bytes,
    pub payload: Bytes,
}

pub struct Connection {
    reader: BufReader<ReadHalf>,
    writer: WriteHalf,
    peer: String,
    /// Over a local socket rather than TCP.
    local: bool,
    /// Server side: how long a write may go without progress.
    write_stall: Option<Duration>,
}

/// How a failure to connect begins.
pub const CONNECT_FAILED: &str = "cannot connect to";

impl Connection {
    /// A client connection to `addr` over `stream`, before its handshake.
    fn new(stream: Stream, addr: &str) -> Connection {
        Connection::with_buffer(stream, addr.to_string(), READ_BUFFER, None)
    }

    /// A server connection from `peer`: small read buffer, writes bounded by `stall`.
    pub(crate) fn accepted(stream: Stream, peer: String, stall: Duration) -> Connection {
        Connection::with_buffer(stream, peer, READ_BUFFER, Some(stall))
    }

    fn with_buffer(stream: Stream, peer: String, buffer: usize, write_stall: Option<Duration>) -> Connection {
        match &stream {
            Stream::Tcp(s) => {
                let _ = s.set_nodelay(true);
            }
            Stream::Local(s) => local::tune(s),
        }
        let local = stream.is_local();
        let (r, w) = stream.into_split();
        Connection { reader: BufReader::with_capacity(buffer, r), writer: w, peer, local, write_stall }
    }

    /// Connects to `addr` and does the handshake with `creds`, each within
    /// `timeout`; first through the server's local socket, if it has one
    /// here and this process uses them ([`local::enabled`]), the handshake
    /// there within [`local::HANDSHAKE`] at most. A failure to connect is
    /// `Unavailable` and starts with [`CONNECT_FAILED`]: nothing was sent,
    /// so any call may be tried again.
    pub async fn connect(addr: &str, timeout: Duration, creds: &Credentials) -> Result<Connection> {
        Connection::connect_via(addr, timeout, creds, local::enabled()).await
    }

    /// As [`connect`](Self::connect), trying the local socket only if `local`.
    pub async fn connect_via(addr: &str, timeout: Duration, creds: &Credentials, local: bool) -> Result<Connection> {
        if let Some(s) = if local { local::connect(addr).await } else { None } {
            // Nothing guards a name: what holds it may not be the server, or
            // may not answer. Whatever failed here, TCP reaches the server if
            // anything does, and says why if it does not.
            let limit = timeout.min(local::HANDSHAKE);
            match Connection::new(Stream::Local(s), addr).introduce(addr, limit, creds).await {
                Ok(conn) => return Ok(conn),
                Err(e) => tracing::debug!("the local socket of {addr} failed: {e}; connecting over TCP"),
            }
        }
        Connection::tcp(addr, timeout).await?.introduce(addr, timeout, creds).await
    }

    async fn introduce(mut self, addr: &str, timeout: Duration, creds: &Credentials) -> Result<Connection> {
        let mut stream = tokio::io::join(&mut self.reader, &mut self.writer);
        auth::introduce(&mut stream, creds, addr, timeout).await?;
        Ok(self)
    }

    async fn tcp(addr: &str, timeout: Duration) -> Result<Connection> {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => Ok(Connection::new(Stream::Tcp(s), addr)),
            Ok(Err(e)) => Err(Error::new(ErrorKind::Unavailable, format!("{CONNECT_FAILED} {addr}: {e}"))),
            Err(_) => {
                Err(Error::new(ErrorKind::Unavailable, format!("{CONNECT_FAILED} {addr}: timed out after {timeout:?}")))
            }
        }
    }

    /// Server side: the handshake, before anything else is read, within `limit`.
    pub(crate) async fn accept_handshake(&mut self, secret: &Secret, limit: Duration) -> Result<(), Refusal> {
        let mut stream = tokio::io::join(&mut self.reader, &mut self.writer);
        auth::accept(&mut stream, secret, limit).await
    }

    /// Whether `e` is a failure to connect (the request never left).
    pub fn never_sent(e: &Error) -> bool {
        e.kind == ErrorKind::Unavailable && e.message.starts_with(CONNECT_FAILED)
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Whether it runs over a local socket.
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// Writes a frame: header, `msg` and a payload of one part shorter than
    /// `COALESCE_LIMIT` in one buffer (the message encoded in place); any
    /// other payload's parts as they are, after the header in the same
    /// vectored writes.
    pub(crate) async fn write_frame<T: serde::Serialize, P: AsRef<[u8]>>(
        &mut self,
        kind: u8,
        msg: &T,
        payload: &[P],
    ) -> Result<(), FrameError> {
        let len: usize = payload.iter().map(|p| p.as_ref().len()).sum();
        let (inline, parts) = match payload {
            [one] if len < COALESCE_LIMIT => (one.as_ref(), &[][..]),
            parts => (&[][..], parts),
        };
        let mut head = tierpool_proto::encode_after(msg, FRAME_HEADER_LEN, inline.len());
        let header_len = (head.len() - FRAME_HEADER_LEN) as u32;
        let fh = FrameHeader { kind, header_len, payload_len: len as u32 };
        head[..FRAME_HEADER_LEN].copy_from_slice(&fh.encode());
        head.extend_from_slice(inline);
        if parts.is_empty() {
            return frame_io::write_all(&mut self.writer, &head, self.write_stall).await;
        }
        let mut slices: Vec<IoSlice<'_>> =
            std::iter::once(&head[..]).chain(parts.iter().map(P::as_ref)).map(IoSlice::new).collect();
        frame_io::write_all_vectored(&mut self.writer, &mut slices, self.write_stall).await
    }

    /// Waits until a byte of the next frame has arrived (`Ok(true)`) or the
    /// stream ended (`Ok(false)`), consuming nothing: cancelling it loses no byte.
    pub(crate) async fn readable(&mut self) -> std::io::Result<bool> {
        use tokio::io::AsyncBufReadExt;
        Ok(!self.reader.fill_buf().await?.is_empty())
    }

    /// Reads a frame header; `Ok(None)` on a clean end of stream before it.
    pub(crate) async fn read_head(
        &mut self,
        wait: Option<(Duration, crate::DropReason)>,
        stall: Option<Duration>,
    ) -> Result<Option<FrameHeader>, FrameError> {
        frame_io::read_head(&mut self.reader, wait, stall).await
    }

    /// Reads the body of the frame whose header was just read, charging it to `charge`.
    pub(crate) async fn read_body(
        &mut self,
        h: &FrameHeader,
        charge: &mut Charge,
        stall: Option<Duration>,
        buffers: Option<&Arc<ChunkBuffers>>,
    ) -> Result<Frame, FrameError> {
        let header = frame_io::read_body(&mut self.reader, h.header_len as usize, charge, stall, None).await?;
        let payload = frame_io::read_body(&mut self.reader, h.payload_len as usize, charge, stall, buffers).await?;
        Ok(Frame { kind: h.kind, header, payload })
    }

    /// Whether an idle connection can carry another call: nothing unread
    /// and the peer has not closed it (a server drops idle connections).
    pub(crate) fn is_reusable(&self) -> bool {
        if !self.reader.buffer().is_empty() {
            return false;
        }
        matches!(self.reader.get_ref().peek_now(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Sends a request to service `S` and waits for its response; an error
    /// answer becomes `Err`.
    pub async fn call<S: Service>(&mut self, req: &S::Request, payload: &[u8]) -> Result<(S::Response, Bytes)> {
        self.call_with::<S>(req, payload, None).await
    }

    /// As [`call`](Self::call), reading an answer's payload of exactly a
    /// chunk into one of `buffers`.
    pub async fn call_with<S: Service>(
        &mut self,
        req: &S::Request,
        payload: &[u8],
        buffers: Option<&Arc<ChunkBuffers>>,
    ) -> Result<(S::Response, Bytes)> {
        let (resp, body) = self.exchange::<S>(req, payload, buffers, None).await?;
        Ok((resp, body.unwrap_or_default()))
    }

    /// As [`call`](Self::call), an answer's payload of exactly `dst.len()`
    /// bytes (not empty) read straight into `dst`, the caller's room for it:
    /// `None` then. Any other payload is returned as it came. Only for a
    /// worker, whose answers carry their bytes as they are (a coordinator's
    /// may carry small files' bytes that `Service::attach` puts back).
    pub async fn call_into<S: Service>(
        &mut self,
        req: &S::Request,
        payload: &[u8],
        dst: &mut [u8],
    ) -> Result<(S::Response, Option<Bytes>)> {
        debug_assert_eq!(S::KIND, tierpool_proto::frame::KIND_WORKER_REQUEST, "a payload lands only from a worker");
        self.exchange::<S>(req, payload, None, Some(dst)).await
    }

    async fn exchange<S: Service>(
        &mut self,
        req: &S::Request,
        payload: &[u8],
        buffers: Option<&Arc<ChunkBuffers>>,
        dst: Option<&mut [u8]>,
    ) -> Result<(S::Response, Option<Bytes>)> {
        let sent = self.write_frame(S::KIND, req, &[payload]).await;
        sent.map_err(|e| e.into_error(&self.peer))?;
        let frame = match self.read_head(None, None).await {
            Ok(Some(h)) => match dst {
                Some(dst) if !dst.is_empty() && h.payload_len as usize == dst.len() => {
                    let header = frame_io::read_body(
                        &mut self.reader,
                        h.header_len as usize,
                        &mut Charge::unbounded(),
                        None,
                        None,
                    )
                    .await;
                    match header {
                        Ok(header) => {
                            frame_io::read_body_into(&mut self.reader, dst, None).await.map(|()| (h.kind, header, None))
                        }
                        Err(e) => Err(e),
                    }
                }
                _ => {
                    let f = self.read_body(&h, &mut Charge::unbounded(), None, buffers).await;
                    f.map(|f| (f.kind, f.header, Some(f.payload)))
                }
            },
            Ok(None) => return Err(Error::new(ErrorKind::Unavailable, format!("{} closed the connection", self.peer))),
            Err(e) => Err(e),
        };
        let (kind, header, body) = frame.map_err(|e| e.into_error(&self.peer))?;
        if kind != KIND_RESPONSE {
            let e = format!("{} answered with a frame of kind {}", self.peer, kind);
            return Err(Error::new(ErrorKind::Protocol, e));
        }
        let r: std::result::Result<S::Response, Error> = tierpool_proto::decode(&header)?;
        let landed = body.is_none();
        let (resp, body) = S::attach(r?, body.unwrap_or_default())?;
        Ok((resp, (!landed).then_some(body)))
    }

    /// Server side: answers the request just read.
    pub(crate) async fn send_response<T: serde::Serialize>(
        &mut self,
        resp: &std::result::Result<T, Error>,
        payload: &Payload,
    ) -> Result<(), FrameError> {
        self.write_frame(KIND_RESPONSE, resp, payload.parts()).await
    }
}
