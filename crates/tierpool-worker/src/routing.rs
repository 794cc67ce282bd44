//! What a worker serves, by partition: its view of the partition table and
//! of the moves its partitions are part of. Pure: the service asks it about
//! each request and tells it what happened; no I/O.
//!
//! - A chunk request is served only for a partition this worker owns a
//!   replica of (a slot) in the newest table it knows; any other is answered `Moved` with that
//!   table's epoch (a client whose table is newer waits for this worker to
//!   catch up; one whose table is older reads the table again).
//! - An owned partition with a replica moving (away from this worker, or
//!   from another worker or none to a third: this worker may be the one
//!   the copy comes from) is *tracked*: every key written or
//!   deleted in it from the moment the table saying so was applied is
//!   noted, so that the copy its new owner takes can be brought up to date.
//!   Each tracking has an id of its own: a copier names it, and a tracking
//!   started again (after an abort, or by a restarted process) is never
//!   taken for the one it knew.
//! - A *frozen* partition (just before its new owner takes it) answers
//!   every chunk request `Busy`. Writes admitted before the freeze are
//!   counted until they finish, so the freeze can wait for them: after it,
//!   nothing in the partition changes here. A freeze ends only with a table
//!   that says how the move ended: gone to its new owner (this worker then
//!   answers `Moved`), or given up (served again). No time limit: if the
//!   coordinator died mid-move its next table ends the freeze, and until
//!   then no write can be acknowledged by a worker that may be about to
//!   lose the partition.
//!
//! Invariants: tracking exists exactly for partitions this worker owns a
//! replica of while a replica of them moves (as of the last table applied); frozen partitions are tracked; tables are
//! applied in order of their version, an older one is ignored.

use std::collections::{BTreeMap, BTreeSet};
use tierpool_placement::{partition_of_key, PartitionTable};
use tierpool_types::{ChunkKey, Error, ErrorKind, Result, WorkerId};

/// How a chunk request is to be answered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serve it; a write must be reported with [`Routing::done`].
    Serve,
    /// Not this worker's chunk in the table of this epoch.
    Moved(u64),
    /// Retry shortly: no table yet, or the partition is frozen.
    Busy,
}

#[derive(Debug, Default)]
struct Tracked {
    id: u64,
    keys: BTreeSet<ChunkKey>,
    frozen: bool,
}

#[derive(Debug)]
pub struct Routing {
    me: Option<WorkerId>,
    /// The coordinator's version of the table applied (orders pushes).
    version: u64,
    table: Option<PartitionTable>,
    /// Owned partitions moving away.
    tracking: BTreeMap<u32, Tracked>,
    /// Writes admitted and not yet done, per partition.
    writing: BTreeMap<u32, u32>,
    /// Per partition, the table version at which its replicas (the owner
    /// of each slot) last changed as this worker saw them: a write chosen
    /// by an older table may have missed a replica (see [`Routing::stale`]).
    changed: Vec<u64>,
    /// The next tracking id.
    next_id: u64,
}

/// What applying a table changed for this worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Partitions this worker had or was receiving and now neither owns nor
    /// receives: their chunks here are no one's (the first table applied
    /// lists every partition neither owned nor received).
    pub dropped: Vec<u32>,
}

impl Routing {
    /// `nonce` starts the tracking ids (a random number, so that ids of a
    /// restarted process differ from those of the one before).
    pub fn new(nonce: u64) -> Routing {
        Routing {
            me: None,
            version: 0,
            table: None,
            tracking: BTreeMap::new(),
            writing: BTreeMap::new(),
            changed: Vec::new(),
            next_id: nonce,
        }
    }

    pub fn me(&self) -> Option<WorkerId> {
        self.me
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn table(&self) -> Option<&PartitionTable> {
        self.table.as_ref()
    }

    /// Whether this worker owns or is receiving a replica of partition `p`.
    fn holds(table: &PartitionTable, me: WorkerId, p: u32) -> bool {
        table.holds(p, me)
    }

    /// Applies the table of `version` as seen by worker `me`; an older
    /// version (or the same again) changes nothing.
    pub fn apply(&mut self, me: WorkerId, version: u64, table: PartitionTable) -> Applied {
        if self.table.is_some() && Some(me) == self.me && version <= self.version {
            return Applied::default();
        }
        let dropped: Vec<u32> = match (&self.table, self.me) {
            (Some(old), Some(was)) if was == me => {
                (0..table.partitions()).filter(|p| Self::holds(old, me, *p) && !Self::holds(&table, me, *p)).collect()
            }
            _ => (0..table.partitions()).filter(|p| !Self::holds(&table, me, *p)).collect(),
        };
        // Every holder of a replica tracks a partition while any replica of
        // it moves: the copy comes from the slot's owner or, for a repair,
        // from another replica's.
        let outgoing: BTreeSet<u32> = (table.moving().keys())
            .map(|s| table.partition_of_slot(*s))
            .filter(|p| table.slot_held(*p, me).is_some())
            .collect();
        self.tracking.retain(|p, _| outgoing.contains(p));
        for p in &outgoing {
            if !self.tracking.contains_key(p) {
                self.next_id = self.next_id.wrapping_add(1);
                self.tracking.insert(*p, Tracked { id: self.next_id, ..Tracked::default() });
            }
        }
        let n = table.partitions();
        self.changed = match &self.table {
            Some(old)
                if old.partitions() == n && old.replicas() == table.replicas() && self.changed.len() == n as usize =>
            {
                let owners = |t: &PartitionTable, p: u32| t.slots_of(p).map(|s| t.owner(s)).collect::<Vec<_>>();
                (0..n)
                    .map(|p| if owners(old, p) == owners(&table, p) { self.changed[p as usize] } else { version })
                    .collect()
            }
            // The first table this process applies: every writer must have chosen by it or a newer one.
            _ => vec![version; n as usize],
        };
        (self.me, self.version, self.table) = (Some(me), version, Some(table));
        Applied { dropped }
    }

    /// The partition of `key` in the current table.
    pub fn partition(&self, key: ChunkKey) -> Option<u32> {
        self.table.as_ref().map(|t| partition_of_key(key, t.partitions()))
    }

    /// Whether a chunk request for `key` is served now. A served write
    /// counts as in progress until [`done`](Self::done).
    pub fn admit(&mut self, key: ChunkKey, write: bool) -> Admit {
        let (Some(t), Some(me)) = (&self.table, self.me) else { return Admit::Busy };
        let p = partition_of_key(key, t.partitions());
        if t.slot_held(p, me).is_none() {
            return Admit::Moved(t.epoch());
        }
        if self.tracking.get(&p).is_some_and(|t| t.frozen) {
            return Admit::Busy;
        }
        if write {
            *self.writing.entry(p).or_insert(0) += 1;
        }
        Admit::Serve
    }

    /// `Moved` for a write of `key` whose writer chose its workers by the
    /// table of version `table`, older than the last change of the
    /// partition's replicas: it may have missed a replica (one that joined
    /// since, or whose copy has just ended), so it must read the table
    /// again and write to every replica. `table` 0 is not checked.
    pub fn stale(&self, key: ChunkKey, table: u64) -> Option<Admit> {
        let t = self.table.as_ref()?;
        let p = partition_of_key(key, t.partitions());
        let changed = self.changed.get(p as usize).copied().unwrap_or(0);
        (table != 0 && table < changed).then(|| Admit::Moved(t.epoch()))
    }

    /// A write admitted for `key` finished (stored or not).
    pub fn done(&mut self, key: ChunkKey) {
        let Some(p) = self.partition(key) else { return };
        if let Some(n) = self.writing.get_mut(&p) {
            *n -= 1;
            if *n == 0 {
                self.writing.remove(&p);
            }
        }
        self.changed(key);
    }

    /// `key` was written or deleted: noted if its partition is moving away.
    pub fn changed(&mut self, key: ChunkKey) {
        if let Some(p) = self.partition(key) {
            if let Some(t) = self.tracking.get_mut(&p) {
                t.keys.insert(key);
            }
        }
    }

    /// The tracking ids of these partitions (to name them in later calls);
    /// `InvalidArgument` if one is not moving away from this worker.
    pub fn track(&self, partitions: &[u32]) -> Result<Vec<u64>> {
        (partitions.iter())
            .map(|p| match self.tracking.get(p) {
                Some(t) => Ok(t.id),
                None => Err(Error::invalid(format!(
                    "partition {p} is not moving away from this worker (table version {})",
                    self.version
                ))),
            })
            .collect()
    }

    fn tracked(&mut self, moves: &[(u32, u64)]) -> Result<Vec<&mut Tracked>> {
        for (p, id) in moves {
            if self.tracking.get(p).map(|t| t.id) != Some(*id) {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("the move of partition {p} is no longer the one being copied: copy it again"),
                ));
            }
        }
        let wanted: BTreeSet<u32> = moves.iter().map(|(p, _)| *p).collect();
        Ok(self.tracking.iter_mut().filter(|(p, _)| wanted.contains(p)).map(|(_, t)| t).collect())
    }

    /// The keys changed in these tracked partitions since the last call.
    pub fn take_changes(&mut self, moves: &[(u32, u64)]) -> Result<Vec<ChunkKey>> {
        Ok(self.tracked(moves)?.into_iter().flat_map(|t| std::mem::take(&mut t.keys)).collect())
    }

    /// Freezes these tracked partitions: every chunk request for them is
    /// `Busy` until a table ends their moves.
    pub fn freeze(&mut self, moves: &[(u32, u64)]) -> Result<()> {
        for t in self.tracked(moves)? {
            t.frozen = true;
        }
        Ok(())
    }

    /// Whether no write admitted in these partitions is still in progress.
    pub fn quiet(&self, partitions: &[u32]) -> bool {
        partitions.iter().all(|p| !self.writing.contains_key(p))
    }

    /// Checks that `moves` name the current trackings (for reads by a copier).
    pub fn check(&mut self, moves: &[(u32, u64)]) -> Result<()> {
        self.tracked(moves).map(|_| ())
    }

    /// Whether `key` belongs to one of `partitions`.
    pub fn in_partitions(&self, key: ChunkKey, partitions: &BTreeSet<u32>) -> bool {
        self.partition(key).is_some_and(|p| partitions.contains(&p))
    }

    /// Whether this worker neither owns nor receives `key`'s partition.
    pub fn is_stray(&self, key: ChunkKey) -> bool {
        match (&self.table, self.me) {
            (Some(t), Some(me)) => !Self::holds(t, me, partition_of_key(key, t.partitions())),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(i: u32) -> WorkerId {
        WorkerId(i)
    }

    fn key(inode: u64, index: u64) -> ChunkKey {
        ChunkKey::hashed(tierpool_types::InodeId(inode), index, 1)
    }

    /// Four partitions over workers 1 and 2; `p`, one of worker 1's, moving
    /// to worker 2 if `moving`.
    fn two(moving: bool) -> (PartitionTable, u32) {
        let mut t = PartitionTable::new(4).rebalanced(&[(w(1), 1), (w(2), 1)]);
        let p = (0..4).find(|p| t.owner(*p) == Some(w(1))).unwrap();
        if moving {
            t.begin_moves(&[(p, w(2))]).unwrap();
        }
        (t, p)
    }

    fn key_in(t: &PartitionTable, p: u32) -> ChunkKey {
        (0..1000).map(|i| key(i, 0)).find(|k| partition_of_key(*k, t.partitions()) == p).unwrap()
    }

    #[test]
    fn only_owned_partitions_are_served() {
        let (t, p) = two(false);
        let k = key_in(&t, p);
        let mut r = Routing::new(0);
        assert_eq!(r.admit(k, false), Admit::Busy, "no table yet");
        let first = r.apply(w(1), 5, t.clone());
        let theirs: Vec<u32> = (0..4).filter(|p| t.owner(*p) == Some(w(2))).collect();
        assert_eq!(first.dropped, theirs, "the first table drops what is not ours");
        assert_eq!(r.admit(k, true), Admit::Serve);
        r.done(k);
        let mut other = Routing::new(0);
        other.apply(w(2), 5, t.clone());
        assert_eq!(other.admit(k, false), Admit::Moved(t.epoch()));
    }

    #[test]
    fn a_partition_moving_away_is_tracked_frozen_and_handed_over() {
        let (t, p) = two(true);
        let k = key_in(&t, p);
        let mut r = Routing::new(100);
        r.apply(w(1), 1, t.clone());
        let ids = r.track(&[p]).unwrap();
        let moves = [(p, ids[0])];
        assert_eq!(r.admit(k, true), Admit::Serve);
        assert!(!r.quiet(&[p]), "a write in progress");
        r.freeze(&moves).unwrap();
        assert_eq!(r.admit(k, false), Admit::Busy, "frozen: reads wait too");
        r.done(k);
        assert!(r.quiet(&[p]));
        assert_eq!(r.take_changes(&moves).unwrap(), vec![k]);
        assert_eq!(r.take_changes(&moves).unwrap(), vec![], "taken once");
        let mut done = t.clone();
        done.finish_moves(&[p]);
        assert_eq!(r.apply(w(1), 1, done.clone()), Applied::default(), "the same version again is ignored");
        assert_eq!(r.apply(w(1), 2, done.clone()).dropped, vec![p]);
        assert_eq!(r.take_changes(&moves).unwrap_err().kind, ErrorKind::Stale, "no longer tracked");
        assert_eq!(r.admit(k, false), Admit::Moved(done.epoch()));
    }

    #[test]
    fn an_aborted_move_thaws_and_a_new_one_has_a_new_id() {
        let (t, p) = two(true);
        let k = key_in(&t, p);
        let mut r = Routing::new(7);
        r.apply(w(1), 1, t.clone());
        let first = r.track(&[p]).unwrap()[0];
        r.freeze(&[(p, first)]).unwrap();
        let mut aborted = t.clone();
        aborted.abort_moves(&[p]);
        assert_eq!(r.apply(w(1), 2, aborted).dropped, Vec::<u32>::new());
        assert_eq!(r.admit(k, true), Admit::Serve, "thawed");
        r.done(k);
        r.apply(w(1), 3, t.clone());
        let second = r.track(&[p]).unwrap()[0];
        assert_ne!(first, second);
        assert_eq!(r.freeze(&[(p, first)]).unwrap_err().kind, ErrorKind::Stale);
        assert_eq!(r.take_changes(&[(p, second)]).unwrap(), vec![], "a new tracking starts empty");
    }

    #[test]
    fn the_receiver_keeps_what_it_receives_and_drops_it_when_the_move_is_given_up() {
        let (t, p) = two(true);
        let mut r = Routing::new(0);
        let first = r.apply(w(2), 1, t.clone());
        assert!(!first.dropped.contains(&p), "an incoming partition is kept");
        assert!(!r.is_stray(key_in(&t, p)));
        assert_eq!(r.track(&[p]).unwrap_err().kind, ErrorKind::InvalidArgument, "not moving away from it");
        let mut aborted = t.clone();
        aborted.abort_moves(&[p]);
        assert_eq!(r.apply(w(2), 2, aborted).dropped, vec![p]);
        assert!(r.is_stray(key_in(&t, p)));
    }

    /// A worker holding one replica of a partition whose other replica is
    /// being filled again (a repair) tracks the partition, and once the new
    /// replica is in place refuses writes chosen by a table from before it.
    #[test]
    fn a_repair_is_tracked_by_the_surviving_replica_and_fences_stale_writers() {
        let mut t = PartitionTable::replicated(4, 2).rebalanced(&[(w(1), 1), (w(2), 1)]);
        let p = 0;
        let mine = t.slot_held(p, w(1)).unwrap();
        let (released, freed) = t.released(w(2), &BTreeSet::new());
        assert!(!freed.is_empty());
        t = released;
        let lost = t.slots_of(p).find(|s| *s != mine).unwrap();
        t.begin_moves(&[(lost, w(3))]).unwrap();
        let mut r = Routing::new(1);
        r.apply(w(1), 5, t.clone());
        let k = key_in(&t, p);
        assert_eq!(r.track(&[p]).map(|ids| ids.len()), Ok(1), "the surviving replica tracks the partition");
        assert_eq!(r.admit(k, true), Admit::Serve);
        r.done(k);
        t.finish_moves(&[lost]);
        r.apply(w(1), 6, t.clone());
        assert_eq!(r.stale(k, 5), Some(Admit::Moved(t.epoch())), "a writer that does not know the new replica");
        assert_eq!(r.stale(k, 6), None);
        assert_eq!(r.stale(k, 0), None, "unfenced");
        assert!(r.track(&[p]).is_err(), "nothing moves any more");
    }
}
