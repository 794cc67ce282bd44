//! Undoing an op made of steps that each validate only once the steps
//! before them ran (a transaction's namespace changes): if a step fails,
//! the state goes back to what it was before the first, so the op, like
//! every other, fails without a trace.
//!
//! While an undo is armed, every inode (and its inline bytes) a step is
//! about to change is noted as it was (the same hook as `before`), and
//! every item put in or taken out of the garbage sets is noted in order
//! (they may hold a large backlog, say after a tree's removal, which an
//! op with steps must not copy); the garbage just made is cut back to its
//! length when armed. The few other parts such steps change are copied
//! whole when it is armed: the inode counter, attachments, restore marks
//! and the placement hint.
//!
//! Invariant (property-tested in `tests/behaviour/txns.rs`): arming, any
//! steps, then `rollback` leaves a state equal to the one armed, with no
//! garbage noted.

use super::{Image, MetaState};
use crate::Attachment;
use std::collections::BTreeMap;
use tierpool_types::{ChunkKey, InodeId};

/// What an armed undo put back besides inodes and garbage sets.
pub(super) struct Undo {
    next_inode: u64,
    /// The lengths of the garbage just made (`Garbage`'s inodes and keys).
    fresh: (usize, usize),
    attachments: BTreeMap<InodeId, Attachment>,
    restoring: BTreeMap<InodeId, (String, String)>,
    placed: bool,
}

/// An item put in (`true`) or taken out of a garbage set while an undo was armed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pended {
    Inode(InodeId, bool),
    Chunk(ChunkKey, bool),
}

impl MetaState {
    /// Starts noting what the next changes undo to.
    pub(super) fn arm_undo(&mut self) -> Undo {
        self.before.undo = Some(BTreeMap::new());
        self.before.undo_garbage.clear();
        Undo {
            next_inode: self.next_inode,
            fresh: (self.fresh.0.inodes.len(), self.fresh.0.keys.len()),
            attachments: self.attachments.clone(),
            restoring: self.snapshots.restoring.clone(),
            placed: self.placed.0,
        }
    }

    /// The changes since `arm_undo` stay.
    pub(super) fn keep_changes(&mut self) {
        self.before.undo = None;
        self.before.undo_garbage.clear();
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
        for p in std::mem::take(&mut self.before.undo_garbage).into_iter().rev() {
            match p {
                Pended::Inode(id, true) => self.pending_gc.remove(&id),
                Pended::Inode(id, false) => self.pending_gc.insert(id),
                Pended::Chunk(key, true) => self.pending_chunks.remove(&key),
                Pended::Chunk(key, false) => self.pending_chunks.insert(key),
            };
        }
        self.fresh.0.inodes.truncate(undo.fresh.0);
        self.fresh.0.keys.truncate(undo.fresh.1);
        self.attachments = undo.attachments;
        self.snapshots.restoring = undo.restoring;
        self.placed.0 = undo.placed;
    }
}
