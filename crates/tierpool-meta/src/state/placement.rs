//! Placement policies per path (`SetPlacement`) and the home partitions
//! writers record for the chunks they placed.
//!
//! A policy is a writer's rule, not the state's: the state keeps each
//! inode's policy (new entries inherit their directory's), checks that
//! every home a commit names is a partition of the pool, and keeps the
//! homes with the chunks (`ChunkRef::home`), so that a chunk's partition
//! is known from its metadata whatever policy placed it. Partitions move as
//! the pool changes shape and carry their chunks with them: a home never
//! needs rewriting. A `local-only` inode keeps one copy of each chunk.

use super::MetaState;
use crate::{MetaReply, Timestamp};
use tierpool_types::{ChunkKey, Error, Placement, Result, Spread};

impl MetaState {
    pub(super) fn set_placement(
        &mut self,
        comps: &[String],
        placement: Placement,
        recursive: bool,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let id = self.lookup(comps)?;
        let ids = if recursive { self.subtree(id) } else { vec![id] };
        for i in &ids {
            let n = self.node_mut(*i);
            n.placement = placement;
            n.ctime = now;
        }
        self.placed.0 |= placement != Placement::Hash;
        Ok(MetaReply::Placed { inodes: ids.len() as u64 })
    }

    /// Every home named is a partition of the pool.
    pub(super) fn check_homes(&self, homes: impl IntoIterator<Item = Option<u32>>) -> Result<()> {
        let n = self.table.partitions();
        match homes.into_iter().flatten().find(|p| *p >= n || *p > ChunkKey::MAX_HOME) {
            Some(p) => Err(Error::invalid(format!("home partition {p} is not one of the pool's {n} partitions"))),
            None => Ok(()),
        }
    }

    /// Whether some path may have a placement policy other than `hash`
    /// (writers then look up their directory's before writing).
    pub fn placed(&self) -> bool {
        self.placed.0
    }

    /// What the replicas of a partition are kept apart by.
    pub fn spread(&self) -> Spread {
        self.spread
    }

    /// Sets `placed` from the inodes (after loading a state).
    pub(super) fn note_placed(&mut self) {
        self.placed.0 = self.inodes.values().any(|n| n.placement != Placement::Hash);
    }
}
