//! Log record version 3: version 2 and the ops of membership changes that
//! move partitions (`BeginMoves`, `FinishMoves`, `AbortMoves`,
//! `DrainWorker`, `RemoveWorker`, `Rebalance`).
//!
//! Frozen once released. Versions 1 and 2 are still read.

use super::frozen::{priority, AttrsV1, ChunkKeyV1, ChunkRefV1};
use super::log_v1::NewNodeV1;
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, NewNode, Owner};
use tierpool_types::{InodeId, Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV3 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV3,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV3 {
    Init {
        partitions: u32,
    },
    Mkdir {
        path: String,
        parents: bool,
        mode: u32,
    },
    AllocInodes {
        count: u64,
    },
    CommitFile {
        path: String,
        inode: u64,
        size: u64,
        chunk_size: u64,
        checksums: Vec<u32>,
        attrs: AttrsV1,
        mode: u32,
        overwrite: bool,
    },
    Remove {
        path: String,
        recursive: bool,
    },
    Rename {
        from: String,
        to: String,
    },
    SetAttrs {
        path: String,
        priority: Option<u8>,
        pinned: Option<bool>,
    },
    RegisterWorker {
        id: Option<u32>,
        addr: String,
        host: String,
        rack: String,
        mem_capacity: u64,
        disk_capacity: u64,
        at_once: bool,
    },
    GcDone {
        inodes: Vec<u64>,
    },
    CommitRegion {
        path: String,
        inode: u64,
        size: u64,
        chunk_size: u64,
        attrs: AttrsV1,
        mode: u32,
    },
    SetMeta {
        path: String,
        mode: Option<u32>,
        mtime: Option<u64>,
    },
    MakeAt {
        parent: u64,
        name: String,
        node: NewNodeV1,
        mode: u32,
    },
    LinkAt {
        inode: u64,
        parent: u64,
        name: String,
    },
    RemoveAt {
        parent: u64,
        name: String,
        dir: bool,
    },
    RenameAt {
        parent: u64,
        name: String,
        new_parent: u64,
        new_name: String,
        noreplace: bool,
    },
    SetInode {
        inode: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<u64>,
        mtime: Option<u64>,
    },
    UpdateFile {
        inode: u64,
        size: u64,
        truncate: Option<u64>,
        chunks: Vec<(u64, ChunkRefV1)>,
    },
    GcChunksDone {
        keys: Vec<ChunkKeyV1>,
    },
    SetAttrsAt {
        inode: u64,
        priority: Option<u8>,
        pinned: Option<bool>,
    },
    Retire {
        ids: Vec<u64>,
    },
    BeginMoves {
        moves: Vec<(u32, u32)>,
    },
    FinishMoves {
        partitions: Vec<u32>,
    },
    AbortMoves {
        partitions: Vec<u32>,
    },
    DrainWorker {
        id: u32,
    },
    RemoveWorker {
        id: u32,
    },
    Rebalance,
}

impl TryFrom<&LogRecord> for RecordV3 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        Ok(RecordV3 { lsn: r.lsn, time: r.time, owner, op: op_to_v3(&r.op)? })
    }
}

impl TryFrom<RecordV3> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV3) -> Result<Self> {
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op: op_from_v3(r.op)? })
    }
}

pub(super) fn op_to_v3(op: &MetaOp) -> Result<OpV3> {
    Ok(match op.clone() {
        MetaOp::Init { partitions } => OpV3::Init { partitions },
        MetaOp::Mkdir { path, parents, mode } => OpV3::Mkdir { path, parents, mode },
        MetaOp::AllocInodes { count } => OpV3::AllocInodes { count },
        MetaOp::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite, .. } => {
            OpV3::CommitFile { path, inode: inode.0, size, chunk_size, checksums, attrs: attrs.into(), mode, overwrite }
        }
        MetaOp::Remove { path, recursive } => OpV3::Remove { path, recursive },
        MetaOp::Rename { from, to } => OpV3::Rename { from, to },
        MetaOp::SetAttrs { path, priority, pinned } => {
            OpV3::SetAttrs { path, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once } => {
            OpV3::RegisterWorker { id: id.map(|w| w.0), addr, host, rack, mem_capacity, disk_capacity, at_once }
        }
        MetaOp::GcDone { inodes } => OpV3::GcDone { inodes: inodes.iter().map(|i| i.0).collect() },
        MetaOp::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            OpV3::CommitRegion { path, inode: inode.0, size, chunk_size, attrs: attrs.into(), mode }
        }
        MetaOp::SetMeta { path, mode, mtime } => OpV3::SetMeta { path, mode, mtime },
        MetaOp::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNode::File { chunk_size } => NewNodeV1::File { chunk_size },
                NewNode::Dir => NewNodeV1::Dir,
                NewNode::Symlink { target } => NewNodeV1::Symlink { target },
                NewNode::Special { kind, rdev } => NewNodeV1::Special { kind: kind.into(), rdev },
            };
            OpV3::MakeAt { parent: parent.0, name, node, mode }
        }
        MetaOp::LinkAt { inode, parent, name } => OpV3::LinkAt { inode: inode.0, parent: parent.0, name },
        MetaOp::RemoveAt { parent, name, dir } => OpV3::RemoveAt { parent: parent.0, name, dir },
        MetaOp::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            OpV3::RenameAt { parent: parent.0, name, new_parent: new_parent.0, new_name, noreplace }
        }
        MetaOp::SetInode { inode, mode, uid, gid, atime, mtime } => {
            OpV3::SetInode { inode: inode.0, mode, uid, gid, atime, mtime }
        }
        MetaOp::UpdateFile { inode, size, truncate, chunks } => OpV3::UpdateFile {
            inode: inode.0,
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        MetaOp::GcChunksDone { keys } => OpV3::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        MetaOp::SetAttrsAt { inode, priority, pinned } => {
            OpV3::SetAttrsAt { inode: inode.0, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::Retire { ids } => OpV3::Retire { ids },
        MetaOp::BeginMoves { moves } => OpV3::BeginMoves { moves: moves.iter().map(|(p, w)| (*p, w.0)).collect() },
        MetaOp::FinishMoves { partitions } => OpV3::FinishMoves { partitions },
        MetaOp::AbortMoves { partitions } => OpV3::AbortMoves { partitions },
        MetaOp::DrainWorker { id } => OpV3::DrainWorker { id: id.0 },
        MetaOp::RemoveWorker { id } => OpV3::RemoveWorker { id: id.0 },
        MetaOp::Rebalance => OpV3::Rebalance,
        MetaOp::SetSpeed { .. }
        | MetaOp::SetReplication { .. }
        | MetaOp::WorkerDown { .. }
        | MetaOp::WorkerUp { .. }
        | MetaOp::SetReplicas { .. }
        | MetaOp::SetPlacement { .. }
        | MetaOp::Attach { .. }
        | MetaOp::Detach { .. }
        | MetaOp::AdoptFile { .. }
        | MetaOp::AdoptDir { .. }
        | MetaOp::Disown { .. }
        | MetaOp::Persisted { .. }
        | MetaOp::LoadChunks { .. }
        | MetaOp::Unload { .. }
        | MetaOp::CommitInline { .. }
        | MetaOp::SnapshotCreate { .. }
        | MetaOp::SnapshotRemove { .. }
        | MetaOp::SnapshotRestore { .. }
        | MetaOp::Checkpoint { .. }
        | MetaOp::RegionRestore { .. }
        | MetaOp::Transact { .. }
        | MetaOp::SetWriteMode { .. }
        | MetaOp::UpdateInline { .. }
        | MetaOp::RegionPagesWritten { .. }
        | MetaOp::MakeFileAt { .. } => {
            return Err(super::frozen::corrupt("an op added after log record version 3 has no form in it"))
        }
    })
}

pub(super) fn op_from_v3(op: OpV3) -> Result<MetaOp> {
    let prio = |p: Option<u8>| p.map(priority).transpose();
    Ok(match op {
        OpV3::Init { partitions } => MetaOp::Init { partitions },
        OpV3::Mkdir { path, parents, mode } => MetaOp::Mkdir { path, parents, mode },
        OpV3::AllocInodes { count } => MetaOp::AllocInodes { count },
        OpV3::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite } => MetaOp::CommitFile {
            path,
            inode: InodeId(inode),
            size,
            chunk_size,
            checksums,
            homes: Vec::new(),
            attrs: attrs.try_into()?,
            mode,
            overwrite,
        },
        OpV3::Remove { path, recursive } => MetaOp::Remove { path, recursive },
        OpV3::Rename { from, to } => MetaOp::Rename { from, to },
        OpV3::SetAttrs { path, priority, pinned } => MetaOp::SetAttrs { path, priority: prio(priority)?, pinned },
        OpV3::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once } => {
            MetaOp::RegisterWorker { id: id.map(WorkerId), addr, host, rack, mem_capacity, disk_capacity, at_once }
        }
        OpV3::GcDone { inodes } => MetaOp::GcDone { inodes: inodes.into_iter().map(InodeId).collect() },
        OpV3::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            MetaOp::CommitRegion { path, inode: InodeId(inode), size, chunk_size, attrs: attrs.try_into()?, mode }
        }
        OpV3::SetMeta { path, mode, mtime } => MetaOp::SetMeta { path, mode, mtime },
        OpV3::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNodeV1::File { chunk_size } => NewNode::File { chunk_size },
                NewNodeV1::Dir => NewNode::Dir,
                NewNodeV1::Symlink { target } => NewNode::Symlink { target },
                NewNodeV1::Special { kind, rdev } => NewNode::Special { kind: kind.into(), rdev },
            };
            MetaOp::MakeAt { parent: InodeId(parent), name, node, mode }
        }
        OpV3::LinkAt { inode, parent, name } => MetaOp::LinkAt { inode: InodeId(inode), parent: InodeId(parent), name },
        OpV3::RemoveAt { parent, name, dir } => MetaOp::RemoveAt { parent: InodeId(parent), name, dir },
        OpV3::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            MetaOp::RenameAt { parent: InodeId(parent), name, new_parent: InodeId(new_parent), new_name, noreplace }
        }
        OpV3::SetInode { inode, mode, uid, gid, atime, mtime } => {
            MetaOp::SetInode { inode: InodeId(inode), mode, uid, gid, atime, mtime }
        }
        OpV3::UpdateFile { inode, size, truncate, chunks } => MetaOp::UpdateFile {
            inode: InodeId(inode),
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        OpV3::GcChunksDone { keys } => MetaOp::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        OpV3::SetAttrsAt { inode, priority, pinned } => {
            MetaOp::SetAttrsAt { inode: InodeId(inode), priority: prio(priority)?, pinned }
        }
        OpV3::Retire { ids } => MetaOp::Retire { ids },
        OpV3::BeginMoves { moves } => {
            MetaOp::BeginMoves { moves: moves.into_iter().map(|(p, w)| (p, WorkerId(w))).collect() }
        }
        OpV3::FinishMoves { partitions } => MetaOp::FinishMoves { partitions },
        OpV3::AbortMoves { partitions } => MetaOp::AbortMoves { partitions },
        OpV3::DrainWorker { id } => MetaOp::DrainWorker { id: WorkerId(id) },
        OpV3::RemoveWorker { id } => MetaOp::RemoveWorker { id: WorkerId(id) },
        OpV3::Rebalance => MetaOp::Rebalance,
    })
}
