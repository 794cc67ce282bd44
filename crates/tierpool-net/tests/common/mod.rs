//! An in-process server on loopback for the limit tests: a worker-speaking
//! handler that answers `Ping`, `PutChunk` (after an optional delay, so
//! frames stay charged while handled) and `GetChunk` (with [`chunk_bytes`]),
//! and panics on `Stats`, and raw peers
//! that do the handshake, then send frames by hand.

#![allow(dead_code)]

use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_net::{Connection, Credentials, Handler, Limits, Secret, Server, StatsHandle};
use tierpool_proto::frame::{FrameHeader, KIND_WORKER_REQUEST};
use tierpool_proto::{Payload, Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ByteSize, ChunkAttrs, ChunkKey, Error, InodeId, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

pub struct TestHandler {
    /// How long a `PutChunk` is held before it is answered.
    pub delay: Duration,
}

impl Handler for TestHandler {
    type Service = Worker;

    async fn handle(&self, req: WorkerRequest, payload: Bytes) -> (Result<WorkerResponse>, Payload) {
        let (answer, out) = match req {
            WorkerRequest::Ping => (Ok(WorkerResponse::Pong), Bytes::new()),
            WorkerRequest::Stats => panic!("no figures kept here"),
            WorkerRequest::PutChunk { .. } => {
                tokio::time::sleep(self.delay).await;
                // The payload's length comes back, so a test sees it arrived whole.
                (Ok(WorkerResponse::Deleted { chunks: payload.len() as u64 }), Bytes::new())
            }
            WorkerRequest::GetChunk { key, .. } => (Ok(WorkerResponse::Chunk), Bytes::from(chunk_bytes(key))),
            other => (Err(Error::invalid(format!("not served here: {other:?}"))), Bytes::new()),
        };
        (answer, out.into())
    }
}

/// What the test handler answers a `GetChunk` of `key` with: `key.index`
/// bytes, a pattern set by `key.version`.
pub fn chunk_bytes(key: ChunkKey) -> Vec<u8> {
    (0..key.index).map(|i| (i % 251) as u8 ^ key.version as u8).collect()
}

/// The secret of every test server.
pub fn secret() -> Secret {
    Secret::from_key(b"the secret of the test servers..", "the tests").unwrap()
}

pub fn creds() -> Credentials {
    secret().into()
}

/// A client connection to a test server, its handshake done.
pub async fn connect(addr: &str) -> Connection {
    Connection::connect(addr, Duration::from_secs(1), &creds()).await.unwrap()
}

/// A raw stream to a test server, its handshake done: what is written to
/// it next is read as frames.
pub async fn raw(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    tierpool_net::auth::introduce(&mut s, &creds(), addr, Duration::from_secs(1)).await.unwrap();
    s
}

/// Starts a server with `limits` on the current runtime: its address and figures.
pub async fn start(limits: Limits, delay: Duration) -> (String, StatsHandle) {
    let listener = tierpool_net::bind("127.0.0.1:0").await.unwrap();
    let server = Server::new(listener, limits, secret()).unwrap();
    let (addr, stats) = (server.local_addr().unwrap(), server.stats());
    tokio::spawn(server.run(Arc::new(TestHandler { delay })));
    (addr, stats)
}

/// Small limits: `conns` connections, `shared` bytes beyond their
/// allowances, messages up to 64 KiB and payloads up to `payload`.
pub fn small_limits(conns: usize, shared: u64, payload: u64) -> Limits {
    Limits {
        budget: ByteSize(conns as u64 * tierpool_net::ALLOWANCE + shared),
        max_connections: conns,
        max_message: ByteSize(64 << 10),
        max_payload: ByteSize(payload),
        ..Limits::default()
    }
}

/// The encoded `PutChunk` message every test frame carries.
pub fn put_message() -> Vec<u8> {
    let key = ChunkKey::hashed(InodeId(1), 0, 1);
    tierpool_proto::encode(&WorkerRequest::PutChunk { key, checksum: 0, attrs: ChunkAttrs::default(), table: 0 })
}

/// A frame header of a worker request.
pub fn head(header_len: usize, payload_len: usize) -> [u8; 12] {
    FrameHeader { kind: KIND_WORKER_REQUEST, header_len: header_len as u32, payload_len: payload_len as u32 }.encode()
}

/// A raw peer that sends a `PutChunk` claiming `claimed` payload bytes,
/// then only `sent` of them (as fast as the server takes them), and stays
/// connected until dropped.
pub struct Hog {
    pub read: OwnedReadHalf,
    writer: JoinHandle<()>,
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.writer.abort();
    }
}

pub async fn hog(addr: &str, claimed: usize, sent: usize) -> Hog {
    let (read, mut w) = raw(addr).await.into_split();
    let msg = put_message();
    let writer = tokio::spawn(async move {
        let mut bytes = head(msg.len(), claimed).to_vec();
        bytes.extend_from_slice(&msg);
        bytes.resize(bytes.len() + sent, 0x5a);
        // The server may refuse the frame and close: then the write fails.
        let _ = w.write_all(&bytes).await;
        std::future::pending::<()>().await;
    });
    Hog { read, writer }
}

/// A `Ping` frame.
pub fn ping_frame() -> Vec<u8> {
    let msg = tierpool_proto::encode(&WorkerRequest::Ping);
    let mut f = head(msg.len(), 0).to_vec();
    f.extend_from_slice(&msg);
    f
}

/// Sends a `Ping` on `s` and checks the answer is `Ok(Pong)`.
pub async fn ping_raw(s: &mut TcpStream) {
    s.write_all(&ping_frame()).await.unwrap();
    let mut h = [0u8; 12];
    s.read_exact(&mut h).await.unwrap();
    let len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.unwrap();
    let r: std::result::Result<WorkerResponse, Error> = tierpool_proto::decode(&body).unwrap();
    assert_eq!(r, Ok(WorkerResponse::Pong));
}

/// Reads until the server closes `s`; how long that took. Panics after `limit`.
pub async fn closed_after(s: &mut (impl AsyncRead + Unpin), limit: Duration) -> Duration {
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(t.elapsed()), s.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection for {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return t.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

/// Waits until `cond` holds, at most `limit`.
pub async fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
