//! The partition table: for each partition, the workers holding its
//! replicas, and the replicas on their way to another worker.
//!
//! A pool keeps `replicas` (R) copies of a chunk at most: every partition
//! has R *slots*, slot `k` of partition `p` numbered `k * P + p`. Slot 0 is
//! the partition's first replica; a chunk of a file keeping `f` copies is
//! written to slots `0..f` (see [`PartitionTable::write_targets`]). With
//! R = 1 the table is the plain partition -> owner map.
//!
//! Invariants (checked by property tests):
//! - no worker holds two slots of one partition, counting the slots it is
//!   receiving (replicas of a chunk sit on distinct workers);
//! - a slot is unowned only when it could not be placed (fewer workers than
//!   R) or while its worker is down: then its replicas are copied to a new
//!   owner from a sibling slot's (a move from no owner);
//! - a move goes to a worker other than the slot's owner, holding no other
//!   slot of the partition; a move from no owner has an owned sibling to
//!   copy from;
//! - `epoch` grows at every change of an owner.
//!
//! How shares follow weights is in `deal.rs`; where replicas sit within
//! them (distinct hosts, first replicas spread) in `apart.rs`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_types::{ChunkKey, WorkerId};

/// Slot -> owner, and the slots on their way to another worker.
/// `epoch` grows by one at every change of an owner (what routing sees); a
/// move that begins or is given up does not change it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTable {
    pub(crate) epoch: u64,
    /// Slots per partition (R >= 1).
    pub(crate) replicas: u8,
    /// R * P entries: slot `k * P + p` is replica `k` of partition `p`.
    pub(crate) owners: Vec<Option<WorkerId>>,
    /// Slot -> the worker it is being copied to (its owner, if any, stays
    /// the owner until the move finishes).
    pub(crate) moving: BTreeMap<u32, WorkerId>,
}

impl PartitionTable {
    /// A table of `partitions` partitions of one replica each, none owned yet.
    pub fn new(partitions: u32) -> Self {
        Self::replicated(partitions, 1)
    }

    /// A table of `partitions` partitions of `replicas` slots each, none owned yet.
    pub fn replicated(partitions: u32, replicas: u8) -> Self {
        assert!(partitions > 0, "a pool has at least one partition");
        assert!(replicas > 0, "a pool keeps at least one replica");
        let slots = partitions as usize * usize::from(replicas);
        PartitionTable { epoch: 0, replicas, owners: vec![None; slots], moving: BTreeMap::new() }
    }

    /// A table as stored: its epoch and the owner of each partition (one replica).
    /// `owners` must not be empty.
    pub fn from_parts(epoch: u64, owners: Vec<Option<WorkerId>>) -> Option<Self> {
        Self::from_slots(epoch, 1, owners)
    }

    /// A table as stored: its epoch, replicas per partition and the owner
    /// of each slot; `None` if the slots are not `replicas` per partition,
    /// or a worker holds two slots of one partition.
    pub fn from_slots(epoch: u64, replicas: u8, owners: Vec<Option<WorkerId>>) -> Option<Self> {
        let r = usize::from(replicas);
        if owners.is_empty() || r == 0 || !owners.len().is_multiple_of(r) || owners.len() / r > u32::MAX as usize {
            return None;
        }
        let t = PartitionTable { epoch, replicas, owners, moving: BTreeMap::new() };
        (0..t.partitions()).all(|p| t.distinct(p)).then_some(t)
    }

    /// Whether no worker holds two slots of partition `p` (moves counted).
    fn distinct(&self, p: u32) -> bool {
        let mut seen = Vec::new();
        for s in self.slots_of(p) {
            for w in [self.owner(s), self.moving.get(&s).copied()].into_iter().flatten() {
                if seen.contains(&w) {
                    return false;
                }
                seen.push(w);
            }
        }
        true
    }

    /// A table as stored with its moves in progress; `None` if a move is
    /// of a slot that does not exist, goes to its owner, comes from no
    /// owner with no owned sibling, or would put two slots of a partition
    /// on one worker.
    pub fn with_moves(mut self, moving: BTreeMap<u32, WorkerId>) -> Option<Self> {
        for (s, to) in &moving {
            if *s >= self.slots() || self.owner(*s) == Some(*to) || self.source_needed(*s).is_none() {
                return None;
            }
        }
        self.moving = moving;
        (0..self.partitions()).all(|p| self.distinct(p)).then_some(self)
    }

    /// Slots being copied to another worker, with that worker.
    pub fn moving(&self) -> &BTreeMap<u32, WorkerId> {
        &self.moving
    }

    /// The owner of every slot, in slot order.
    pub fn owners(&self) -> &[Option<WorkerId>] {
        &self.owners
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Partitions (P).
    pub fn partitions(&self) -> u32 {
        (self.owners.len() / usize::from(self.replicas)) as u32
    }

    /// Replicas per partition (R): the most copies of a chunk the pool keeps.
    pub fn replicas(&self) -> u8 {
        self.replicas
    }

    /// Slots (R * P).
    pub fn slots(&self) -> u32 {
        self.owners.len() as u32
    }

    /// The partition of slot `s`.
    pub fn partition_of_slot(&self, s: u32) -> u32 {
        s % self.partitions()
    }

    /// The slots of partition `p`, replica 0 first.
    pub fn slots_of(&self, p: u32) -> impl Iterator<Item = u32> {
        let n = self.partitions();
        (0..u32::from(self.replicas)).map(move |k| k * n + p)
    }

    /// Owner of slot `s` (for `s < P`, the first replica of partition `s`).
    pub fn owner(&self, s: u32) -> Option<WorkerId> {
        self.owners.get(s as usize).copied().flatten()
    }

    /// The slot of partition `p` worker `w` owns, if any.
    pub fn slot_held(&self, p: u32, w: WorkerId) -> Option<u32> {
        self.slots_of(p).find(|s| self.owner(*s) == Some(w))
    }

    /// Whether `w` owns a slot of partition `p` or is receiving one.
    pub fn holds(&self, p: u32, w: WorkerId) -> bool {
        self.slots_of(p).any(|s| self.owner(s) == Some(w) || self.moving.get(&s) == Some(&w))
    }

    /// The owners of partition `p`'s slots, replica 0 first (unowned skipped).
    pub fn holders(&self, p: u32) -> Vec<WorkerId> {
        self.slots_of(p).filter_map(|s| self.owner(s)).collect()
    }

    /// The partition of `key` (its home, if placed).
    pub fn partition(&self, key: ChunkKey) -> u32 {
        crate::partition_of_key(key, self.partitions())
    }

    /// The workers a chunk keeping `copies` replicas is written to: the
    /// owners of its partition's first `copies` slots; if none of those is
    /// owned (their workers are down), the first owner of any slot, so the
    /// chunk is still written once (and copied on when the slots are filled).
    pub fn write_targets(&self, key: ChunkKey, copies: u8) -> Vec<WorkerId> {
        let p = self.partition(key);
        let first: Vec<WorkerId> =
            self.slots_of(p).take(usize::from(copies.max(1))).filter_map(|s| self.owner(s)).collect();
        if first.is_empty() {
            self.holders(p).into_iter().take(1).collect()
        } else {
            first
        }
    }

    /// The first replica's owner of `key` (the one worker when R = 1).
    pub fn locate(&self, key: ChunkKey) -> Option<WorkerId> {
        self.write_targets(key, 1).first().copied()
    }

    /// Slots owned per worker.
    pub fn shares(&self) -> BTreeMap<WorkerId, u32> {
        let mut m = BTreeMap::new();
        for w in self.owners.iter().flatten() {
            *m.entry(*w).or_insert(0) += 1;
        }
        m
    }

    /// Where the replicas of slot `s` can be copied from: its owner, or
    /// else the first owned sibling slot. `None`: nothing holds them.
    pub fn source_needed(&self, s: u32) -> Option<WorkerId> {
        self.owner(s).or_else(|| self.holders(self.partition_of_slot(s)).first().copied())
    }

    /// How messages name slot `s`: "partition P" with one replica per
    /// partition, "replica K of partition P" otherwise.
    pub fn slot_name(&self, s: u32) -> String {
        let p = self.partition_of_slot(s);
        if self.replicas == 1 {
            format!("partition {p}")
        } else {
            format!("replica {} of partition {p}", s / self.partitions())
        }
    }

    /// Starts moving slots `(s, to)`: each must exist, not be moving
    /// already, have something to copy from (its owner or a sibling's), and
    /// `to` must hold no slot of the partition (else nothing changes).
    pub fn begin_moves(&mut self, moves: &[(u32, WorkerId)]) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (s, to) in moves {
            let p = self.partition_of_slot(*s);
            if *s >= self.slots() {
                return Err(format!("slot {s} does not exist"));
            }
            let name = self.slot_name(*s);
            if self.source_needed(*s).is_none() {
                return Err(format!("{name} has no owner to move it from"));
            }
            if self.owner(*s) == Some(*to) {
                return Err(format!("{name} is already on worker {to}"));
            }
            if self.moving.contains_key(s) || !seen.insert(*s) {
                return Err(format!("{name} is moving already"));
            }
            if self.holds(p, *to) || moves.iter().any(|(o, t)| o != s && t == to && self.partition_of_slot(*o) == p) {
                return Err(format!("worker {to} holds another replica of partition {p}"));
            }
        }
        self.moving.extend(moves.iter().copied());
        Ok(())
    }

    /// The moves of slots `ss` are done: their new workers own them.
    /// Slots not moving are left alone. The epoch grows if any owner changed.
    pub fn finish_moves(&mut self, ss: &[u32]) {
        let mut changed = false;
        for s in ss {
            if let Some(to) = self.moving.remove(s) {
                self.owners[*s as usize] = Some(to);
                changed = true;
            }
        }
        if changed {
            self.epoch += 1;
        }
    }

    /// The moves of slots `ss` are given up: their owners stay.
    pub fn abort_moves(&mut self, ss: &[u32]) {
        for s in ss {
            self.moving.remove(s);
        }
    }

    /// Lets go of the slots of `gone` whose partition has another owned
    /// slot (held by a worker not in `down`): they become unowned, to be
    /// filled again from a sibling by moves. Slots with no such sibling
    /// stay with `gone` (nothing else holds their replicas). Moves to
    /// `gone` are given up. Returns the slots let go.
    pub fn released(&self, gone: WorkerId, down: &std::collections::BTreeSet<WorkerId>) -> (PartitionTable, Vec<u32>) {
        let mut next = self.clone();
        next.moving.retain(|_, to| *to != gone);
        let mut freed = Vec::new();
        for s in 0..self.slots() {
            if self.owner(s) != Some(gone) {
                continue;
            }
            let p = self.partition_of_slot(s);
            if self.holders(p).iter().any(|w| *w != gone && !down.contains(w)) {
                next.owners[s as usize] = None;
                freed.push(s);
            }
        }
        // A move of a freed slot goes on: it copies from a sibling now.
        if !freed.is_empty() {
            next.epoch += 1;
        }
        (next, freed)
    }

    /// Gives every slot owned by `gone` to the workers of `weights` (which
    /// must not include it) at once, without copying: what only `gone`
    /// held is lost. A slot whose partition has another owned slot becomes
    /// unowned instead (to be filled again from that sibling by moves). No
    /// other slot changes owner; the freed ones go to the workers of
    /// `weights` below their share. Moves from or to `gone` are given up;
    /// the others go on.
    pub fn without(&self, gone: WorkerId, weights: &[(WorkerId, u64)]) -> PartitionTable {
        let (released, _) = self.released(gone, &std::collections::BTreeSet::new());
        let mut moving = released.moving.clone();
        moving.retain(|s, to| *to != gone && released.owners[*s as usize] != Some(gone));
        let mut next = if self.replicas == 1 {
            self.handed_out(gone, weights, None)
        } else {
            released.handed_out_only(gone, weights)
        };
        next.moving = moving;
        // A move whose target now owns a sibling is given up.
        let stale: Vec<u32> = (next.moving.iter())
            .filter(|(s, to)| next.slot_held(next.partition_of_slot(**s), **to).is_some())
            .map(|(s, _)| *s)
            .collect();
        next.abort_moves(&stale);
        next.epoch = self.epoch + 1;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deal::{exact_shares, target_counts};
    use proptest::prelude::*;

    fn weights() -> impl Strategy<Value = Vec<(WorkerId, u64)>> {
        prop::collection::btree_map(0u32..20, 0u64..1 << 40, 1..8)
            .prop_map(|m| m.into_iter().map(|(w, x)| (WorkerId(w), x)).collect())
    }

    proptest! {
        /// Removing a worker changes the owner of its partitions only, and
        /// every partition keeps an owner among the survivors.
        #[test]
        fn removing_a_worker_moves_only_its_partitions(ws in weights(), gone in 0usize..8, moves in prop::collection::vec((0u32..256, 0usize..8), 0..20)) {
            let t = PartitionTable::new(256).rebalanced(&ws);
            let mut t = t.clone();
            for (p, to) in moves {
                let _ = t.begin_moves(&[(p, ws[to % ws.len()].0)]);
            }
            let gone = ws[gone % ws.len()].0;
            // one survivor is left out of the weights (as a draining worker is)
            let rest: Vec<_> = ws.iter().copied().filter(|(w, _)| *w != gone).skip(1).collect();
            prop_assume!(!rest.is_empty());
            let next = t.without(gone, &rest);
            for p in 0..256 {
                let o = next.owner(p).unwrap();
                prop_assert_ne!(o, gone);
                if t.owner(p) != Some(gone) {
                    prop_assert_eq!(Some(o), t.owner(p));
                }
            }
            for (p, to) in next.moving() {
                prop_assert_ne!(*to, gone);
                prop_assert_eq!(t.moving().get(p), Some(to));
                prop_assert_ne!(next.owner(*p), Some(*to));
            }
            prop_assert_eq!(next.epoch(), t.epoch() + 1);
        }
    }

    #[test]
    fn equal_weights_share_equally() {
        let t = PartitionTable::new(4096).rebalanced(&[(WorkerId(1), 10), (WorkerId(2), 10), (WorkerId(3), 10)]);
        let s = t.shares();
        assert_eq!(s.values().sum::<u32>(), 4096);
        assert!(s.values().all(|&c| c == 1365 || c == 1366), "{s:?}");
    }

    #[test]
    fn a_rounding_gain_of_an_old_worker_goes_to_the_newcomer() {
        // Found by `adding_a_worker_moves_partitions_only_to_it`: with plain
        // largest remainder, worker 5 gains a partition taken from worker 4.
        let ws: Vec<(WorkerId, u64)> =
            [862134439145, 617423700838, 474472591511, 1009146581230, 246873857727, 3569238260]
                .into_iter()
                .enumerate()
                .map(|(i, x)| (WorkerId(i as u32), x))
                .collect();
        let before = PartitionTable::new(4096).rebalanced(&ws);
        let mut ws2 = ws.clone();
        ws2.push((WorkerId(100), 43162994351));
        let after = before.joined(&ws2, WorkerId(100), None);
        let (b, a) = (before.shares(), after.shares());
        for w in b.keys() {
            assert!(a[w] <= b[w], "worker {w} gained: {} -> {}", b[w], a[w]);
        }
        assert_eq!(a.values().sum::<u32>(), 4096);
        let exact = 43162994351.0 / ws2.iter().map(|(_, x)| *x as f64).sum::<f64>() * 4096.0;
        assert!((f64::from(a[&WorkerId(100)]) - exact).abs() < 2.0, "the newcomer gets its share, give or take one");
    }

    #[test]
    fn shares_follow_weights() {
        let t = PartitionTable::new(4096).rebalanced(&[(WorkerId(1), 1), (WorkerId(2), 3)]);
        assert_eq!(t.shares(), BTreeMap::from([(WorkerId(1), 1024), (WorkerId(2), 3072)]));
    }

    proptest! {
        #[test]
        fn every_partition_is_owned_and_counts_hit_targets(ws in weights(), p in 1u32..5000) {
            let t = PartitionTable::new(p).rebalanced(&ws);
            let targets = target_counts(&ws, p);
            prop_assert_eq!(targets.values().sum::<u32>(), p);
            for q in 0..p {
                let o = t.owner(q).expect("owned");
                prop_assert!(targets.contains_key(&o));
            }
            let shares = t.shares();
            for (w, c) in &targets {
                prop_assert_eq!(shares.get(w).copied().unwrap_or(0), *c);
            }
        }

        #[test]
        fn targets_are_within_one_of_the_exact_share(ws in weights(), p in 1u32..5000) {
            let total: f64 = ws.iter().map(|(_, x)| *x as f64).sum();
            let targets = target_counts(&ws, p);
            for (w, x) in &ws {
                let exact = if total == 0.0 { p as f64 / ws.len() as f64 } else { *x as f64 / total * p as f64 };
                prop_assert!((targets[w] as f64 - exact).abs() < 1.0 + 1e-9);
            }
        }

        #[test]
        fn after_any_joins_every_worker_is_within_two_partitions_of_its_share(
            xs in prop::collection::vec(1u64..1 << 20, 1..24),
            p in 1u32..600,
        ) {
            let mut ws = vec![(WorkerId(0), xs[0])];
            let mut t = PartitionTable::new(p).rebalanced(&ws);
            for (i, x) in xs.iter().enumerate().skip(1) {
                ws.push((WorkerId(i as u32), *x));
                t = t.joined(&ws, WorkerId(i as u32), None);
                let exact = exact_shares(&ws, p, p);
                let shares = t.shares();
                prop_assert_eq!(shares.values().sum::<u32>(), p);
                for (w, e) in &exact {
                    let got = f64::from(shares.get(w).copied().unwrap_or(0));
                    prop_assert!((got - e).abs() < 2.0, "after {} joins, {}: {} for {}", i, w, got, e);
                }
            }
        }

        #[test]
        fn adding_a_worker_moves_partitions_only_to_it(ws in weights(), extra in 100u32..200, wx in 1u64..1 << 40) {
            let before = PartitionTable::new(4096).rebalanced(&ws);
            let mut ws2 = ws.clone();
            ws2.push((WorkerId(extra), wx));
            let after = before.joined(&ws2, WorkerId(extra), None);
            prop_assert_eq!(after.epoch(), before.epoch() + 1);
            for q in 0..4096 {
                let (a, b) = (before.owner(q).unwrap(), after.owner(q).unwrap());
                prop_assert!(a == b || b == WorkerId(extra), "partition {} moved {} -> {}", q, a, b);
            }
        }
    }
}
