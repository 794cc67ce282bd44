//! Earlier formats of the state, kept to read old snapshots, with the
//! migration to the current one. Never change a type here: add a new module
//! for the next format instead.
//!
//! Version 1 (snapshot version 1): no owners or access times, one name per
//! inode, and a file's chunks all at version 1 with one checksum each.

use super::inode::{Body, Inode, Owner};
use super::MetaState;
use crate::{Timestamp, WorkerRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_placement::PartitionTable;
use tierpool_types::{Checksum, ChunkAttrs, ChunkRef, InodeId, WorkerId};

/// The state as snapshot version 1 stored it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaStateV1 {
    initialised: bool,
    inodes: BTreeMap<InodeId, InodeV1>,
    next_inode: u64,
    workers: BTreeMap<WorkerId, WorkerRecord>,
    next_worker_id: u64,
    table: PartitionTable,
    pending_gc: BTreeSet<InodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct InodeV1 {
    parent: InodeId,
    name: String,
    mode: u32,
    mtime: Timestamp,
    ctime: Timestamp,
    attrs: ChunkAttrs,
    body: BodyV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum BodyV1 {
    File { size: u64, chunk_size: u64, checksums: Vec<Checksum> },
    Dir { children: BTreeMap<String, InodeId> },
    Region { size: u64, chunk_size: u64 },
}

impl From<MetaStateV1> for MetaState {
    /// Inodes belong to 0/0 with `atime = mtime`; each file chunk becomes
    /// version 1 holding the chunk's whole share of the file.
    fn from(old: MetaStateV1) -> MetaState {
        let inodes = old.inodes.into_iter().map(|(id, n)| (id, migrate_inode(n))).collect();
        MetaState {
            initialised: old.initialised,
            inodes,
            next_inode: old.next_inode,
            workers: old.workers,
            next_worker_id: old.next_worker_id,
            table: old.table,
            pending_gc: old.pending_gc,
            pending_chunks: BTreeSet::new(),
        }
    }
}

fn migrate_inode(n: InodeV1) -> Inode {
    let body = match n.body {
        BodyV1::File { size, chunk_size, checksums } => {
            let chunks = (checksums.into_iter().enumerate())
                .map(|(i, checksum)| {
                    let len = (size - i as u64 * chunk_size).min(chunk_size);
                    ChunkRef { version: 1, len, checksum }
                })
                .collect();
            Body::File { size, chunk_size, chunks }
        }
        BodyV1::Dir { children } => Body::Dir { parent: n.parent, name: n.name, children },
        BodyV1::Region { size, chunk_size } => Body::Region { size, chunk_size },
    };
    Inode {
        mode: n.mode,
        owner: Owner::default(),
        atime: n.mtime,
        mtime: n.mtime,
        ctime: n.ctime,
        attrs: n.attrs,
        links: 1,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InodeKind, MetaOp};

    /// A version 1 state with a directory, a file of three chunks and a
    /// region, built as version 1 code would have stored it.
    fn v1() -> MetaStateV1 {
        let mut inodes = BTreeMap::new();
        let attrs = ChunkAttrs::default();
        inodes.insert(
            InodeId(1),
            InodeV1 {
                parent: InodeId(1),
                name: String::new(),
                mode: 0o755,
                mtime: 5,
                ctime: 5,
                attrs,
                body: BodyV1::Dir { children: BTreeMap::from([("d".into(), InodeId(2))]) },
            },
        );
        inodes.insert(
            InodeId(2),
            InodeV1 {
                parent: InodeId(1),
                name: "d".into(),
                mode: 0o700,
                mtime: 6,
                ctime: 7,
                attrs,
                body: BodyV1::Dir { children: BTreeMap::from([("f".into(), InodeId(3)), ("r".into(), InodeId(4))]) },
            },
        );
        inodes.insert(
            InodeId(3),
            InodeV1 {
                parent: InodeId(2),
                name: "f".into(),
                mode: 0o644,
                mtime: 8,
                ctime: 9,
                attrs,
                body: BodyV1::File { size: 9000, chunk_size: 4096, checksums: vec![11, 12, 13] },
            },
        );
        inodes.insert(
            InodeId(4),
            InodeV1 {
                parent: InodeId(2),
                name: "r".into(),
                mode: 0o600,
                mtime: 8,
                ctime: 8,
                attrs,
                body: BodyV1::Region { size: 8192, chunk_size: 4096 },
            },
        );
        MetaStateV1 {
            initialised: true,
            inodes,
            next_inode: 10,
            workers: BTreeMap::new(),
            next_worker_id: 1,
            table: PartitionTable::new(4),
            pending_gc: BTreeSet::from([InodeId(7)]),
        }
    }

    #[test]
    fn version_1_states_migrate_with_every_inode_intact() {
        let bytes = postcard::to_allocvec(&v1()).unwrap();
        let old: MetaStateV1 = postcard::from_bytes(&bytes).unwrap();
        let mut s = MetaState::from(old);
        s.check_invariants().unwrap();
        let f = s.stat("/d/f").unwrap();
        assert_eq!((f.kind, f.size, f.mode, f.uid, f.gid, f.nlink), (InodeKind::File, 9000, 0o644, 0, 0, 1));
        assert_eq!((f.atime, f.mtime, f.ctime), (8, 8, 9));
        let lens: Vec<_> = f.chunks.iter().map(|c| (c.version, c.len, c.checksum)).collect();
        assert_eq!(lens, [(1, 4096, 11), (1, 4096, 12), (1, 808, 13)]);
        assert_eq!(s.stat("/d/r").unwrap().kind, InodeKind::Region);
        assert_eq!((s.stat("/d").unwrap().mode, s.stat("/d").unwrap().nlink), (0o700, 2));
        assert!(s.pending_gc().contains(&InodeId(7)));
        // The migrated state takes new ops as a fresh one would.
        s.execute(&MetaOp::Rename { from: "/d/f".into(), to: "/g".into() }, 20).unwrap();
        s.execute(&MetaOp::Remove { path: "/d".into(), recursive: true }, 21).unwrap();
        s.check_invariants().unwrap();
        assert!(s.pending_gc().contains(&InodeId(4)));
        assert_eq!(s.stat("/g").unwrap().chunks.len(), 3);
    }
}
