//! Log record version 16: version 15, commits of transactions that wrote
//! pages of memory regions (the pages' bytes travel in the record: the
//! coordinator writes them on the workers after it is durable, again after
//! a restart if need be), and `RegionPagesWritten`, which says it did.
//! Every op with a version 15 form is stored as it was, inside
//! `OpV16::V15` (a commit without region pages among them).
//!
//! Frozen once released. Versions 1 to 15 are still read. Version 16 holds
//! every op.

use super::log_v12::TxFileV12;
use super::log_v13::{file_of, file_v12, ns_of, ns_v13, TxNsV13};
use super::log_v15::{OpV15, RecordV15};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner, TxRegion};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV16 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV16,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV16 {
    V15(OpV15),
    Transact { task: Option<String>, files: Vec<TxFileV12>, ns: Vec<TxNsV13>, regions: Vec<TxRegionV16> },
    RegionPagesWritten { id: u64 },
}

/// Pages of one region a transaction wrote: (page index, its bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxRegionV16 {
    pub inode: u64,
    pub pages: Vec<(u64, Bytes)>,
}

/// Whether `op` is one version 15 has no form for.
pub(super) fn region_pages(op: &MetaOp) -> bool {
    matches!(op, MetaOp::Transact { regions, .. } if !regions.is_empty())
        || matches!(op, MetaOp::RegionPagesWritten { .. })
}

pub(super) fn region_v16(r: &TxRegion) -> TxRegionV16 {
    TxRegionV16 { inode: r.inode.0, pages: r.pages.clone() }
}

pub(super) fn region_of(r: TxRegionV16) -> TxRegion {
    TxRegion { inode: InodeId(r.inode), pages: r.pages }
}

impl TryFrom<&LogRecord> for RecordV16 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::Transact { task, files, ns, regions } if !regions.is_empty() => OpV16::Transact {
                task: task.clone(),
                files: files.iter().map(file_v12).collect(),
                ns: ns.iter().map(ns_v13).collect(),
                regions: regions.iter().map(region_v16).collect(),
            },
            MetaOp::RegionPagesWritten { id } => OpV16::RegionPagesWritten { id: *id },
            _ => OpV16::V15(RecordV15::try_from(r)?.op),
        };
        Ok(RecordV16 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV16> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV16) -> Result<Self> {
        let op = match r.op {
            OpV16::V15(op) => return LogRecord::try_from(RecordV15 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV16::Transact { task, files, ns, regions } => MetaOp::Transact {
                task,
                files: files.into_iter().map(file_of).collect(),
                ns: ns.into_iter().map(ns_of).collect(),
                regions: regions.into_iter().map(region_of).collect(),
            },
            OpV16::RegionPagesWritten { id } => MetaOp::RegionPagesWritten { id },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
