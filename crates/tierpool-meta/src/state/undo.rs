//! Undoing an op made of steps that each validate only once the steps
//! before them ran (a transaction's namespace changes): if a step fails,
//! the state goes back to what it was before the first, so the op, like
//! every other, fails without a trace.
//!
//! While an undo is armed, every inode (and its inline bytes) a step is
//! about to change is noted as it was (the same hook as `before`); the
//! few other parts such steps change are copied whole when it is armed:
//! the inode counter, the garbage queues, attachments, restore marks and
//! the placement hint. Those are small next to the namespace (garbage is
//! collected within seconds), and an op with steps is rare.
//!
//! Invariant (property-tested in `tests/behaviour/txns.rs`): arming, any
//! steps, then `rollback` leaves a state equal to the one armed, with no
//! garbage noted.

use super::{Garbage, Image, MetaState};
use crate::Attachment;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_types::{ChunkKey, InodeId};

/// What an armed undo put back besides inodes.
pub(super) struct Undo {
    next_inode: u64,
    pending_gc: BTreeSet<InodeId>,
    pending_chunks: BTreeSet<ChunkKey>,
    fresh: Garbage,
    attachments: BTreeMap<InodeId, Attachment>,
    restoring: BTreeMap<InodeId, (String, String)>,
    placed: bool,
}

impl MetaState {
    /// Starts noting what the next changes undo to.
    pub(super) fn arm_undo(&mut self) -> Undo {
        self.before.undo = Some(BTreeMap::new());
        Undo {
            next_inode: self.next_inode,
            pending_gc: self.pending_gc.clone(),
            pending_chunks: self.pending_chunks.clone(),
            fresh: self.fresh.0.clone(),
            attachments: self.attachments.clone(),
            restoring: self.snapshots.restoring.clone(),
            placed: self.placed.0,
        }
    }

    /// The changes since `arm_undo` stay.
    pub(super) fn keep_changes(&mut self) {
        self.before.undo = None;
    }

    /// Puts the state back as it was at `arm_undo`.
    pub(super) fn rollback(&mut self, undo: Undo) {
        let images: BTreeMap<InodeId, Image> = self.before.undo.take().unwrap_or_default();
        let put_back: Vec<InodeId> = images.keys().copied().collect();
        for (id, image) in images {
            match image.inode {
                Some(n) => self.inodes.insert(id, n),
                None => self.inodes.remove(&id),
            };
            match image.inline {
                Some(b) => self.inline.insert(id, b),
                None => self.inline.remove(id),
            }
        }
        // Directories whose entries were put back count their subdirectories again.
        self.recount_subdirs(put_back);
        self.next_inode = undo.next_inode;
        self.pending_gc = undo.pending_gc;
        self.pending_chunks = undo.pending_chunks;
        self.fresh.0 = undo.fresh;
        self.attachments = undo.attachments;
        self.snapshots.restoring = undo.restoring;
        self.placed.0 = undo.placed;
    }
}
