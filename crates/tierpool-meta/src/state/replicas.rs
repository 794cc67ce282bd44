//! Replication: how many copies of each chunk the pool keeps, per path,
//! and what a worker going down or coming back does to the table.
//!
//! The pool's replication R (`SetReplication`, fixed before any worker
//! joins) is the number of slots per partition; a path keeps 1..=R copies
//! (`SetReplicas`, inherited by new entries; 0 stored means "the pool's").
//! A chunk of a file keeping `f` copies lives on the owners of its
//! partition's first `f` slots.
//!
//! `WorkerDown` lets go of the slots of a silent worker whose partition
//! still has a replica on a live worker, and sets a goal that deals them to
//! the live workers: moves from no owner then copy each from a surviving
//! replica (repair). Slots with no live sibling stay with the silent worker
//! (nothing else holds their chunks): they come back with it. `WorkerUp`
//! gives a worker back its share, copied in by moves; what it held of slots
//! let go meanwhile is stale and dropped by it.

use super::MetaState;
use crate::{MetaReply, Timestamp};
use std::collections::BTreeSet;
use tierpool_placement::PartitionTable;
use tierpool_types::{Error, InodeId, Placement, Result, Spread, WorkerId};

/// The most copies of a chunk a pool may keep.
pub const MAX_REPLICAS: u8 = 8;

/// Replication health of one file or region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaHealth {
    pub inode: InodeId,
    /// Copies each chunk should have.
    pub replicas: u8,
    /// Chunks that have data.
    pub chunks: u64,
    /// Chunks with fewer live copies than `replicas` (at least one).
    pub under: u64,
    /// Their bytes.
    pub bytes_under: u64,
    /// Chunks with no live copy: unreadable until a worker comes back.
    pub lost: u64,
}

impl MetaState {
    pub(super) fn set_replication(&mut self, replicas: u8, spread: Spread) -> Result<MetaReply> {
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            return Err(Error::invalid(format!("a pool keeps 1 to {MAX_REPLICAS} copies of a chunk, not {replicas}")));
        }
        if replicas == self.table.replicas() && spread == self.spread {
            return Ok(MetaReply::Done);
        }
        if !self.workers.is_empty() {
            return Err(Error::invalid(if replicas == self.table.replicas() {
                format!(
                    "the pool spreads replicas by {} (set when it was created): it cannot change to {spread}",
                    self.spread
                )
            } else {
                format!(
                    "the pool keeps {} copies of each chunk (set when it was created): it cannot change to {replicas}",
                    self.table.replicas()
                )
            }));
        }
        self.table = PartitionTable::replicated(self.table.partitions(), replicas);
        self.spread = spread;
        self.goal.clear();
        Ok(MetaReply::Done)
    }

    /// Copies of each chunk inode `id` keeps: its own setting capped by the
    /// pool's; one if its placement is `local-only`.
    pub fn copies(&self, id: InodeId) -> u8 {
        let r = self.table.replicas();
        match self.inodes.get(&id).map(|n| (n.replicas, n.placement)) {
            Some((_, Placement::LocalOnly)) => 1,
            Some((0, _)) | None => r,
            Some((n, _)) => n.min(r),
        }
    }

    /// The owners of `t`'s slots, replicas traded apart onto distinct
    /// `--host` labels (`--rack` labels with `--spread rack`) where that can be done (see
    /// `PartitionTable::separated`); with `moves`, no slot goes to a worker
    /// that holds another slot of its partition in the current table.
    pub(super) fn apart(&self, t: PartitionTable, moves: bool) -> Vec<Option<WorkerId>> {
        if t.replicas() == 1 {
            return t.owners().to_vec();
        }
        // With `--spread rack`, a worker's rack label stands for it (its
        // host label when it has no rack).
        fn label(spread: Spread, w: &crate::WorkerRecord) -> &str {
            match spread {
                Spread::Rack if !w.rack.is_empty() => w.rack.as_str(),
                _ => w.host.as_str(),
            }
        }
        let label = |w| label(self.spread, w);
        let mut names: Vec<&str> = self.workers.values().map(label).collect();
        names.sort_unstable();
        names.dedup();
        let host = |w: WorkerId| {
            let h = label(self.workers.get(&w)?);
            names.binary_search(&h).ok().map(|i| i as u32)
        };
        t.separated(&host, moves.then_some(&self.table)).owners().to_vec()
    }

    /// Workers down (silent past their grace period, in a replicated pool).
    pub fn down(&self) -> &BTreeSet<WorkerId> {
        &self.down
    }

    pub(super) fn worker_down(&mut self, id: WorkerId) -> Result<MetaReply> {
        self.known(id)?;
        if self.table.replicas() == 1 {
            return Err(Error::invalid("the pool keeps one copy of each chunk: there is nothing to repair"));
        }
        self.down.insert(id);
        let into: Vec<u32> = self.table.moving().iter().filter(|(_, to)| **to == id).map(|(s, _)| *s).collect();
        self.table.abort_moves(&into);
        let (table, _) = self.table.released(id, &self.down);
        self.table = table;
        self.goal = self.apart(self.planned().handed_out(id, &self.weights(), Some(&self.table)), true);
        self.goal_reached();
        Ok(MetaReply::Done)
    }

    /// Worker `id` started again (it registers once per process): in a
    /// replicated pool what it held in memory is gone, so it is treated as
    /// down and up again at once: its replicas with a copy elsewhere are
    /// let go and copied back into it (what it kept on disk is dropped and
    /// copied again: simple, and never stale). With one copy per chunk its
    /// partitions stay (its disk is all there is).
    pub(super) fn restarted(&mut self, id: WorkerId) {
        if self.table.replicas() == 1 || self.removed.contains(&id) {
            return;
        }
        if !self.down.contains(&id) {
            self.worker_down(id).expect("a known worker of a replicated pool goes down");
        }
        self.worker_up(id).expect("a down worker comes up");
    }

    pub(super) fn worker_up(&mut self, id: WorkerId) -> Result<MetaReply> {
        self.known(id)?;
        if !self.down.remove(&id) {
            return Err(Error::invalid(format!("worker {id} is not down")));
        }
        if !self.draining.contains(&id) {
            let weights = self.weights();
            self.goal = self.apart(self.planned_live(&weights).joined(&weights, id, Some(&self.table)), true);
            self.goal_reached();
        }
        Ok(MetaReply::Done)
    }

    pub(super) fn set_replicas(
        &mut self,
        comps: &[String],
        replicas: u8,
        recursive: bool,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let r = self.table.replicas();
        if replicas == 0 || replicas > r {
            let why = if r == 1 {
                "the pool keeps one copy of each chunk (its --replicas when it was created)".to_string()
            } else {
                format!("the pool keeps at most {r} copies of each chunk (its --replicas when it was created)")
            };
            return Err(Error::invalid(format!("cannot keep {replicas} copies: {why}")));
        }
        let id = self.lookup(comps)?;
        let ids = if recursive { self.subtree(id) } else { vec![id] };
        let mut changed = Vec::new();
        for i in ids {
            let before = self.copies(i);
            let n = self.node_mut(i);
            n.replicas = replicas;
            n.ctime = now;
            if n.has_data() && before != replicas {
                changed.push((i, before, replicas));
            }
        }
        changed.sort();
        Ok(MetaReply::Replicas { changed })
    }

    /// The chunks of file or region `id` that hold data, with their
    /// lengths (a region's all count); `None` for any other inode.
    fn stored_chunks(&self, id: InodeId) -> Option<Vec<(tierpool_types::ChunkKey, u64)>> {
        match &self.node(id).body {
            super::inode::Body::File { chunks, .. } => Some(
                (chunks.iter().enumerate())
                    .filter(|(_, c)| c.is_stored())
                    .map(|(i, c)| (c.key(id, i as u64), c.len))
                    .collect(),
            ),
            super::inode::Body::Region { size, chunk_size } => Some(
                (0..size.div_ceil((*chunk_size).max(1)))
                    .map(|i| (tierpool_types::ChunkKey::hashed(id, i, 1), (size - i * chunk_size).min(*chunk_size)))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Every file and region at or under `comps` with the copies its chunks
    /// keep and each chunk that holds data: `(inode, copies, keys)`.
    pub fn chunks_under(&self, comps: &[String]) -> Result<Vec<(InodeId, u8, Vec<tierpool_types::ChunkKey>)>> {
        let mut out = Vec::new();
        for id in self.subtree(self.lookup(comps)?) {
            let Some(chunks) = self.stored_chunks(id) else { continue };
            let keys = chunks.into_iter().map(|(key, _)| key).collect();
            out.push((id, self.copies(id), keys));
        }
        Ok(out)
    }

    /// The replication health of every file and region at or under
    /// `comps` (everything: empty) with a chunk short of copies, counting
    /// the workers in `dead` (and those down) as gone: by the table alone
    /// (a chunk keeping `f` copies lives on its partition's first `f`
    /// slots), without asking workers what they hold.
    pub fn replica_health(&self, comps: &[String], dead: &BTreeSet<WorkerId>) -> Result<Vec<ReplicaHealth>> {
        let ids = self.subtree(self.lookup(comps)?);
        let live = |w: &WorkerId| !dead.contains(w) && !self.down.contains(w);
        let n = self.table.partitions();
        let mut out = Vec::new();
        for id in ids {
            let Some(chunks) = self.stored_chunks(id) else { continue };
            let f = self.copies(id);
            let mut h = ReplicaHealth {
                inode: id,
                replicas: f,
                chunks: chunks.len() as u64,
                under: 0,
                bytes_under: 0,
                lost: 0,
            };
            for (key, len) in chunks {
                let p = tierpool_placement::partition_of_key(key, n);
                let first = self.table.slots_of(p).take(usize::from(f));
                let alive = first.filter(|s| self.table.owner(*s).is_some_and(|w| live(&w))).count();
                if alive == 0 {
                    h.lost += 1;
                } else if alive < usize::from(f) {
                    h.under += 1;
                    h.bytes_under += len;
                }
            }
            if h.under + h.lost > 0 {
                out.push(h);
            }
        }
        Ok(out)
    }
}
