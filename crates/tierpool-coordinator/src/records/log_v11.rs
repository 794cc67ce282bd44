//! Log record version 11: version 10, and checkpoints of regions (taken,
//! and the bracket of their restores). Every op with a version 10 form is
//! stored as it was, inside `OpV11::V10`.
//!
//! Frozen once released. Versions 1 to 10 are still read. Version 11 holds
//! every op.

use super::frozen::ChunkRefV1;
use super::log_v10::{OpV10, RecordV10};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{ChunkRef, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV11 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV11,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV11 {
    V10(OpV10),
    Checkpoint { path: String, name: String, inode: u64, version: u64, chunks: Vec<(ChunkRefV1, Option<u32>)> },
    RegionRestore { path: String, name: String, done: bool },
}

/// Whether `op` is one version 10 has no form for.
pub(super) fn checkpoint(op: &MetaOp) -> bool {
    matches!(op, MetaOp::Checkpoint { .. } | MetaOp::RegionRestore { .. })
}

impl TryFrom<&LogRecord> for RecordV11 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::Checkpoint { path, name, inode, version, chunks } => OpV11::Checkpoint {
                path: path.clone(),
                name: name.clone(),
                inode: inode.0,
                version: *version,
                chunks: chunks.iter().map(|r| (ChunkRefV1::from(*r), r.home)).collect(),
            },
            MetaOp::RegionRestore { path, name, done } => {
                OpV11::RegionRestore { path: path.clone(), name: name.clone(), done: *done }
            }
            _ => OpV11::V10(RecordV10::try_from(r)?.op),
        };
        Ok(RecordV11 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV11> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV11) -> Result<Self> {
        let op = match r.op {
            OpV11::V10(op) => return LogRecord::try_from(RecordV10 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV11::Checkpoint { path, name, inode, version, chunks } => MetaOp::Checkpoint {
                path,
                name,
                inode: tierpool_types::InodeId(inode),
                version,
                chunks: chunks.into_iter().map(|(c, home)| ChunkRef { home, ..ChunkRef::from(c) }).collect(),
            },
            OpV11::RegionRestore { path, name, done } => MetaOp::RegionRestore { path, name, done },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
