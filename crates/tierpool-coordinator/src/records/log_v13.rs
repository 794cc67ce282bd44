//! Log record version 13: version 12, and commits of transactions that
//! changed the namespace (made directories and files, removed, moved).
//! Every op with a version 12 form is stored as it was, inside
//! `OpV13::V12` (a commit that changed no entry among them).
//!
//! Frozen once released. Versions 1 to 12 are still read. Version 13 holds
//! every op.

use super::frozen::ChunkRefV1;
use super::log_v12::{OpV12, RecordV12, TxFileV12};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner, TxFile, TxNs};
use tierpool_types::{ChunkRef, InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV13 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV13,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV13 {
    V12(OpV12),
    Transact { task: Option<String>, files: Vec<TxFileV12>, ns: Vec<TxNsV13> },
}

/// One namespace step of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxNsV13 {
    Mkdir { path: String, mode: u32 },
    Create { path: String, mode: u32, chunk_size: u64, file: TxFileV12 },
    Remove { path: String, recursive: bool },
    Rename { from: String, to: String },
}

/// Whether `op` is one version 12 has no form for.
pub(super) fn namespace_steps(op: &MetaOp) -> bool {
    matches!(op, MetaOp::Transact { ns, .. } if !ns.is_empty())
}

pub(super) fn file_v12(f: &TxFile) -> TxFileV12 {
    TxFileV12 {
        inode: f.inode.0,
        size: f.size,
        truncate: f.truncate,
        chunks: f.chunks.iter().map(|(i, r)| (*i, ChunkRefV1::from(*r), r.home)).collect(),
    }
}

pub(super) fn file_of(f: TxFileV12) -> TxFile {
    TxFile {
        inode: InodeId(f.inode),
        size: f.size,
        truncate: f.truncate,
        chunks: f.chunks.into_iter().map(|(i, c, home)| (i, ChunkRef { home, ..ChunkRef::from(c) })).collect(),
    }
}

pub(super) fn ns_v13(s: &TxNs) -> TxNsV13 {
    match s {
        TxNs::Mkdir { path, mode } => TxNsV13::Mkdir { path: path.clone(), mode: *mode },
        TxNs::Create { path, mode, chunk_size, file } => {
            TxNsV13::Create { path: path.clone(), mode: *mode, chunk_size: *chunk_size, file: file_v12(file) }
        }
        TxNs::Remove { path, recursive } => TxNsV13::Remove { path: path.clone(), recursive: *recursive },
        TxNs::Rename { from, to } => TxNsV13::Rename { from: from.clone(), to: to.clone() },
    }
}

pub(super) fn ns_of(s: TxNsV13) -> TxNs {
    match s {
        TxNsV13::Mkdir { path, mode } => TxNs::Mkdir { path, mode },
        TxNsV13::Create { path, mode, chunk_size, file } => {
            TxNs::Create { path, mode, chunk_size, file: file_of(file) }
        }
        TxNsV13::Remove { path, recursive } => TxNs::Remove { path, recursive },
        TxNsV13::Rename { from, to } => TxNs::Rename { from, to },
    }
}

impl TryFrom<&LogRecord> for RecordV13 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            MetaOp::Transact { task, files, ns, .. } if !ns.is_empty() => OpV13::Transact {
                task: task.clone(),
                files: files.iter().map(file_v12).collect(),
                ns: ns.iter().map(ns_v13).collect(),
            },
            _ => OpV13::V12(RecordV12::try_from(r)?.op),
        };
        Ok(RecordV13 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV13> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV13) -> Result<Self> {
        let op = match r.op {
            OpV13::V12(op) => return LogRecord::try_from(RecordV12 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV13::Transact { task, files, ns } => MetaOp::Transact {
                task,
                files: files.into_iter().map(file_of).collect(),
                ns: ns.into_iter().map(ns_of).collect(),
                regions: Vec::new(),
            },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
