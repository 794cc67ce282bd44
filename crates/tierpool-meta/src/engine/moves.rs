//! Moving partitions toward the goal: which moves to start, which pairs of
//! workers to leave alone for a while after a failure, and how far along
//! the current migration is.
//!
//! A move is started by logging `BeginMoves`, carried out by the shell
//! (the new owner copies the partition from the old one), and ended by
//! logging `FinishMoves` once the copy is complete or `AbortMoves` if it
//! failed. At most `max_moving` partitions move at once, dealt round-robin
//! over their sources (see `tierpool_placement::plan`); both ends of a
//! move must be alive. A pair whose move failed is not tried again before
//! a back-off (doubling from one second up to a minute).
//!
//! Moves that were under way when the coordinator stopped cannot be
//! resumed (no copy survives it): [`Mover::interrupted`] names them, to be
//! given up and started again.

use crate::MetaState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tierpool_placement::plan;
use tierpool_types::WorkerId;

/// Partitions copied by one move at most.
pub const MOVE_GROUP: usize = 8;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One move being carried out: the slots (see `PartitionTable`) going to
/// `to`, copied from `from` (their owner, or for a repair a worker holding
/// another replica of each). With one replica per partition a slot is a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub from: WorkerId,
    pub to: WorkerId,
    pub partitions: Vec<u32>,
}

/// The current migration (since the goal last became unreached), or the
/// last one once `ended`: its figures stay on show until the next begins.
#[derive(Clone, Debug)]
struct Run {
    started: Duration,
    ended: Option<Duration>,
    partitions_done: u32,
    bytes_moved: u64,
}

#[derive(Clone, Debug)]
pub struct Mover {
    max_moving: usize,
    /// Partitions this engine started moving and has not ended.
    running: BTreeSet<u32>,
    /// Pairs `(from, to)` whose last move failed: not before, failures in a
    /// row (moves that fail together, e.g. at one crash, count once).
    backoff: BTreeMap<(WorkerId, WorkerId), (Duration, u32)>,
    run: Option<Run>,
    failed: u64,
}

/// How far along the current migration is (see `tierpool_proto::MigrationStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub active: bool,
    pub partitions_moving: u32,
    pub partitions_left: u32,
    pub partitions_done: u32,
    pub bytes_moved: u64,
    pub bytes_total: u64,
    pub elapsed: Duration,
    pub moves_failed: u64,
}

impl Mover {
    pub fn new(max_moving: usize) -> Mover {
        Mover {
            max_moving: max_moving.max(1),
            running: BTreeSet::new(),
            backoff: BTreeMap::new(),
            run: None,
            failed: 0,
        }
    }

    /// Partitions the table says are moving that this engine did not start
    /// (moves of a coordinator that stopped): to be given up. Meaningful
    /// before this engine starts any move (a move that just ended is no
    /// longer running but may not be logged as ended yet).
    pub fn interrupted(&self, state: &MetaState) -> Vec<u32> {
        state.table().moving().keys().filter(|p| !self.running.contains(p)).copied().collect()
    }

    /// The moves to start now, grouped by pair of workers in moves of at
    /// most [`MOVE_GROUP`] partitions (each finishes on its own: the table
    /// changes in steps readers can follow, a failure gives up few): as
    /// many partitions as there is room for, both ends alive, no pair in
    /// back-off. The caller logs `BeginMoves` of them all and then calls
    /// [`started`](Self::started).
    pub fn next(&mut self, state: &MetaState, alive: impl Fn(WorkerId) -> bool, now: Duration) -> Vec<Move> {
        let room = self.max_moving.saturating_sub(state.table().moving().len());
        if room == 0 || state.goal().is_empty() {
            return Vec::new();
        }
        let t = state.table();
        let candidates = plan::next_moves(t, state.goal(), usize::MAX);
        let mut pairs: BTreeMap<(WorkerId, WorkerId), Vec<u32>> = BTreeMap::new();
        let mut taken = 0;
        for (p, to) in candidates {
            // The copy comes from the slot's owner, or (owner down or gone)
            // from the first live worker holding another replica.
            let part = t.partition_of_slot(p);
            let Some(from) =
                t.owner(p).filter(|o| alive(*o)).or_else(|| t.holders(part).into_iter().find(|w| alive(*w)))
            else {
                continue;
            };
            if taken == room || !alive(to) || self.resting((from, to), now) {
                continue;
            }
            pairs.entry((from, to)).or_default().push(p);
            taken += 1;
        }
        (pairs.into_iter())
            .flat_map(|((from, to), partitions)| {
                let groups: Vec<Vec<u32>> = partitions.chunks(MOVE_GROUP).map(<[u32]>::to_vec).collect();
                groups.into_iter().map(move |partitions| Move { from, to, partitions })
            })
            .collect()
    }

    /// Moves of these partitions were logged as begun.
    pub fn started(&mut self, partitions: &[u32], now: Duration) {
        if self.run.as_ref().is_none_or(|r| r.ended.is_some()) {
            self.run = Some(Run { started: now, ended: None, partitions_done: 0, bytes_moved: 0 });
        }
        self.running.extend(partitions);
    }

    /// The copy of `m` is complete (`bytes` copied): log `FinishMoves`.
    pub fn copied(&mut self, m: &Move, bytes: u64) {
        self.end(&m.partitions);
        self.backoff.remove(&(m.from, m.to));
        if let Some(r) = &mut self.run {
            r.partitions_done += m.partitions.len() as u32;
            r.bytes_moved += bytes;
        }
    }

    /// The copy of `m` failed: log `AbortMoves`; the pair rests a while.
    pub fn failed(&mut self, m: &Move, now: Duration) {
        self.end(&m.partitions);
        self.failed += 1;
        if self.resting((m.from, m.to), now) {
            return;
        }
        let failures = self.backoff.get(&(m.from, m.to)).map_or(0, |(_, n)| *n) + 1;
        let wait = FIRST_BACKOFF.saturating_mul(1 << (failures - 1).min(6)).min(MAX_BACKOFF);
        self.backoff.insert((m.from, m.to), (now + wait, failures));
    }

    fn resting(&self, pair: (WorkerId, WorkerId), now: Duration) -> bool {
        self.backoff.get(&pair).is_some_and(|(until, _)| *until > now)
    }

    fn end(&mut self, partitions: &[u32]) {
        for p in partitions {
            self.running.remove(p);
        }
    }

    /// How far along the migration is; a reached goal ends it. `bytes` is
    /// the state's bytes per partition (`MetaState::partition_bytes`),
    /// asked for only while a migration is active.
    pub fn progress(&mut self, state: &MetaState, bytes: impl FnOnce() -> Vec<u64>, now: Duration) -> Progress {
        let t = state.table();
        let left = plan::remaining(t, state.goal()) as u32;
        if left == 0 && t.moving().is_empty() {
            if let Some(r) = self.run.as_mut().filter(|r| r.ended.is_none()) {
                r.ended = Some(now);
            }
        }
        let mut p = Progress {
            active: left > 0,
            partitions_moving: t.moving().len() as u32,
            partitions_left: left,
            moves_failed: self.failed,
            ..Progress::default()
        };
        if let Some(r) = &self.run {
            p.partitions_done = r.partitions_done;
            p.bytes_moved = r.bytes_moved;
            p.elapsed = r.ended.unwrap_or(now).saturating_sub(r.started);
            p.bytes_total = r.bytes_moved;
        }
        if p.active {
            let per = bytes();
            let goal = state.goal();
            let rest: u64 = (0..t.slots())
                .filter(|q| goal.get(*q as usize).copied().flatten().is_some_and(|g| t.owner(*q) != Some(g)))
                .map(|q| per[t.partition_of_slot(q) as usize])
                .sum();
            p.bytes_total = p.bytes_moved + rest;
        }
        p
    }
}
