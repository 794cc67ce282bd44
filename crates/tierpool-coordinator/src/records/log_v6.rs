//! Log record version 6: version 5 and placement (the policy of a path,
//! the home partition a writer chose for a chunk, replicas kept apart by
//! rack). An op with a version 5 form is stored as it was, inside
//! `OpV6::V5`; the others (a commit naming homes, an update or a
//! collection of chunks of which one has a home, a spread by rack, a
//! policy set) have variants of their own.
//!
//! Frozen once released. Versions 1 to 5 are still read. Version 6 holds
//! every op.

use super::frozen::{corrupt, AttrsV1, ChunkKeyV1, ChunkRefV1};
use super::log_v5::{OpV5, RecordV5};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, Owner};
use tierpool_types::{ChunkKey, ChunkRef, InodeId, Placement, Result, Spread};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV6 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV6,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV6 {
    V5(OpV5),
    CommitFile {
        path: String,
        inode: u64,
        size: u64,
        chunk_size: u64,
        checksums: Vec<u32>,
        homes: Vec<Option<u32>>,
        attrs: AttrsV1,
        mode: u32,
        overwrite: bool,
    },
    UpdateFile {
        inode: u64,
        size: u64,
        truncate: Option<u64>,
        chunks: Vec<(u64, ChunkRefV1, Option<u32>)>,
    },
    GcChunksDone {
        keys: Vec<(ChunkKeyV1, Option<u32>)>,
    },
    /// Spread 0: by host, 1: by rack.
    SetReplication {
        replicas: u8,
        spread: u8,
    },
    /// Placement 0: hash, 1: local, 2: round-robin, 3: local-only.
    SetPlacement {
        path: String,
        placement: u8,
        recursive: bool,
    },
}

/// Whether `op` holds something version 5 has no form for.
pub(super) fn placed(op: &MetaOp) -> bool {
    match op {
        MetaOp::CommitFile { homes, .. } => !homes.is_empty(),
        MetaOp::UpdateFile { chunks, .. } => chunks.iter().any(|(_, r)| r.home.is_some()),
        MetaOp::GcChunksDone { keys } => keys.iter().any(|k| k.home.is_some()),
        MetaOp::SetReplication { spread, .. } => *spread != Spread::Host,
        MetaOp::SetPlacement { .. } => true,
        _ => false,
    }
}

pub(super) fn placement_code(p: Placement) -> u8 {
    match p {
        Placement::Hash => 0,
        Placement::Local => 1,
        Placement::RoundRobin => 2,
        Placement::LocalOnly => 3,
    }
}

pub(super) fn placement_of(code: u8) -> Result<Placement> {
    (Placement::ALL.into_iter().find(|p| placement_code(*p) == code))
        .ok_or_else(|| corrupt(format!("placement policy {code}")))
}

pub(super) fn spread_code(s: Spread) -> u8 {
    match s {
        Spread::Host => 0,
        Spread::Rack => 1,
    }
}

pub(super) fn spread_of(code: u8) -> Result<Spread> {
    match code {
        0 => Ok(Spread::Host),
        1 => Ok(Spread::Rack),
        c => Err(corrupt(format!("spread of replicas {c}"))),
    }
}

impl TryFrom<&LogRecord> for RecordV6 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            op if !placed(op) => OpV6::V5(RecordV5::try_from(r)?.op),
            MetaOp::CommitFile { path, inode, size, chunk_size, checksums, homes, attrs, mode, overwrite } => {
                OpV6::CommitFile {
                    path: path.clone(),
                    inode: inode.0,
                    size: *size,
                    chunk_size: *chunk_size,
                    checksums: checksums.clone(),
                    homes: homes.clone(),
                    attrs: (*attrs).into(),
                    mode: *mode,
                    overwrite: *overwrite,
                }
            }
            MetaOp::UpdateFile { inode, size, truncate, chunks } => OpV6::UpdateFile {
                inode: inode.0,
                size: *size,
                truncate: *truncate,
                chunks: chunks.iter().map(|(i, r)| (*i, ChunkRefV1::from(*r), r.home)).collect(),
            },
            MetaOp::GcChunksDone { keys } => {
                OpV6::GcChunksDone { keys: keys.iter().map(|k| (ChunkKeyV1::from(*k), k.home)).collect() }
            }
            MetaOp::SetReplication { replicas, spread } => {
                OpV6::SetReplication { replicas: *replicas, spread: spread_code(*spread) }
            }
            MetaOp::SetPlacement { path, placement, recursive } => {
                OpV6::SetPlacement { path: path.clone(), placement: placement_code(*placement), recursive: *recursive }
            }
            _ => unreachable!("every op with placement has a version 6 form"),
        };
        Ok(RecordV6 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV6> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV6) -> Result<Self> {
        let op = match r.op {
            OpV6::V5(op) => return LogRecord::try_from(RecordV5 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV6::CommitFile { path, inode, size, chunk_size, checksums, homes, attrs, mode, overwrite } => {
                MetaOp::CommitFile {
                    path,
                    inode: InodeId(inode),
                    size,
                    chunk_size,
                    checksums,
                    homes,
                    attrs: attrs.try_into()?,
                    mode,
                    overwrite,
                }
            }
            OpV6::UpdateFile { inode, size, truncate, chunks } => MetaOp::UpdateFile {
                inode: InodeId(inode),
                size,
                truncate,
                chunks: chunks.into_iter().map(|(i, r, home)| (i, ChunkRef { home, ..r.into() })).collect(),
            },
            OpV6::GcChunksDone { keys } => {
                MetaOp::GcChunksDone { keys: keys.into_iter().map(|(k, home)| ChunkKey { home, ..k.into() }).collect() }
            }
            OpV6::SetReplication { replicas, spread } => {
                MetaOp::SetReplication { replicas, spread: spread_of(spread)? }
            }
            OpV6::SetPlacement { path, placement, recursive } => {
                MetaOp::SetPlacement { path, placement: placement_of(placement)?, recursive }
            }
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
