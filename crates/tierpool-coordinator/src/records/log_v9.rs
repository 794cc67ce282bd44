//! Log record version 9: version 8, and small files committed with their
//! bytes (`CommitInline`, held by the metadata). Every op with a version 8
//! form is stored as it was, inside `OpV9::V8`.
//!
//! Frozen once released. Versions 1 to 8 are still read. Version 9 holds
//! every op.

use super::frozen::AttrsV1;
use super::log_v8::{OpV8, RecordV8};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV9 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV9,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV9 {
    V8(OpV8),
    CommitInline { path: String, inode: u64, data: Bytes, chunk_size: u64, attrs: AttrsV1, mode: u32, overwrite: bool },
}

/// Whether `op` is one version 8 has no form for.
pub(super) fn inline(op: &MetaOp) -> bool {
    matches!(op, MetaOp::CommitInline { .. })
}

impl TryFrom<&LogRecord> for RecordV9 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::CommitInline { path, inode, data, chunk_size, attrs, mode, overwrite } => OpV9::CommitInline {
                path: path.clone(),
                inode: inode.0,
                data: data.clone(),
                chunk_size: *chunk_size,
                attrs: (*attrs).into(),
                mode: *mode,
                overwrite: *overwrite,
            },
            _ => OpV9::V8(RecordV8::try_from(r)?.op),
        };
        Ok(RecordV9 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV9> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV9) -> Result<Self> {
        let op = match r.op {
            OpV9::V8(op) => return LogRecord::try_from(RecordV8 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV9::CommitInline { path, inode, data, chunk_size, attrs, mode, overwrite } => MetaOp::CommitInline {
                path,
                inode: InodeId(inode),
                data,
                chunk_size,
                attrs: attrs.try_into()?,
                mode,
                overwrite,
            },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
