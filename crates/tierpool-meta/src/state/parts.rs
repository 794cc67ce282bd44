//! The state taken apart and put together again, for the records that store
//! it: a borrowed [`StateView`] to write a snapshot from, and owned
//! [`StateParts`] that a snapshot decodes into.
//!
//! [`MetaState::from_parts`] checks every invariant before it hands out a
//! state, so a snapshot that decodes but describes an impossible state
//! (a bug, or a damaged file whose checksum still matched) is refused
//! instead of served.

use super::inode::Inode;
use super::snapshots::Snapshot;
use super::MetaState;
use crate::{Attachment, WorkerRecord};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_placement::PartitionTable;
use tierpool_types::{ChunkKey, InodeId, Result, Spread, WorkerId};

/// Every field of a state, borrowed.
#[derive(Copy, Clone, Debug)]
pub struct StateView<'a> {
    pub initialised: bool,
    pub inodes: &'a BTreeMap<InodeId, Inode>,
    pub next_inode: u64,
    pub workers: &'a BTreeMap<WorkerId, WorkerRecord>,
    pub next_worker_id: u64,
    pub table: &'a PartitionTable,
    pub pending_gc: &'a BTreeSet<InodeId>,
    pub pending_chunks: &'a BTreeSet<ChunkKey>,
    pub retired: &'a BTreeSet<u64>,
    pub goal: &'a [Option<WorkerId>],
    pub draining: &'a BTreeSet<WorkerId>,
    pub removed: &'a BTreeSet<WorkerId>,
    pub speeds: &'a BTreeMap<WorkerId, u8>,
    pub down: &'a BTreeSet<WorkerId>,
    pub spread: Spread,
    pub attachments: &'a BTreeMap<InodeId, Attachment>,
    /// File inode -> its bytes, for the small files held inline.
    pub inline: &'a BTreeMap<InodeId, Bytes>,
    /// (path, name) -> snapshot.
    pub snapshots: &'a BTreeMap<(String, String), Snapshot>,
    /// Region -> the checkpoint (path, name) a restore has not finished bringing back.
    pub restoring: &'a BTreeMap<InodeId, (String, String)>,
    /// Task ids of committed transactions.
    pub tasks: &'a BTreeSet<String>,
    /// Region pages of committed transactions not yet on the workers.
    pub pending_pages: &'a BTreeMap<u64, Vec<crate::TxRegion>>,
}

/// Every field of a state, owned: what a decoded snapshot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateParts {
    pub initialised: bool,
    pub inodes: BTreeMap<InodeId, Inode>,
    pub next_inode: u64,
    pub workers: BTreeMap<WorkerId, WorkerRecord>,
    pub next_worker_id: u64,
    pub table: PartitionTable,
    pub pending_gc: BTreeSet<InodeId>,
    pub pending_chunks: BTreeSet<ChunkKey>,
    pub retired: BTreeSet<u64>,
    pub goal: Vec<Option<WorkerId>>,
    pub draining: BTreeSet<WorkerId>,
    pub removed: BTreeSet<WorkerId>,
    pub speeds: BTreeMap<WorkerId, u8>,
    pub down: BTreeSet<WorkerId>,
    pub spread: Spread,
    pub attachments: BTreeMap<InodeId, Attachment>,
    pub inline: BTreeMap<InodeId, Bytes>,
    pub snapshots: BTreeMap<(String, String), Snapshot>,
    pub restoring: BTreeMap<InodeId, (String, String)>,
    pub tasks: BTreeSet<String>,
    pub pending_pages: BTreeMap<u64, Vec<crate::TxRegion>>,
}

impl MetaState {
    /// The state's fields, to be stored.
    pub fn view(&self) -> StateView<'_> {
        StateView {
            initialised: self.initialised,
            inodes: &self.inodes,
            next_inode: self.next_inode,
            workers: &self.workers,
            next_worker_id: self.next_worker_id,
            table: &self.table,
            pending_gc: &self.pending_gc,
            pending_chunks: &self.pending_chunks,
            retired: &self.retired,
            goal: &self.goal,
            draining: &self.draining,
            removed: &self.removed,
            speeds: &self.speeds,
            down: &self.down,
            spread: self.spread,
            attachments: &self.attachments,
            inline: &self.inline.files,
            snapshots: &self.snapshots.named,
            restoring: &self.snapshots.restoring,
            tasks: &self.tasks,
            pending_pages: &self.pending_pages,
        }
    }

    /// A state from stored fields, if they satisfy every invariant.
    pub fn from_parts(p: StateParts) -> Result<MetaState> {
        let s = MetaState {
            initialised: p.initialised,
            inodes: p.inodes,
            next_inode: p.next_inode,
            workers: p.workers,
            next_worker_id: p.next_worker_id,
            table: p.table,
            pending_gc: p.pending_gc,
            pending_chunks: p.pending_chunks,
            retired: p.retired,
            goal: p.goal,
            draining: p.draining,
            removed: p.removed,
            speeds: p.speeds,
            down: p.down,
            spread: p.spread,
            attachments: p.attachments,
            inline: super::inline::Inline::of(p.inline),
            snapshots: super::snapshots::Snapshots::of(p.snapshots, p.restoring),
            tasks: p.tasks,
            pending_pages: p.pending_pages,
            placed: Default::default(),
            subdirs: Default::default(),
            owed: Default::default(),
            fresh: Default::default(),
            before: Default::default(),
            changes: Default::default(),
            pended: Default::default(),
        };
        let mut s = s;
        let dirs: Vec<InodeId> = s.inodes.iter().filter(|(_, n)| n.is_dir()).map(|(id, _)| *id).collect();
        s.recount_subdirs(dirs);
        s.rebuild_owed();
        s.check_invariants()?;
        s.note_placed();
        Ok(s)
    }
}

impl StateView<'_> {
    /// An owned copy.
    pub fn to_parts(&self) -> StateParts {
        StateParts {
            initialised: self.initialised,
            inodes: self.inodes.clone(),
            next_inode: self.next_inode,
            workers: self.workers.clone(),
            next_worker_id: self.next_worker_id,
            table: self.table.clone(),
            pending_gc: self.pending_gc.clone(),
            pending_chunks: self.pending_chunks.clone(),
            retired: self.retired.clone(),
            goal: self.goal.to_vec(),
            draining: self.draining.clone(),
            removed: self.removed.clone(),
            speeds: self.speeds.clone(),
            down: self.down.clone(),
            spread: self.spread,
            attachments: self.attachments.clone(),
            inline: self.inline.clone(),
            snapshots: self.snapshots.clone(),
            restoring: self.restoring.clone(),
            tasks: self.tasks.clone(),
            pending_pages: self.pending_pages.clone(),
        }
    }
}
