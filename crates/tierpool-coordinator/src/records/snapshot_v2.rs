//! Snapshot version 2: the whole state, with owners, access times, hard
//! links, symbolic links, special files and chunk versions.
//!
//! Frozen: the shape every coordinator wrote since chunk versions came in.

use super::frozen::{corrupt, workers_from_v1, workers_to_v1, AttrsV1, ChunkKeyV1, ChunkRefV1, KindV1};
use super::frozen::{TableV1, WorkerRecordV1};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{Body, Inode, MetaState, Owner, StateParts, StateView};
use tierpool_types::{InodeId, Placement, Result, Spread};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV2 {
    pub lsn: u64,
    pub state: StateV2,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV2 {
    pub initialised: bool,
    pub inodes: BTreeMap<u64, InodeV2>,
    pub next_inode: u64,
    pub workers: BTreeMap<u32, WorkerRecordV1>,
    pub next_worker_id: u64,
    pub table: TableV1,
    pub pending_gc: BTreeSet<u64>,
    pub pending_chunks: BTreeSet<ChunkKeyV1>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeV2 {
    pub mode: u32,
    pub owner: OwnerV2,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    pub attrs: AttrsV1,
    pub links: u32,
    pub body: BodyV2,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerV2 {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyV2 {
    File { size: u64, chunk_size: u64, chunks: Vec<ChunkRefV1> },
    Dir { parent: u64, name: String, children: BTreeMap<String, u64> },
    Region { size: u64, chunk_size: u64 },
    Symlink { target: String },
    Special { kind: KindV1, rdev: u64 },
}

impl StateV2 {
    /// Version 2 has no retired ids: a state with some has no version 2 form.
    pub fn from_view(s: &StateView<'_>) -> Result<StateV2> {
        if !s.retired.is_empty() {
            return Err(corrupt("a state with retired ids has no snapshot version 2 form"));
        }
        Ok(StateV2 {
            initialised: s.initialised,
            inodes: s.inodes.iter().map(|(id, n)| (id.0, inode_to_v2(n))).collect(),
            next_inode: s.next_inode,
            workers: workers_to_v1(s.workers),
            next_worker_id: s.next_worker_id,
            table: s.table.into(),
            pending_gc: s.pending_gc.iter().map(|i| i.0).collect(),
            pending_chunks: s.pending_chunks.iter().map(|k| (*k).into()).collect(),
        })
    }

    pub fn into_state(self) -> Result<MetaState> {
        let inodes = (self.inodes.into_iter())
            .map(|(id, n)| Ok((InodeId(id), inode_from_v2(n)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        MetaState::from_parts(StateParts {
            down: Default::default(),
            spread: Spread::Host,
            attachments: Default::default(),
            inline: Default::default(),
            snapshots: Default::default(),
            restoring: Default::default(),
            tasks: Default::default(),
            pending_pages: Default::default(),
            initialised: self.initialised,
            inodes,
            next_inode: self.next_inode,
            workers: workers_from_v1(self.workers),
            next_worker_id: self.next_worker_id,
            table: self.table.try_into()?,
            pending_gc: self.pending_gc.into_iter().map(InodeId).collect(),
            pending_chunks: self.pending_chunks.into_iter().map(Into::into).collect(),
            retired: BTreeSet::new(),
            goal: Vec::new(),
            draining: BTreeSet::new(),
            removed: BTreeSet::new(),
            speeds: Default::default(),
        })
        .map_err(corrupt)
    }
}

pub(super) fn inode_to_v2(n: &Inode) -> InodeV2 {
    let body = match &n.body {
        Body::File { size, chunk_size, chunks } => {
            BodyV2::File { size: *size, chunk_size: *chunk_size, chunks: chunks.iter().map(|r| (*r).into()).collect() }
        }
        Body::Dir { parent, name, children } => BodyV2::Dir {
            parent: parent.0,
            name: name.clone(),
            children: children.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        },
        Body::Region { size, chunk_size } => BodyV2::Region { size: *size, chunk_size: *chunk_size },
        Body::Symlink { target } => BodyV2::Symlink { target: target.clone() },
        Body::Special { kind, rdev } => BodyV2::Special { kind: (*kind).into(), rdev: *rdev },
    };
    InodeV2 {
        mode: n.mode,
        owner: OwnerV2 { uid: n.owner.uid, gid: n.owner.gid },
        atime: n.atime,
        mtime: n.mtime,
        ctime: n.ctime,
        attrs: n.attrs.into(),
        links: n.links,
        body,
    }
}

pub(super) fn inode_from_v2(n: InodeV2) -> Result<Inode> {
    let body = match n.body {
        BodyV2::File { size, chunk_size, chunks } => {
            Body::File { size, chunk_size, chunks: chunks.into_iter().map(Into::into).collect() }
        }
        BodyV2::Dir { parent, name, children } => Body::Dir {
            parent: InodeId(parent),
            name,
            children: children.into_iter().map(|(k, v)| (k, InodeId(v))).collect(),
        },
        BodyV2::Region { size, chunk_size } => Body::Region { size, chunk_size },
        BodyV2::Symlink { target } => Body::Symlink { target },
        BodyV2::Special { kind, rdev } => Body::Special { kind: kind.into(), rdev },
    };
    Ok(Inode {
        replicas: 0,
        placement: Placement::Hash,
        origin: None,
        mode: n.mode,
        owner: Owner { uid: n.owner.uid, gid: n.owner.gid },
        atime: n.atime,
        mtime: n.mtime,
        ctime: n.ctime,
        attrs: n.attrs.try_into()?,
        links: n.links,
        body,
    })
}
