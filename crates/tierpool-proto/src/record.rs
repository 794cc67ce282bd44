//! The coordinator's durable records.
//!
//! Log segment: a sequence of records, each
//! `len u32 | crc32c u32 | body` where body = `version u8 | postcard(LogRecord)`
//! and the CRC covers the body. A torn or corrupt tail is detected by length
//! or CRC and ends the replay there.
//!
//! Snapshot file: `magic "TPSNAP" | version u8 | crc32c u32 | len u64 | postcard(Snapshot)`.
//! Version 2 holds the current [`MetaState`]; version 1 snapshots (no
//! owners, links or chunk versions) are read and migrated
//! ([`tierpool_meta::legacy`]). Log records are still version 1: the ops
//! added since are new variants at the end of [`MetaOp`], so old records
//! decode unchanged.

use serde::{Deserialize, Serialize};
use tierpool_meta::legacy::MetaStateV1;
use tierpool_meta::{MetaOp, MetaState};
use tierpool_types::{Error, ErrorKind, Result};

pub const LOG_RECORD_VERSION: u8 = 1;
pub const SNAPSHOT_VERSION: u8 = 2;
const SNAPSHOT_MAGIC: &[u8; 6] = b"TPSNAP";
const MAX_RECORD_LEN: u32 = 512 << 20;

/// One logged metadata change: the op, its sequence number and the time it ran at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    pub lsn: u64,
    pub time: u64,
    pub op: MetaOp,
}

/// The whole state after the record with sequence number `lsn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub lsn: u64,
    pub state: MetaState,
}

/// A version 1 snapshot, read only to migrate it.
#[derive(Deserialize)]
struct SnapshotV1 {
    lsn: u64,
    state: MetaStateV1,
}

/// Appends the framed record to `out`.
pub fn encode_record(rec: &LogRecord, out: &mut Vec<u8>) {
    let mut body = vec![LOG_RECORD_VERSION];
    body.extend_from_slice(&crate::encode(rec));
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

/// Outcome of decoding one record from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A record and the number of bytes it used.
    Record(LogRecord, usize),
    /// Clean end of the buffer.
    End,
    /// A torn or corrupt record starts here: replay ends, the tail is discarded.
    Torn(String),
}

pub fn decode_record(buf: &[u8]) -> Decoded {
    if buf.is_empty() {
        return Decoded::End;
    }
    if buf.len() < 8 {
        return Decoded::Torn(format!("{} trailing bytes, shorter than a record header", buf.len()));
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len == 0 || len > MAX_RECORD_LEN || buf.len() < 8 + len as usize {
        return Decoded::Torn(format!("record length {len} does not fit the {} remaining bytes", buf.len() - 8));
    }
    let body = &buf[8..8 + len as usize];
    if crc32c::crc32c(body) != crc {
        return Decoded::Torn("record checksum mismatch".into());
    }
    if body[0] != LOG_RECORD_VERSION {
        return Decoded::Torn(format!("unknown log record version {}", body[0]));
    }
    match crate::decode::<LogRecord>(&body[1..]) {
        Ok(r) => Decoded::Record(r, 8 + len as usize),
        Err(e) => Decoded::Torn(e.message),
    }
}

pub fn encode_snapshot(snap: &Snapshot) -> Vec<u8> {
    let body = crate::encode(snap);
    let mut out = Vec::with_capacity(body.len() + 19);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.push(SNAPSHOT_VERSION);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn decode_snapshot(buf: &[u8]) -> Result<Snapshot> {
    let corrupt = |m: &str| Error::new(ErrorKind::Corrupt, format!("metadata snapshot: {m}"));
    if buf.len() < 19 || &buf[0..6] != SNAPSHOT_MAGIC {
        return Err(corrupt("bad header"));
    }
    let version = buf[6];
    if version != SNAPSHOT_VERSION && version != 1 {
        return Err(corrupt(&format!("unsupported version {version}")));
    }
    let crc = u32::from_le_bytes([buf[7], buf[8], buf[9], buf[10]]);
    let mut lenb = [0u8; 8];
    lenb.copy_from_slice(&buf[11..19]);
    let len = u64::from_le_bytes(lenb);
    let body = &buf[19..];
    if body.len() as u64 != len {
        return Err(corrupt("truncated"));
    }
    if crc32c::crc32c(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    if version == 1 {
        let old: SnapshotV1 = crate::decode(body).map_err(|e| corrupt(&e.message))?;
        return Ok(Snapshot { lsn: old.lsn, state: MetaState::from(old.state) });
    }
    crate::decode(body).map_err(|e| corrupt(&e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lsn: u64) -> LogRecord {
        LogRecord { lsn, time: 5, op: MetaOp::Mkdir { path: format!("/d{lsn}"), parents: false, mode: 0o755 } }
    }

    #[test]
    fn records_round_trip_and_torn_tails_are_detected() {
        let mut buf = Vec::new();
        encode_record(&rec(1), &mut buf);
        encode_record(&rec(2), &mut buf);
        let Decoded::Record(r1, n1) = decode_record(&buf) else { panic!() };
        assert_eq!(r1, rec(1));
        let Decoded::Record(r2, n2) = decode_record(&buf[n1..]) else { panic!() };
        assert_eq!(r2, rec(2));
        assert_eq!(decode_record(&buf[n1 + n2..]), Decoded::End);
        // Every truncation of the second record is torn, never a wrong record.
        for cut in n1 + 1..n1 + n2 {
            assert!(matches!(decode_record(&buf[n1..cut]), Decoded::Torn(_)), "cut at {cut}");
        }
        let mut bad = buf.clone();
        bad[n1 + 10] ^= 0x40;
        assert!(matches!(decode_record(&bad[n1..]), Decoded::Torn(_)));
    }

    /// The shape version 1 wrote, spelled out with public types.
    mod v1 {
        use serde::Serialize;
        use std::collections::{BTreeMap, BTreeSet};
        use tierpool_meta::WorkerRecord;
        use tierpool_placement::PartitionTable;
        use tierpool_types::{ChunkAttrs, InodeId, WorkerId};

        #[derive(Serialize)]
        pub struct Snapshot {
            pub lsn: u64,
            pub state: State,
        }
        #[derive(Serialize)]
        pub struct State {
            pub initialised: bool,
            pub inodes: BTreeMap<InodeId, Inode>,
            pub next_inode: u64,
            pub workers: BTreeMap<WorkerId, WorkerRecord>,
            pub next_worker_id: u64,
            pub table: PartitionTable,
            pub pending_gc: BTreeSet<InodeId>,
        }
        #[derive(Serialize)]
        pub struct Inode {
            pub parent: InodeId,
            pub name: String,
            pub mode: u32,
            pub mtime: u64,
            pub ctime: u64,
            pub attrs: ChunkAttrs,
            pub body: Body,
        }
        #[derive(Serialize)]
        pub enum Body {
            File { size: u64, chunk_size: u64, checksums: Vec<u32> },
            Dir { children: BTreeMap<String, InodeId> },
        }
    }

    #[test]
    fn version_1_snapshots_are_migrated() {
        use std::collections::{BTreeMap, BTreeSet};
        use tierpool_types::{ChunkAttrs, ChunkRef, InodeId};
        let attrs = ChunkAttrs::default();
        let root = v1::Inode {
            parent: InodeId(1),
            name: String::new(),
            mode: 0o755,
            mtime: 1,
            ctime: 1,
            attrs,
            body: v1::Body::Dir { children: BTreeMap::from([("f".to_string(), InodeId(2))]) },
        };
        let f = v1::Inode {
            parent: InodeId(1),
            name: "f".into(),
            mode: 0o600,
            mtime: 4,
            ctime: 4,
            attrs,
            body: v1::Body::File { size: 5, chunk_size: 4096, checksums: vec![77] },
        };
        let snap = v1::Snapshot {
            lsn: 42,
            state: v1::State {
                initialised: true,
                inodes: BTreeMap::from([(InodeId(1), root), (InodeId(2), f)]),
                next_inode: 3,
                workers: BTreeMap::new(),
                next_worker_id: 1,
                table: tierpool_placement::PartitionTable::new(8),
                pending_gc: BTreeSet::new(),
            },
        };
        let body = crate::encode(&snap);
        let mut bytes = SNAPSHOT_MAGIC.to_vec();
        bytes.push(1);
        bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&body);
        let back = decode_snapshot(&bytes).unwrap();
        assert_eq!(back.lsn, 42);
        back.state.check_invariants().unwrap();
        let info = back.state.stat("/f").unwrap();
        assert_eq!(
            (info.mode, info.size, info.chunks.clone()),
            (0o600, 5, vec![ChunkRef { version: 1, len: 5, checksum: 77 }])
        );
        // and it is written back as the current version
        let again = encode_snapshot(&back);
        assert_eq!(again[6], SNAPSHOT_VERSION);
        assert_eq!(decode_snapshot(&again).unwrap(), back);
    }
}
