//! Snapshot version 1, read only to migrate it: no owners or access times,
//! one name per inode, a file's chunks all at version 1 with one checksum
//! each.
//!
//! Frozen. Migration: inodes belong to 0/0 with `atime = mtime` and one
//! link; each file chunk becomes version 1 holding the chunk's whole share
//! of the file; nothing is pending but the removed inodes it listed.

use super::frozen::{corrupt, workers_from_v1, AttrsV1, TableV1, WorkerRecordV1};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{Body, Inode, MetaState, Owner, StateParts};
use tierpool_types::{ChunkRef, InodeId, Placement, Result, Spread};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV1 {
    pub lsn: u64,
    pub state: StateV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV1 {
    pub initialised: bool,
    pub inodes: BTreeMap<u64, InodeV1>,
    pub next_inode: u64,
    pub workers: BTreeMap<u32, WorkerRecordV1>,
    pub next_worker_id: u64,
    pub table: TableV1,
    pub pending_gc: BTreeSet<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeV1 {
    pub parent: u64,
    pub name: String,
    pub mode: u32,
    pub mtime: u64,
    pub ctime: u64,
    pub attrs: AttrsV1,
    pub body: BodyV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyV1 {
    File { size: u64, chunk_size: u64, checksums: Vec<u32> },
    Dir { children: BTreeMap<String, u64> },
    Region { size: u64, chunk_size: u64 },
}

impl StateV1 {
    /// The state this snapshot describes, in today's terms.
    pub fn migrate(self) -> Result<MetaState> {
        let inodes = (self.inodes.into_iter())
            .map(|(id, n)| Ok((InodeId(id), migrate_inode(n)?)))
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
            pending_chunks: BTreeSet::new(),
            retired: BTreeSet::new(),
            goal: Vec::new(),
            draining: BTreeSet::new(),
            removed: BTreeSet::new(),
            speeds: Default::default(),
        })
        .map_err(corrupt)
    }
}

fn migrate_inode(n: InodeV1) -> Result<Inode> {
    let body = match n.body {
        BodyV1::File { size, chunk_size, checksums } => {
            let chunks = (checksums.into_iter().enumerate())
                .map(|(i, checksum)| {
                    let len = size.saturating_sub(i as u64 * chunk_size).min(chunk_size);
                    ChunkRef { version: 1, len, checksum, home: None }
                })
                .collect();
            Body::File { size, chunk_size, chunks }
        }
        BodyV1::Dir { children } => Body::Dir {
            parent: InodeId(n.parent),
            name: n.name,
            children: children.into_iter().map(|(k, v)| (k, InodeId(v))).collect(),
        },
        BodyV1::Region { size, chunk_size } => Body::Region { size, chunk_size },
    };
    Ok(Inode {
        replicas: 0,
        placement: Placement::Hash,
        origin: None,
        mode: n.mode,
        owner: Owner::default(),
        atime: n.mtime,
        mtime: n.mtime,
        ctime: n.ctime,
        attrs: n.attrs.try_into()?,
        links: 1,
        body,
    })
}
