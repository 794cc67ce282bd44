//! Log record version 5: version 4 and replication (how many copies of a
//! chunk the pool keeps, per path; workers down and back up). An op of
//! version 4 is stored as it was, inside `OpV5::V4`.
//!
//! Frozen once released. Versions 1 to 4 are still read. Version 5 holds
//! every op.

use super::frozen::corrupt;
use super::log_v4::{op_from_v4, op_to_v4, OpV4};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{Result, Spread, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV5 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV5,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV5 {
    V4(OpV4),
    SetReplication { replicas: u8 },
    WorkerDown { id: u32 },
    WorkerUp { id: u32 },
    SetReplicas { path: String, replicas: u8, recursive: bool },
}

impl TryFrom<&LogRecord> for RecordV5 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::SetReplication { replicas, spread: Spread::Host } => OpV5::SetReplication { replicas: *replicas },
            MetaOp::SetReplication { .. } | MetaOp::SetPlacement { .. } => {
                return Err(corrupt("ops of placement have no form in log record version 5"))
            }
            MetaOp::WorkerDown { id } => OpV5::WorkerDown { id: id.0 },
            MetaOp::WorkerUp { id } => OpV5::WorkerUp { id: id.0 },
            MetaOp::SetReplicas { path, replicas, recursive } => {
                OpV5::SetReplicas { path: path.clone(), replicas: *replicas, recursive: *recursive }
            }
            op => OpV5::V4(op_to_v4(op)?),
        };
        Ok(RecordV5 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV5> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV5) -> Result<Self> {
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        let op = match r.op {
            OpV5::V4(op) => op_from_v4(op)?,
            OpV5::SetReplication { replicas } => MetaOp::SetReplication { replicas, spread: Spread::Host },
            OpV5::WorkerDown { id } => MetaOp::WorkerDown { id: WorkerId(id) },
            OpV5::WorkerUp { id } => MetaOp::WorkerUp { id: WorkerId(id) },
            OpV5::SetReplicas { path, replicas, recursive } => MetaOp::SetReplicas { path, replicas, recursive },
        };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
