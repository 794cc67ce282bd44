//! Frame layout, little endian (frames follow the handshake, `handshake.rs`):
//!
//! ```text
//! magic "TP" | version u8 | kind u8 | header_len u32 | payload_len u32 | header | payload
//! ```
//!
//! `kind` says what `header` is: a request to the coordinator
//! ([`crate::CoordRequest`]), a request to a worker
//! ([`crate::WorkerRequest`]), or a response (`Result<Response, Error>` of
//! the service asked); `header` is postcard-encoded;
//! `payload` carries chunk bytes unencoded, so bulk data is never copied by a
//! serialiser. Both lengths are checked against fixed maxima before any
//! allocation, so a hostile peer cannot make a server allocate unbounded memory.

use tierpool_types::{Error, ErrorKind, Result, MAX_CHUNK_SIZE};

pub const MAGIC: [u8; 2] = *b"TP";
/// Bumped on any incompatible change of frames, messages or the handshake.
/// 4: every connection opens with the handshake; 5: partitions move
/// between workers (table versions, moved/busy answers, copies); 6:
/// replicas (table fences, fsck); 7: chunk keys name their home partition
/// (placement policies), layouts say whether policies are in use; 8:
/// under-stores (attachments, origins of files, chunks below); 9: write-back
/// (chunks kept on disk, the `back` write mode); 10: a file persisted below
/// names the key it was written to; 11: workers say when files were last
/// used (`LastUse`); 18: the metadata log's figures in the status; 19:
/// `UpdateInline` (small contents given to an existing file), `MetaStat`;
/// 24: workers report the chunk buffers they keep for reuse; 25: and the
/// connections they accepted, local ones apart; 26: `GetChunks`; 27:
/// `PutChunks`; 28: workers report the shorter buffers they keep too; 29:
/// `InlineAfter`, small files' bytes after an answer, in its payload; 30:
/// `GetChunks` of chunks held in memory only; 32: the metadata log's
/// fsyncs issued by lone writers in the status; 33: `Ancestry`, `Usage`;
/// 34: `Owed`, `OwedFiles`.
pub const PROTOCOL_VERSION: u8 = 35;
pub const FRAME_HEADER_LEN: usize = 12;
/// Largest encoded message (a listing of a very large directory fits).
pub const MAX_HEADER_LEN: u32 = 256 << 20;
/// Largest payload: the largest chunk (and what a batch of chunks or of
/// small files' bytes may carry in one answer).
pub const MAX_PAYLOAD_LEN: u32 = MAX_CHUNK_SIZE as u32;

/// A request to the coordinator.
pub const KIND_COORD_REQUEST: u8 = 1;
/// A request to a worker.
pub const KIND_WORKER_REQUEST: u8 = 2;
/// A response, to either.
pub const KIND_RESPONSE: u8 = 3;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u8,
    pub header_len: u32,
    pub payload_len: u32,
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = PROTOCOL_VERSION;
        b[3] = self.kind;
        b[4..8].copy_from_slice(&self.header_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }

    /// Validates magic, version, kind and lengths.
    pub fn decode(b: &[u8; FRAME_HEADER_LEN]) -> Result<FrameHeader> {
        let bad = |m: String| Err(Error::new(ErrorKind::Protocol, m));
        if b[0..2] != MAGIC {
            return bad(format!("bad frame magic {:02x}{:02x}: not a tierpool peer", b[0], b[1]));
        }
        if b[2] != PROTOCOL_VERSION {
            return bad(format!("protocol version {} is not supported (this build speaks {})", b[2], PROTOCOL_VERSION));
        }
        if !(KIND_COORD_REQUEST..=KIND_RESPONSE).contains(&b[3]) {
            return bad(format!("unknown frame kind {}", b[3]));
        }
        let header_len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let payload_len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if header_len == 0 || header_len > MAX_HEADER_LEN {
            return bad(format!("frame header length {header_len} out of range"));
        }
        if payload_len > MAX_PAYLOAD_LEN {
            return bad(format!("frame payload length {payload_len} exceeds {MAX_PAYLOAD_LEN}"));
        }
        Ok(FrameHeader { kind: b[3], header_len, payload_len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let h = FrameHeader { kind: KIND_RESPONSE, header_len: 17, payload_len: 4 << 20 };
        assert_eq!(FrameHeader::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn rejects_garbage_wrong_version_and_huge_lengths() {
        let e = FrameHeader::decode(b"GET / HTTP/1").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Protocol);
        let mut b = FrameHeader { kind: KIND_COORD_REQUEST, header_len: 1, payload_len: 0 }.encode();
        b[2] = 99;
        assert!(FrameHeader::decode(&b).unwrap_err().message.contains("version 99"));
        let b = FrameHeader { kind: KIND_WORKER_REQUEST, header_len: 1, payload_len: MAX_PAYLOAD_LEN + 1 }.encode();
        assert!(FrameHeader::decode(&b).is_err());
        let b = FrameHeader { kind: KIND_COORD_REQUEST, header_len: MAX_HEADER_LEN + 1, payload_len: 0 }.encode();
        assert!(FrameHeader::decode(&b).is_err());
        for kind in [0, 4, 255] {
            let b = FrameHeader { kind, header_len: 1, payload_len: 0 }.encode();
            assert!(FrameHeader::decode(&b).unwrap_err().message.contains("unknown frame kind"));
        }
    }
}
