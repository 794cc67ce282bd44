//! Membership and the partition table: workers joining, being drained,
//! removed; the goal the table moves toward, and the moves that get it there.
//!
//! A worker's weight is `mem_capacity + disk_capacity`. The first workers of
//! a pool take the unowned partitions at once (there is nothing to copy).
//! Once every partition has an owner, a change of membership never moves
//! an owner by itself: it sets a *goal* (the table the weights ask for, moving
//! as few partitions as it takes) and the coordinator moves partitions toward
//! it a few at a time (`BeginMoves` / `FinishMoves`), each copied before its
//! new owner takes it. Only `RemoveWorker` changes owners at once (a dead
//! worker's chunks cannot be copied), and only those of the removed worker;
//! its id may never register again. Removing the last worker not draining
//! calls the drains off (no one else could take their partitions).
//!
//! Invariants (also in `check.rs`): a goal, if any, has one entry per
//! partition, each a known worker that is not draining; moving partitions
//! go to known workers other than their owners; draining workers are known.

use super::MetaState;
use crate::{MetaReply, WorkerRecord};
use tierpool_placement::PartitionTable;
use tierpool_types::{Error, ErrorKind, InodeId, Result, WorkerId};

impl MetaState {
    pub(super) fn register_worker(
        &mut self,
        id: Option<WorkerId>,
        mut record: WorkerRecord,
        at_once: bool,
    ) -> Result<MetaReply> {
        if let Some(known) = id.and_then(|id| self.workers.get_mut(&id)) {
            record.id = known.id;
            *known = record;
            let id = known.id;
            if !at_once {
                self.restarted(id);
            } else if self.down.contains(&id) {
                // It kept what it held: back as a silent worker comes back.
                self.worker_up(id)?;
            }
            return Ok(MetaReply::Worker { id });
        }
        if let Some(gone) = id.filter(|id| self.removed.contains(id)) {
            return Err(Error::invalid(format!(
                "worker {gone} was removed from the pool; start it on an empty directory to join as a new worker"
            )));
        }
        let id = match id {
            Some(id) => id,
            None => {
                WorkerId(u32::try_from(self.next_worker_id).map_err(|_| Error::invalid("worker ids are exhausted"))?)
            }
        };
        record.id = id;
        self.workers.insert(id, record);
        self.next_worker_id = self.next_worker_id.max(u64::from(id.0) + 1);
        let weights = self.weights();
        // With several replicas, an unowned slot may have chunks to copy
        // from a sibling, unless no id was ever handed out (no chunk can exist).
        let fresh = if self.table.replicas() == 1 {
            self.table.owners().iter().any(Option::is_none)
        } else {
            self.table.owners().iter().all(Option::is_none) || self.next_inode == InodeId::ROOT.0 + 1
        };
        if at_once || fresh {
            // Partitions no one holds are taken at once: nothing to copy.
            self.table = self.table.joined(&weights, id, None);
            if self.table.replicas() > 1 {
                let owners = self.apart(self.table.clone(), false);
                let t = PartitionTable::from_slots(self.table.epoch(), self.table.replicas(), owners);
                self.table = t.expect("trading keeps a table").spread();
            }
            self.goal.clear();
        } else {
            self.goal = self.apart(self.planned_live(&weights).joined(&weights, id, Some(&self.table)), true);
            self.goal_reached();
        }
        Ok(MetaReply::Worker { id })
    }

    /// Every known worker that is neither draining nor down, with its weight: its
    /// capacity (MEM + DISK) times the share of a healthy worker's
    /// bandwidth it delivers.
    pub(super) fn weights(&self) -> Vec<(WorkerId, u64)> {
        (self.workers.values())
            .filter(|w| !self.draining.contains(&w.id) && !self.down.contains(&w.id))
            .map(|w| {
                (
                    w.id,
                    tierpool_placement::weight(
                        w.mem_capacity,
                        w.disk_capacity,
                        self.speeds.get(&w.id).copied().unwrap_or(100),
                    ),
                )
            })
            .collect()
    }

    pub(super) fn set_speed(&mut self, id: WorkerId, percent: u8) -> Result<MetaReply> {
        self.known(id)?;
        if !(1..=100).contains(&percent) {
            return Err(Error::invalid(format!("a speed of {percent}% is not in 1..=100")));
        }
        if percent == 100 {
            self.speeds.remove(&id);
        } else {
            self.speeds.insert(id, percent);
        }
        self.goal = self.apart(self.planned().rebalanced(&self.weights()), true);
        self.goal_reached();
        Ok(MetaReply::Done)
    }

    /// The share of a healthy worker's bandwidth each slower worker delivers.
    pub fn speeds(&self) -> &std::collections::BTreeMap<WorkerId, u8> {
        &self.speeds
    }

    /// The table as it will be once the goal is reached (no moves).
    pub(super) fn planned(&self) -> PartitionTable {
        let owners = if self.goal.is_empty() { self.table.owners().to_vec() } else { self.goal.clone() };
        PartitionTable::from_slots(self.table.epoch(), self.table.replicas(), owners).expect("a goal is a table")
    }

    /// [`planned`](Self::planned) with the slots of workers down dealt to
    /// those in `weights`: a goal never names a worker down (its slots with
    /// no live sibling stay with it in the table, not in the goal).
    pub(super) fn planned_live(&self, weights: &[(WorkerId, u64)]) -> PartitionTable {
        let mut plan = self.planned();
        for d in &self.down {
            plan = plan.handed_out(*d, weights, Some(&self.table));
        }
        plan
    }

    pub(super) fn known(&self, id: WorkerId) -> Result<()> {
        if self.workers.contains_key(&id) {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::NotFound, format!("worker {id} is not part of the pool")))
        }
    }

    pub(super) fn drain_worker(&mut self, id: WorkerId) -> Result<MetaReply> {
        self.known(id)?;
        if self.workers.len() - self.draining.len() - usize::from(!self.draining.contains(&id)) == 0 {
            return Err(Error::invalid(format!(
                "worker {id} is the last one not draining: nothing could take its partitions"
            )));
        }
        let left =
            (self.workers.keys()).filter(|w| **w != id && !self.draining.contains(w) && !self.down.contains(w)).count();
        if self.table.replicas() > 1 && left < usize::from(self.table.replicas()) {
            return Err(Error::invalid(format!(
                "draining worker {id} would leave {left} workers for {} copies of each chunk: add a worker first, or remove it",
                self.table.replicas()
            )));
        }
        self.draining.insert(id);
        // Copies into it are given up: it is to take nothing.
        let into: Vec<u32> = self.table.moving().iter().filter(|(_, to)| **to == id).map(|(p, _)| *p).collect();
        self.table.abort_moves(&into);
        // Only its partitions move: to the others furthest below their share.
        self.goal = self.apart(self.planned().handed_out(id, &self.weights(), Some(&self.table)), true);
        self.goal_reached();
        Ok(MetaReply::Done)
    }

    pub(super) fn remove_worker(&mut self, id: WorkerId) -> Result<MetaReply> {
        self.known(id)?;
        if self.workers.len() == 1 {
            return Err(Error::invalid(format!("worker {id} is the pool's last worker")));
        }
        // Partitions only it holds: their chunks are lost.
        let partitions: Vec<u32> = (0..self.table.partitions())
            .filter(|p| self.table.holders(*p).iter().all(|w| *w == id) && self.table.holds(*p, id))
            .collect();
        let lost = self.paths_of(&self.inodes_in_partitions(&partitions.iter().copied().collect()));
        self.workers.remove(&id);
        self.draining.remove(&id);
        self.speeds.remove(&id);
        self.down.remove(&id);
        self.removed.insert(id);
        if self.workers.keys().all(|w| self.draining.contains(w)) {
            // No one left could take a drained worker's partitions: the
            // drains are called off.
            self.draining.clear();
        }
        let weights = self.weights();
        let goal = self.planned();
        self.table = self.table.without(id, &weights);
        if self.table.replicas() > 1 {
            // Its slots with a replica elsewhere were let go: dealt again, copied from it.
            self.goal = self.apart(self.planned().handed_out(id, &weights, Some(&self.table)), true);
            self.goal_reached();
        } else if !self.goal.is_empty() {
            // The goal had partitions on `id` too: they go to the others.
            self.goal = self.apart(goal.handed_out(id, &weights, Some(&self.table)), true);
            self.goal_reached();
        }
        Ok(MetaReply::WorkerRemoved { partitions, lost })
    }

    pub(super) fn rebalance(&mut self) -> Result<MetaReply> {
        if self.workers.is_empty() {
            return Err(Error::invalid("the pool has no workers to balance"));
        }
        self.goal = self.apart(self.table.rebalanced(&self.weights()), true);
        self.goal_reached();
        Ok(MetaReply::Done)
    }

    pub(super) fn begin_moves(&mut self, moves: &[(u32, WorkerId)]) -> Result<MetaReply> {
        for (_, to) in moves {
            self.known(*to)?;
            if self.draining.contains(to) {
                return Err(Error::invalid(format!("worker {to} is draining: it takes no partitions")));
            }
        }
        self.table.begin_moves(moves).map_err(Error::invalid)?;
        Ok(MetaReply::Done)
    }

    pub(super) fn finish_moves(&mut self, partitions: &[u32]) -> Result<MetaReply> {
        if let Some(p) = partitions.iter().find(|p| !self.table.moving().contains_key(p)) {
            return Err(Error::invalid(format!("{} is not moving", self.table.slot_name(*p))));
        }
        self.table.finish_moves(partitions);
        self.goal_reached();
        Ok(MetaReply::Done)
    }

    pub(super) fn abort_moves(&mut self, partitions: &[u32]) -> Result<MetaReply> {
        self.table.abort_moves(partitions);
        Ok(MetaReply::Done)
    }

    /// Forgets the goal once the table is there.
    pub(super) fn goal_reached(&mut self) {
        if !self.goal.is_empty() && tierpool_placement::plan::remaining(&self.table, &self.goal) == 0 {
            self.goal.clear();
        }
    }

    /// The owner each partition should end with (empty: where it is).
    pub fn goal(&self) -> &[Option<WorkerId>] {
        &self.goal
    }

    /// Workers removed from the pool (their ids may not come back).
    pub fn removed(&self) -> &std::collections::BTreeSet<WorkerId> {
        &self.removed
    }

    /// Workers being emptied.
    pub fn draining(&self) -> &std::collections::BTreeSet<WorkerId> {
        &self.draining
    }
}
