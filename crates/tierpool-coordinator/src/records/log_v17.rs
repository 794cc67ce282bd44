//! Log record version 17: version 16, and `MakeFileAt` (an empty file made
//! by name with the id its writer reserved: a mount that answered a create
//! itself makes the file with its first publish). Every op with a version
//! 16 form is stored as it was, inside `OpV17::V16`.
//!
//! Frozen once released. Versions 1 to 16 are still read. Version 17 holds
//! every op.

use super::log_v16::{OpV16, RecordV16};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV17 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV17,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV17 {
    V16(OpV16),
    MakeFileAt { parent: u64, name: String, inode: u64, chunk_size: u64, mode: u32 },
}

/// Whether `op` is one version 16 has no form for.
pub(super) fn made_file(op: &MetaOp) -> bool {
    matches!(op, MetaOp::MakeFileAt { .. })
}

impl TryFrom<&LogRecord> for RecordV17 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::MakeFileAt { parent, name, inode, chunk_size, mode } => OpV17::MakeFileAt {
                parent: parent.0,
                name: name.clone(),
                inode: inode.0,
                chunk_size: *chunk_size,
                mode: *mode,
            },
            _ => OpV17::V16(RecordV16::try_from(r)?.op),
        };
        Ok(RecordV17 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV17> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV17) -> Result<Self> {
        let op = match r.op {
            OpV17::V16(op) => return LogRecord::try_from(RecordV16 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV17::MakeFileAt { parent, name, inode, chunk_size, mode } => {
                MetaOp::MakeFileAt { parent: InodeId(parent), name, inode: InodeId(inode), chunk_size, mode }
            }
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
