//! What crosses a socket or lands in the coordinator's log.
//!
//! - [`frame`]: the framing of every message (magic, version, lengths), checked before decoding;
//! - [`msg`]: requests and responses of the control and data planes;
//! - [`record`]: the coordinator's log records and snapshots, each with a version and a CRC.
//!
//! Formats are versioned: add variants at the end of enums, never change one in place.

pub mod frame;
pub mod msg;
pub mod record;

pub use frame::{FrameHeader, FRAME_HEADER_LEN, MAX_HEADER_LEN, MAX_PAYLOAD_LEN, PROTOCOL_VERSION};
pub use msg::{ChunkPlace, Layout, PoolStatus, Request, Response, WorkerStats, WorkerStatus};

use tierpool_types::{Error, ErrorKind, Result};

/// Encodes a message body.
pub fn encode<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    postcard::to_stdvec(msg).expect("in-memory serialisation of tierpool messages cannot fail")
}

/// Decodes a message body; a malformed body is a `Protocol` error, never a panic.
pub fn decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::new(ErrorKind::Protocol, format!("malformed message: {e}")))
}
