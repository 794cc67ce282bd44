//! Log record version 8: version 7, and a file persisted below naming the
//! key it was written to (so a rename made meanwhile makes it `Stale`
//! instead of clean at a key that does not hold it). Every op with a
//! version 7 form is stored as it was, inside `OpV8::V7`.
//!
//! Frozen once released. Versions 1 to 7 are still read. Version 8 holds
//! every op.

use super::frozen::ChunkRefV1;
use super::log_v7::{OpV7, RecordV7};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{ChunkRef, InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV8 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV8,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV8 {
    V7(OpV7),
    Persisted { inode: u64, chunks: Vec<(ChunkRefV1, Option<u32>)>, size: u64, mtime: u64, etag: String, key: String },
}

/// Whether `op` is one version 7 has no form for.
pub(super) fn keyed(op: &MetaOp) -> bool {
    matches!(op, MetaOp::Persisted { key: Some(_), .. })
}

impl TryFrom<&LogRecord> for RecordV8 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::Persisted { inode, chunks, size, mtime, etag, key: Some(key) } => OpV8::Persisted {
                inode: inode.0,
                chunks: chunks.iter().map(|r| (ChunkRefV1::from(*r), r.home)).collect(),
                size: *size,
                mtime: *mtime,
                etag: etag.clone(),
                key: key.clone(),
            },
            _ => OpV8::V7(RecordV7::try_from(r)?.op),
        };
        Ok(RecordV8 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV8> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV8) -> Result<Self> {
        let op = match r.op {
            OpV8::V7(op) => return LogRecord::try_from(RecordV7 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV8::Persisted { inode, chunks, size, mtime, etag, key } => MetaOp::Persisted {
                inode: InodeId(inode),
                chunks: chunks.into_iter().map(|(r, home)| ChunkRef { home, ..r.into() }).collect(),
                size,
                mtime,
                etag,
                key: Some(key),
            },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
