//! Log record version 1: one metadata op with its sequence number and time.
//!
//! Frozen: this is the shape written by every coordinator up to now. The
//! owner of an op travels as an `AsOwner` wrapper around it (one level; a
//! nested wrapper or a wrapped `Init` is refused as corrupt).

use super::frozen::{corrupt, priority, AttrsV1, ChunkKeyV1, ChunkRefV1, KindV1};
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, NewNode, Owner};
use tierpool_types::{Error, InodeId, Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV1 {
    pub lsn: u64,
    pub time: u64,
    pub op: OpV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV1 {
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
    AsOwner {
        uid: u32,
        gid: u32,
        op: Box<OpV1>,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewNodeV1 {
    File { chunk_size: u64 },
    Dir,
    Symlink { target: String },
    Special { kind: KindV1, rdev: u64 },
}

impl TryFrom<&LogRecord> for RecordV1 {
    type Error = tierpool_types::Error;
    /// Ops added after version 1 (`Retire`) have no version 1 form.
    fn try_from(r: &LogRecord) -> Result<Self> {
        let op = op_to_v1(&r.op)?;
        let op = if r.owner == Owner::default() {
            op
        } else {
            OpV1::AsOwner { uid: r.owner.uid, gid: r.owner.gid, op: Box::new(op) }
        };
        Ok(RecordV1 { lsn: r.lsn, time: r.time, op })
    }
}

impl TryFrom<RecordV1> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV1) -> Result<Self> {
        let (owner, op) = match r.op {
            OpV1::AsOwner { uid, gid, op } => match *op {
                OpV1::AsOwner { .. } | OpV1::Init { .. } => {
                    return Err(corrupt(format!("lsn {}: AsOwner wraps AsOwner or Init", r.lsn)))
                }
                op => (Owner { uid, gid }, op),
            },
            op => (Owner::default(), op),
        };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op: op_from_v1(op)? })
    }
}

fn ids(v: &[InodeId]) -> Vec<u64> {
    v.iter().map(|i| i.0).collect()
}

fn op_to_v1(op: &MetaOp) -> Result<OpV1> {
    Ok(match op.clone() {
        MetaOp::Init { partitions } => OpV1::Init { partitions },
        MetaOp::Mkdir { path, parents, mode } => OpV1::Mkdir { path, parents, mode },
        MetaOp::AllocInodes { count } => OpV1::AllocInodes { count },
        MetaOp::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite, .. } => {
            OpV1::CommitFile { path, inode: inode.0, size, chunk_size, checksums, attrs: attrs.into(), mode, overwrite }
        }
        MetaOp::Remove { path, recursive } => OpV1::Remove { path, recursive },
        MetaOp::Rename { from, to } => OpV1::Rename { from, to },
        MetaOp::SetAttrs { path, priority, pinned } => {
            OpV1::SetAttrs { path, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once: true } => {
            OpV1::RegisterWorker { id: id.map(|w| w.0), addr, host, rack, mem_capacity, disk_capacity }
        }
        MetaOp::RegisterWorker { at_once: false, .. } => {
            return Err(Error::invalid("log version 1 has no worker joining by moves"));
        }
        MetaOp::GcDone { inodes } => OpV1::GcDone { inodes: ids(&inodes) },
        MetaOp::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            OpV1::CommitRegion { path, inode: inode.0, size, chunk_size, attrs: attrs.into(), mode }
        }
        MetaOp::SetMeta { path, mode, mtime } => OpV1::SetMeta { path, mode, mtime },
        MetaOp::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNode::File { chunk_size } => NewNodeV1::File { chunk_size },
                NewNode::Dir => NewNodeV1::Dir,
                NewNode::Symlink { target } => NewNodeV1::Symlink { target },
                NewNode::Special { kind, rdev } => NewNodeV1::Special { kind: kind.into(), rdev },
            };
            OpV1::MakeAt { parent: parent.0, name, node, mode }
        }
        MetaOp::LinkAt { inode, parent, name } => OpV1::LinkAt { inode: inode.0, parent: parent.0, name },
        MetaOp::RemoveAt { parent, name, dir } => OpV1::RemoveAt { parent: parent.0, name, dir },
        MetaOp::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            OpV1::RenameAt { parent: parent.0, name, new_parent: new_parent.0, new_name, noreplace }
        }
        MetaOp::SetInode { inode, mode, uid, gid, atime, mtime } => {
            OpV1::SetInode { inode: inode.0, mode, uid, gid, atime, mtime }
        }
        MetaOp::UpdateFile { inode, size, truncate, chunks } => OpV1::UpdateFile {
            inode: inode.0,
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        MetaOp::GcChunksDone { keys } => OpV1::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        MetaOp::SetAttrsAt { inode, priority, pinned } => {
            OpV1::SetAttrsAt { inode: inode.0, priority: priority.map(|p| p.get()), pinned }
        }
        MetaOp::Retire { .. }
        | MetaOp::BeginMoves { .. }
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
        | MetaOp::MakeFileAt { .. } => return Err(corrupt("an op added after log record version 1 has no form in it")),
    })
}

fn op_from_v1(op: OpV1) -> Result<MetaOp> {
    let prio = |p: Option<u8>| p.map(priority).transpose();
    Ok(match op {
        OpV1::Init { partitions } => MetaOp::Init { partitions },
        OpV1::Mkdir { path, parents, mode } => MetaOp::Mkdir { path, parents, mode },
        OpV1::AllocInodes { count } => MetaOp::AllocInodes { count },
        OpV1::CommitFile { path, inode, size, chunk_size, checksums, attrs, mode, overwrite } => MetaOp::CommitFile {
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
        OpV1::Remove { path, recursive } => MetaOp::Remove { path, recursive },
        OpV1::Rename { from, to } => MetaOp::Rename { from, to },
        OpV1::SetAttrs { path, priority, pinned } => MetaOp::SetAttrs { path, priority: prio(priority)?, pinned },
        // Version 1 workers took their share of the partitions at once.
        OpV1::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity } => MetaOp::RegisterWorker {
            id: id.map(WorkerId),
            addr,
            host,
            rack,
            mem_capacity,
            disk_capacity,
            at_once: true,
        },
        OpV1::GcDone { inodes } => MetaOp::GcDone { inodes: inodes.into_iter().map(InodeId).collect() },
        OpV1::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
            MetaOp::CommitRegion { path, inode: InodeId(inode), size, chunk_size, attrs: attrs.try_into()?, mode }
        }
        OpV1::SetMeta { path, mode, mtime } => MetaOp::SetMeta { path, mode, mtime },
        OpV1::AsOwner { .. } => return Err(corrupt("AsOwner inside an op")),
        OpV1::MakeAt { parent, name, node, mode } => {
            let node = match node {
                NewNodeV1::File { chunk_size } => NewNode::File { chunk_size },
                NewNodeV1::Dir => NewNode::Dir,
                NewNodeV1::Symlink { target } => NewNode::Symlink { target },
                NewNodeV1::Special { kind, rdev } => NewNode::Special { kind: kind.into(), rdev },
            };
            MetaOp::MakeAt { parent: InodeId(parent), name, node, mode }
        }
        OpV1::LinkAt { inode, parent, name } => MetaOp::LinkAt { inode: InodeId(inode), parent: InodeId(parent), name },
        OpV1::RemoveAt { parent, name, dir } => MetaOp::RemoveAt { parent: InodeId(parent), name, dir },
        OpV1::RenameAt { parent, name, new_parent, new_name, noreplace } => {
            MetaOp::RenameAt { parent: InodeId(parent), name, new_parent: InodeId(new_parent), new_name, noreplace }
        }
        OpV1::SetInode { inode, mode, uid, gid, atime, mtime } => {
            MetaOp::SetInode { inode: InodeId(inode), mode, uid, gid, atime, mtime }
        }
        OpV1::UpdateFile { inode, size, truncate, chunks } => MetaOp::UpdateFile {
            inode: InodeId(inode),
            size,
            truncate,
            chunks: chunks.into_iter().map(|(i, r)| (i, r.into())).collect(),
        },
        OpV1::GcChunksDone { keys } => MetaOp::GcChunksDone { keys: keys.into_iter().map(Into::into).collect() },
        OpV1::SetAttrsAt { inode, priority, pinned } => {
            MetaOp::SetAttrsAt { inode: InodeId(inode), priority: prio(priority)?, pinned }
        }
    })
}
