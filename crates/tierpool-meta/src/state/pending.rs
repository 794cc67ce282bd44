//! The garbage sets (`pending_gc`: inodes whose chunks all go;
//! `pending_chunks`: single chunk versions) change only here, so that
//! two readers hear of every change without walking the sets:
//!
//! - an armed undo (`undo.rs`) notes each item put in or taken out, in
//!   order, to replay them backwards;
//! - the collector's schedule (`engine::gc`) takes the items put in since
//!   it last asked ([`MetaState::take_pended`]), to start their grace
//!   period, instead of merging the whole sets at every tick.
//!
//! Like the other notes, the news say what just happened, not what the
//! state is: two states compare equal whatever they hold. An item the
//! news name may have left the sets since (collected, or put back by an
//! undo); a reader checks the sets.

use super::undo::Pended;
use super::MetaState;
use tierpool_types::{ChunkKey, InodeId};

/// Items put in the garbage sets since the schedule last took them.
#[derive(Clone, Debug, Default)]
pub struct PendedNews {
    pub inodes: Vec<InodeId>,
    pub keys: Vec<ChunkKey>,
}

impl PartialEq for PendedNews {
    fn eq(&self, _: &PendedNews) -> bool {
        true
    }
}

impl Eq for PendedNews {}

impl MetaState {
    /// The items put in the garbage sets since the last call.
    pub fn take_pended(&mut self) -> PendedNews {
        std::mem::take(&mut self.pended)
    }

    /// Inode `id`'s chunks are garbage.
    pub(super) fn pend_inode(&mut self, id: InodeId) {
        if self.pending_gc.insert(id) {
            self.pended.inodes.push(id);
            self.note_undo(Pended::Inode(id, true));
        }
    }

    /// Inode `id`'s chunks are gone from the workers.
    pub(super) fn unpend_inode(&mut self, id: InodeId) {
        if self.pending_gc.remove(&id) {
            self.note_undo(Pended::Inode(id, false));
        }
    }

    /// Chunk version `key` is garbage.
    pub(super) fn pend_chunk(&mut self, key: ChunkKey) {
        if self.pending_chunks.insert(key) {
            self.pended.keys.push(key);
            self.note_undo(Pended::Chunk(key, true));
        }
    }

    /// Chunk version `key` is no longer garbage (gone, or its inode's).
    pub(super) fn unpend_chunk(&mut self, key: ChunkKey) {
        if self.pending_chunks.remove(&key) {
            self.note_undo(Pended::Chunk(key, false));
        }
    }

    /// Notes `p` for the undo, if one is armed.
    fn note_undo(&mut self, p: Pended) {
        if self.before.undo.is_some() {
            self.before.undo_garbage.push(p);
        }
    }
}
