//! Log record version 4: version 3 and the speed of a worker (the share of
//! a healthy worker's bandwidth it delivers, which weighs its share of
//! partitions). An op of version 3 is stored as it was, inside `OpV4::V3`.
//!
//! Frozen once released. Versions 1 to 3 are still read.

use super::frozen::corrupt;
use super::log_v3::{op_from_v3, op_to_v3, OpV3};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV4 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV4,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV4 {
    V3(OpV3),
    SetSpeed { id: u32, percent: u8 },
}

impl TryFrom<&LogRecord> for RecordV4 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        Ok(RecordV4 { lsn: r.lsn, time: r.time, owner, op: op_to_v4(&r.op)? })
    }
}

impl TryFrom<RecordV4> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV4) -> Result<Self> {
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op: op_from_v4(r.op)? })
    }
}

/// The version 4 form of `op`; an error for an op added after it.
pub(super) fn op_to_v4(op: &MetaOp) -> Result<OpV4> {
    Ok(match op {
        MetaOp::SetSpeed { id, percent } => OpV4::SetSpeed { id: id.0, percent: *percent },
        MetaOp::SetReplication { .. }
        | MetaOp::WorkerDown { .. }
        | MetaOp::WorkerUp { .. }
        | MetaOp::SetReplicas { .. }
        | MetaOp::SetPlacement { .. } => {
            return Err(corrupt("ops of replication have no form in log record version 4"))
        }
        op => OpV4::V3(op_to_v3(op)?),
    })
}

pub(super) fn op_from_v4(op: OpV4) -> Result<MetaOp> {
    Ok(match op {
        OpV4::V3(op) => op_from_v3(op)?,
        OpV4::SetSpeed { id, percent } => MetaOp::SetSpeed { id: WorkerId(id), percent },
    })
}
