//! Log record version 12: version 11, and the commits of transactions.
//! Every op with a version 11 form is stored as it was, inside
//! `OpV12::V11`.
//!
//! Frozen once released. Versions 1 to 11 are still read. Version 12 holds
//! every op.

use super::frozen::ChunkRefV1;
use super::log_v11::{OpV11, RecordV11};
use super::log_v13::{file_of, file_v12};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV12 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV12,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV12 {
    V11(OpV11),
    Transact { task: Option<String>, files: Vec<TxFileV12> },
}

/// One file a transaction wrote: as `UpdateFile` stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxFileV12 {
    pub inode: u64,
    pub size: u64,
    pub truncate: Option<u64>,
    pub chunks: Vec<(u64, ChunkRefV1, Option<u32>)>,
}

/// Whether `op` is one version 11 has no form for.
pub(super) fn transaction(op: &MetaOp) -> bool {
    matches!(op, MetaOp::Transact { .. })
}

impl TryFrom<&LogRecord> for RecordV12 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::Transact { ns, .. } if !ns.is_empty() => {
                return Err(Error::invalid(
                    "a transaction that changed the namespace has no log record version 12 form",
                ))
            }
            MetaOp::Transact { task, files, .. } => {
                OpV12::Transact { task: task.clone(), files: files.iter().map(file_v12).collect() }
            }
            _ => OpV12::V11(RecordV11::try_from(r)?.op),
        };
        Ok(RecordV12 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV12> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV12) -> Result<Self> {
        let op = match r.op {
            OpV12::V11(op) => return LogRecord::try_from(RecordV11 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV12::Transact { task, files } => MetaOp::Transact {
                task,
                files: files.into_iter().map(file_of).collect(),
                ns: Vec::new(),
                regions: Vec::new(),
            },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
