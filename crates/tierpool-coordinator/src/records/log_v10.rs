//! Log record version 10: version 9, and snapshots (taken, removed and
//! restored). Every op with a version 9 form is stored as it was, inside
//! `OpV10::V9`.
//!
//! Frozen once released. Versions 1 to 9 are still read. Version 10 holds
//! every op.

use super::log_v9::{OpV9, RecordV9};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV10 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV10,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV10 {
    V9(OpV9),
    SnapshotCreate { path: String, name: String },
    SnapshotRemove { path: String, name: String },
    SnapshotRestore { path: String, name: String },
}

/// Whether `op` is one version 9 has no form for.
pub(super) fn snapshot(op: &MetaOp) -> bool {
    matches!(op, MetaOp::SnapshotCreate { .. } | MetaOp::SnapshotRemove { .. } | MetaOp::SnapshotRestore { .. })
}

impl TryFrom<&LogRecord> for RecordV10 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let (path, name) = match &r.op {
            MetaOp::SnapshotCreate { path, name }
            | MetaOp::SnapshotRemove { path, name }
            | MetaOp::SnapshotRestore { path, name } => (path.clone(), name.clone()),
            _ => return Ok(RecordV10 { lsn: r.lsn, time: r.time, owner, op: OpV10::V9(RecordV9::try_from(r)?.op) }),
        };
        let op = match &r.op {
            MetaOp::SnapshotCreate { .. } => OpV10::SnapshotCreate { path, name },
            MetaOp::SnapshotRemove { .. } => OpV10::SnapshotRemove { path, name },
            _ => OpV10::SnapshotRestore { path, name },
        };
        Ok(RecordV10 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV10> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV10) -> Result<Self> {
        let op = match r.op {
            OpV10::V9(op) => return LogRecord::try_from(RecordV9 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV10::SnapshotCreate { path, name } => MetaOp::SnapshotCreate { path, name },
            OpV10::SnapshotRemove { path, name } => MetaOp::SnapshotRemove { path, name },
            OpV10::SnapshotRestore { path, name } => MetaOp::SnapshotRestore { path, name },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
