//! Log record version 15: version 14, and `UpdateInline` (an existing file
//! given small contents held by the metadata). Every op with a version 14
//! form is stored as it was, inside `OpV15::V14`.
//!
//! Frozen once released. Versions 1 to 14 are still read. Version 15 holds
//! every op.

use super::log_v14::{OpV14, RecordV14};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV15 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV15,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV15 {
    V14(OpV14),
    /// `version` without the inline bit.
    UpdateInline {
        inode: u64,
        version: u64,
        data: Bytes,
    },
}

/// Whether `op` is one version 14 has no form for.
pub(super) fn inline_update(op: &MetaOp) -> bool {
    matches!(op, MetaOp::UpdateInline { .. })
}

impl TryFrom<&LogRecord> for RecordV15 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::UpdateInline { inode, version, data } => {
                OpV15::UpdateInline { inode: inode.0, version: *version, data: data.clone() }
            }
            _ => OpV15::V14(RecordV14::try_from(r)?.op),
        };
        Ok(RecordV15 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV15> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV15) -> Result<Self> {
        let op = match r.op {
            OpV15::V14(op) => return LogRecord::try_from(RecordV14 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV15::UpdateInline { inode, version, data } => {
                MetaOp::UpdateInline { inode: InodeId(inode), version, data }
            }
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
