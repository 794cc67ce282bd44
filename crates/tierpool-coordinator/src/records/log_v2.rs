//! Log record version 2: one metadata op with its sequence number, its
//! time and the owner it ran as (a field of its own, where version 1
//! wrapped the op). New op: `Retire`.
//!
//! Frozen once released. Version 1 records are still read (`log_v1`).

use super::frozen::{corrupt, priority, AttrsV1, ChunkKeyV1, ChunkRefV1};
use super::log_v1::NewNodeV1;
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, NewNode, Owner};
use tierpool_types::{Error, InodeId, Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV2 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV2,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV2 {
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
}

impl TryFrom<&LogRecord> for RecordV2 {
    type Error = tierpool_types::Error;
    /// Ops added after version 2 have no version 2 form.
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        Ok(RecordV2 { lsn: r.lsn, time: r.time, owner, op: op_to_v2(&r.op)? })
    }
}

impl TryFrom<RecordV2> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV2) -> Result<Self> {
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op: op_from_v2(r.op)? })
    }
}

fn op_to_v2(op: &MetaOp) -> Result<OpV2> {
    Ok(match op.clone() {
        MetaOp::Init { partitions } => OpV2::Init { partitions },
        MetaOp::Mkdir { path, parents, mode } => OpV2::Mkdir { path, parents, mode },
        MetaOp::AllocInodes { count } => OpV2::AllocInodes { count },
        MetaOp::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite, .. } => {
            OpV2::CommitFile { path, inode: inode.0, size, chunk_size, checksums, attrs: attrs.into(), mode, overwrite }
        }
        MetaOp::Remove { path, recursive } => OpV2::Remove { path, recursive },
        MetaOp::Rename { from, to } => OpV2::Rename { from, to },
        MetaOp::SetAttrs { path, priority, pinned } => {
            OpV2::SetAttrs { path, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once: true } => {
            OpV2::RegisterWorker { id: id.map(|w| w.0), addr, host, rack, mem_capacity, disk_capacity }
        }
        MetaOp::RegisterWorker { at_once: false, .. } => {
            return Err(Error::invalid("log version 2 has no worker joining by moves"));
        }
        MetaOp::GcDone { inodes } => OpV2::GcDone { inodes: inodes.iter().map(|i| i.0).collect() },
        MetaOp::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            OpV2::CommitRegion { path, inode: inode.0, size, chunk_size, attrs: attrs.into(), mode }
        }
        MetaOp::SetMeta { path, mode, mtime } => OpV2::SetMeta { path, mode, mtime },
        MetaOp::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNode::File { chunk_size } => NewNodeV1::File { chunk_size },
                NewNode::Dir => NewNodeV1::Dir,
                NewNode::Symlink { target } => NewNodeV1::Symlink { target },
                NewNode::Special { kind, rdev } => NewNodeV1::Special { kind: kind.into(), rdev },
            };
            OpV2::MakeAt { parent: parent.0, name, node, mode }
        }
        MetaOp::LinkAt { inode, parent, name } => OpV2::LinkAt { inode: inode.0, parent: parent.0, name },
        MetaOp::RemoveAt { parent, name, dir } => OpV2::RemoveAt { parent: parent.0, name, dir },
        MetaOp::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            OpV2::RenameAt { parent: parent.0, name, new_parent: new_parent.0, new_name, noreplace }
        }
        MetaOp::SetInode { inode, mode, uid, gid, atime, mtime } => {
            OpV2::SetInode { inode: inode.0, mode, uid, gid, atime, mtime }
        }
        MetaOp::UpdateFile { inode, size, truncate, chunks } => OpV2::UpdateFile {
            inode: inode.0,
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        MetaOp::GcChunksDone { keys } => OpV2::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        MetaOp::SetAttrsAt { inode, priority, pinned } => {
            OpV2::SetAttrsAt { inode: inode.0, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::Retire { ids } => OpV2::Retire { ids },
        MetaOp::BeginMoves { .. }
        | MetaOp::FinishMoves { .. }
        | MetaOp::AbortMoves { .. }
        | MetaOp::DrainWorker { .. }
        | MetaOp::RemoveWorker { .. }
        | MetaOp::Rebalance
        | MetaOp::SetSpeed { .. }
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
            return Err(corrupt("moves and membership ops have no form in log record version 2"))
        }
    })
}

fn op_from_v2(op: OpV2) -> Result<MetaOp> {
    let prio = |p: Option<u8>| p.map(priority).transpose();
    Ok(match op {
        OpV2::Init { partitions } => MetaOp::Init { partitions },
        OpV2::Mkdir { path, parents, mode } => MetaOp::Mkdir { path, parents, mode },
        OpV2::AllocInodes { count } => MetaOp::AllocInodes { count },
        OpV2::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite } => MetaOp::CommitFile {
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
        OpV2::Remove { path, recursive } => MetaOp::Remove { path, recursive },
        OpV2::Rename { from, to } => MetaOp::Rename { from, to },
        OpV2::SetAttrs { path, priority, pinned } => MetaOp::SetAttrs { path, priority: prio(priority)?, pinned },
        // Version 2 workers took their share of the partitions at once.
        OpV2::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity } => MetaOp::RegisterWorker {
            id: id.map(WorkerId),
            addr,
            host,
            rack,
            mem_capacity,
            disk_capacity,
            at_once: true,
        },
        OpV2::GcDone { inodes } => MetaOp::GcDone { inodes: inodes.into_iter().map(InodeId).collect() },
        OpV2::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            MetaOp::CommitRegion { path, inode: InodeId(inode), size, chunk_size, attrs: attrs.try_into()?, mode }
        }
        OpV2::SetMeta { path, mode, mtime } => MetaOp::SetMeta { path, mode, mtime },
        OpV2::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNodeV1::File { chunk_size } => NewNode::File { chunk_size },
                NewNodeV1::Dir => NewNode::Dir,
                NewNodeV1::Symlink { target } => NewNode::Symlink { target },
                NewNodeV1::Special { kind, rdev } => NewNode::Special { kind: kind.into(), rdev },
            };
            MetaOp::MakeAt { parent: InodeId(parent), name, node, mode }
        }
        OpV2::LinkAt { inode, parent, name } => MetaOp::LinkAt { inode: InodeId(inode), parent: InodeId(parent), name },
        OpV2::RemoveAt { parent, name, dir } => MetaOp::RemoveAt { parent: InodeId(parent), name, dir },
        OpV2::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            MetaOp::RenameAt { parent: InodeId(parent), name, new_parent: InodeId(new_parent), new_name, noreplace }
        }
        OpV2::SetInode { inode, mode, uid, gid, atime, mtime } => {
            MetaOp::SetInode { inode: InodeId(inode), mode, uid, gid, atime, mtime }
        }
        OpV2::UpdateFile { inode, size, truncate, chunks } => MetaOp::UpdateFile {
            inode: InodeId(inode),
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        OpV2::GcChunksDone { keys } => MetaOp::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        OpV2::SetAttrsAt { inode, priority, pinned } => {
            MetaOp::SetAttrsAt { inode: InodeId(inode), priority: prio(priority)?, pinned }
        }
        OpV2::Retire { ids } => MetaOp::Retire { ids },
    })
}
