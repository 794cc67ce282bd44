//! Log record version 14: version 13, and `SetWriteMode` (a write mode of
//! a file's own). Every op with a version 13 form is stored as it was,
//! inside `OpV14::V13`.
//!
//! Frozen once released. Versions 1 to 13 are still read. Version 14 holds
//! every op.

use super::log_v13::{OpV13, RecordV13};
use super::log_v7::{mode_code, mode_of};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV14 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV14,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV14 {
    V13(OpV13),
    /// `mode`: log version 7's codes; `None`: the attachment's mode again.
    SetWriteMode {
        path: String,
        mode: Option<u8>,
        recursive: bool,
    },
}

/// Whether `op` is one version 13 has no form for.
pub(super) fn write_mode(op: &MetaOp) -> bool {
    matches!(op, MetaOp::SetWriteMode { .. })
}

impl TryFrom<&LogRecord> for RecordV14 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::SetWriteMode { path, mode, recursive } => {
                OpV14::SetWriteMode { path: path.clone(), mode: mode.map(mode_code), recursive: *recursive }
            }
            _ => OpV14::V13(RecordV13::try_from(r)?.op),
        };
        Ok(RecordV14 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV14> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV14) -> Result<Self> {
        let op = match r.op {
            OpV14::V13(op) => return LogRecord::try_from(RecordV13 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV14::SetWriteMode { path, mode, recursive } => {
                MetaOp::SetWriteMode { path, mode: mode.map(mode_of).transpose()?, recursive }
            }
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
