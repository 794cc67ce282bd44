//! What crosses a socket between tierpool processes.
//!
//! - [`handshake`]: the bytes that open every connection, by which both ends prove they know the pool's secret;
//! - [`frame`]: the framing of every message (magic, version, kind, lengths), checked before decoding;
//! - [`coord`]: what clients and workers ask the coordinator, and its answers;
//! - [`worker`]: what clients and the coordinator ask a worker, and its answers;
//! - [`payload`]: the bytes after a message, and the answers that move theirs there;
//! - [`status`]: the figures a pool reports.
//!
//! Each server has a request enum of its own, named by a [`Service`]; the
//! frame's kind byte says which service a request is for, so a server
//! decodes only requests it serves and the compiler checks that it serves
//! every one. A response carries `Result<Response, Error>`.
//!
//! The protocol is versioned as a whole ([`PROTOCOL_VERSION`], checked on
//! every frame and in the handshake): both ends of a connection run the same version. Durable
//! formats are not defined here (see the coordinator's `records` and the
//! tier's chunk file format).

pub mod coord;
pub mod frame;
pub mod handshake;
pub mod payload;
pub mod status;
pub mod worker;

pub use coord::{
    AttachedDir, ChangesAnswer, CoordRequest, CoordResponse, FsckEntry, Layout, MAX_BATCH, MAX_CHANGES_WAIT_MS,
    MAX_PAGES_ASKED,
};
pub use frame::{FrameHeader, FRAME_HEADER_LEN, MAX_HEADER_LEN, MAX_PAYLOAD_LEN, PROTOCOL_VERSION};
pub use payload::Payload;
pub use status::{
    AttachmentStatus, ChangeFeedStatus, Connections, InlineStatus, MetadataLogStatus, MigrationStatus, OwedStatus,
    PoolStatus, PoolUsage, ReplicationStatus, SnapshotStatus, TransactionStatus, WorkerStats, WorkerStatus,
};
pub use worker::{fetched_bytes, split_payload, ChunkPlace, WorkerRequest, WorkerResponse};

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use tierpool_types::{Error, ErrorKind, Result};

/// A server role: the kind byte of its requests and the messages it speaks.
pub trait Service: Send + Sync + 'static {
    /// Frame kind of requests to this service.
    const KIND: u8;
    /// How people name it ("coordinator", "worker").
    const ROLE: &'static str;
    type Request: Serialize + DeserializeOwned + Debug + Send + Sync + 'static;
    type Response: Serialize + DeserializeOwned + Debug + Send + Sync + 'static;

    /// An answer as it is sent: bytes it holds may move to the payload.
    fn detach(resp: Result<Self::Response>, payload: Payload) -> (Result<Self::Response>, Payload) {
        (resp, payload)
    }

    /// An answer as read: what [`detach`](Self::detach) moved, back in
    /// place; the payload left over.
    fn attach(resp: Self::Response, payload: bytes::Bytes) -> Result<(Self::Response, bytes::Bytes)> {
        Ok((resp, payload))
    }
}

/// The coordinator: metadata, membership, layout.
pub struct Coordinator;

impl Service for Coordinator {
    const KIND: u8 = frame::KIND_COORD_REQUEST;
    const ROLE: &'static str = "coordinator";
    type Request = CoordRequest;
    type Response = CoordResponse;

    fn detach(resp: Result<CoordResponse>, payload: Payload) -> (Result<CoordResponse>, Payload) {
        payload::detach_inline(resp, payload)
    }

    fn attach(resp: CoordResponse, payload: bytes::Bytes) -> Result<(CoordResponse, bytes::Bytes)> {
        payload::attach_inline(resp, payload)
    }
}

/// A worker: chunk bytes.
pub struct Worker;

impl Service for Worker {
    const KIND: u8 = frame::KIND_WORKER_REQUEST;
    const ROLE: &'static str = "worker";
    type Request = WorkerRequest;
    type Response = WorkerResponse;
}

/// Encodes a message body.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    encode_after(msg, 0, 0)
}

/// Encodes a message body after `before` zero bytes (for the caller to
/// fill in: a frame header), in one allocation with room for `after` more
/// (a short payload). The body is measured first, so it is written once
/// and never moved: bytes it carries (a small file's) are copied once.
pub fn encode_after<T: Serialize>(msg: &T, before: usize, after: usize) -> Vec<u8> {
    const INFALLIBLE: &str = "in-memory serialisation of tierpool messages cannot fail";
    let len = postcard::experimental::serialized_size(msg).expect(INFALLIBLE);
    let mut out = Vec::with_capacity(before + len + after);
    out.resize(before, 0);
    postcard::to_extend(msg, out).expect(INFALLIBLE)
}

/// Decodes a message body; a malformed body is a `Protocol` error, never a panic.
pub fn decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::new(ErrorKind::Protocol, format!("malformed message: {e}")))
}
