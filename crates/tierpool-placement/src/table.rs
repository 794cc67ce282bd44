//! The partition table: partition -> owning worker, with shares proportional
//! to worker weights and minimal movement when the set of workers changes.
//!
//! Invariants (checked by property tests):
//! - with at least one worker, every partition has an owner that is in the table's worker set;
//! - after `rebalanced`, each worker owns `target_counts(weights)[w]`
//!   partitions exactly;
//! - after `joined`, no worker but the newcomer gains any, and it gets its
//!   rounded share; largest-remainder rounding can hand an old worker one
//!   more partition as the total weight grows (the "new states paradox"),
//!   which it does not get (it would come from another old worker): the
//!   newcomer takes from whoever is furthest above its exact share, so
//!   after any sequence of joins every worker is within two partitions of
//!   its exact share (one from rounding, one that no one but the newcomer
//!   may gain to even out);
//! - a rebalance moves a partition only away from a worker above its target.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_types::{ChunkKey, WorkerId};

/// Partition -> owner, and the partitions on their way to another worker.
/// `epoch` grows by one at every change of an owner (what routing sees); a
/// move that begins or is given up does not change it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTable {
    epoch: u64,
    owners: Vec<Option<WorkerId>>,
    /// Partition -> the worker it is being copied to (its owner stays the
    /// owner until the move finishes).
    moving: BTreeMap<u32, WorkerId>,
}

/// How many partitions each worker should own: proportional to its weight,
/// by largest remainder, ties to the lower worker id. A zero total weight
/// counts every worker as weight 1.
pub fn target_counts(weights: &[(WorkerId, u64)], partitions: u32) -> BTreeMap<WorkerId, u32> {
    let mut out = BTreeMap::new();
    if weights.is_empty() {
        return out;
    }
    let mut ws: Vec<(WorkerId, u128)> = weights.iter().map(|&(w, x)| (w, u128::from(x))).collect();
    ws.sort();
    ws.dedup_by_key(|(w, _)| *w);
    if ws.iter().all(|(_, x)| *x == 0) {
        ws.iter_mut().for_each(|(_, x)| *x = 1);
    }
    let total: u128 = ws.iter().map(|(_, x)| x).sum();
    let p = u128::from(partitions);
    let mut rems = Vec::with_capacity(ws.len());
    let mut given: u128 = 0;
    for &(w, x) in &ws {
        let q = x * p / total;
        given += q;
        out.insert(w, q as u32);
        rems.push((x * p % total, w));
    }
    // Largest remainder first; ties to the lower id.
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, w) in rems.into_iter().take((p - given) as usize) {
        *out.get_mut(&w).expect("inserted above") += 1;
    }
    out
}

/// A worker's weight: its capacity (MEM + DISK) times the percent of a
/// healthy worker's bandwidth it delivers. Only ratios matter.
pub fn weight(mem_capacity: u64, disk_capacity: u64, speed_percent: u8) -> u64 {
    mem_capacity.saturating_add(disk_capacity).saturating_mul(u64::from(speed_percent))
}

/// Each worker's exact (unrounded) share of `partitions`.
fn exact_shares(weights: &[(WorkerId, u64)], partitions: u32) -> BTreeMap<WorkerId, f64> {
    let mut ws: BTreeMap<WorkerId, f64> = weights.iter().map(|&(w, x)| (w, x as f64)).collect();
    let total: f64 = ws.values().sum();
    let k = ws.len() as f64;
    for x in ws.values_mut() {
        *x = if total == 0.0 { f64::from(partitions) / k } else { *x / total * f64::from(partitions) };
    }
    ws
}

impl PartitionTable {
    /// A table of `partitions` partitions, none owned yet.
    pub fn new(partitions: u32) -> Self {
        assert!(partitions > 0, "a pool has at least one partition");
        PartitionTable { epoch: 0, owners: vec![None; partitions as usize], moving: BTreeMap::new() }
    }

    /// A table as stored: its epoch and the owner of each partition.
    /// `owners` must not be empty.
    pub fn from_parts(epoch: u64, owners: Vec<Option<WorkerId>>) -> Option<Self> {
        (!owners.is_empty()).then_some(PartitionTable { epoch, owners, moving: BTreeMap::new() })
    }

    /// A table as stored with its moves in progress; `None` if a move is
    /// of a partition that does not exist or is unowned, or goes to its owner.
    pub fn with_moves(mut self, moving: BTreeMap<u32, WorkerId>) -> Option<Self> {
        for (p, to) in &moving {
            if self.owner(*p).is_none_or(|o| o == *to) {
                return None;
            }
        }
        self.moving = moving;
        Some(self)
    }

    /// Partitions being copied to another worker, with that worker.
    pub fn moving(&self) -> &BTreeMap<u32, WorkerId> {
        &self.moving
    }

    /// The owner of every partition, in partition order.
    pub fn owners(&self) -> &[Option<WorkerId>] {
        &self.owners
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn partitions(&self) -> u32 {
        self.owners.len() as u32
    }

    /// Owner of partition `p`, if any worker has joined.
    pub fn owner(&self, p: u32) -> Option<WorkerId> {
        self.owners.get(p as usize).copied().flatten()
    }

    /// The worker that holds `key`.
    pub fn locate(&self, key: ChunkKey) -> Option<WorkerId> {
        self.owner(crate::partition_of(key.inode, key.index, self.partitions()))
    }

    /// Partitions owned per worker.
    pub fn shares(&self) -> BTreeMap<WorkerId, u32> {
        let mut m = BTreeMap::new();
        for w in self.owners.iter().flatten() {
            *m.entry(*w).or_insert(0) += 1;
        }
        m
    }

    /// A new table for `weights` that keeps every partition whose owner is
    /// still within its target and hands the others to workers below theirs.
    pub fn rebalanced(&self, weights: &[(WorkerId, u64)]) -> PartitionTable {
        self.dealt(target_counts(weights, self.partitions()))
    }

    /// `rebalanced` for worker `newcomer` joining: only it gains partitions
    /// (so only partitions that move to it move at all), its rounded share,
    /// each taken from the worker then furthest above its exact share.
    pub fn joined(&self, weights: &[(WorkerId, u64)], newcomer: WorkerId) -> PartitionTable {
        let n = self.partitions();
        let targets = target_counts(weights, n);
        let Some(&want) = targets.get(&newcomer) else { return self.rebalanced(weights) };
        let shares = self.shares();
        let mut left: BTreeMap<WorkerId, u32> =
            targets.keys().map(|w| (*w, shares.get(w).copied().unwrap_or(0))).collect();
        let kept: u32 = left.values().sum();
        // Partitions of no worker in `weights` go to the newcomer first.
        let Some(take) = want.saturating_sub(left[&newcomer]).checked_sub(n - kept) else {
            return self.rebalanced(weights);
        };
        let exact = exact_shares(weights, n);
        for _ in 0..take {
            let (&w, _) = (left.iter())
                .filter(|(w, c)| **w != newcomer && **c > 0)
                .max_by(|(a, ca), (b, cb)| {
                    let over = |w: &WorkerId, c: u32| f64::from(c) - exact.get(w).copied().unwrap_or(0.0);
                    over(a, **ca).total_cmp(&over(b, **cb)).then(b.cmp(a))
                })
                .expect("the others own what the newcomer takes");
            *left.get_mut(&w).expect("a key") -= 1;
        }
        *left.get_mut(&newcomer).expect("a key") =
            n - left.iter().filter(|(w, _)| **w != newcomer).map(|(_, c)| c).sum::<u32>();
        self.dealt(left)
    }

    /// A new table meeting `targets`: keeps every partition whose owner is
    /// still within its target and deals the others to workers below theirs.
    fn dealt(&self, targets: BTreeMap<WorkerId, u32>) -> PartitionTable {
        self.dealt_near(targets, None)
    }

    /// [`dealt`](Self::dealt), a freed partition going first to the worker
    /// `hint` names for it if that one is below its target.
    fn dealt_near(&self, targets: BTreeMap<WorkerId, u32>, hint: Option<&[Option<WorkerId>]>) -> PartitionTable {
        if targets.is_empty() {
            return PartitionTable {
                epoch: self.epoch + 1,
                owners: vec![None; self.owners.len()],
                moving: BTreeMap::new(),
            };
        }
        let mut count: BTreeMap<WorkerId, u32> = targets.keys().map(|w| (*w, 0)).collect();
        let mut owners = self.owners.clone();
        let mut free = Vec::new();
        for (p, o) in owners.iter_mut().enumerate() {
            match o.and_then(|w| count.get_mut(&w).map(|c| (w, c))) {
                Some((w, c)) if *c < targets[&w] => *c += 1,
                _ => {
                    *o = None;
                    free.push(p);
                }
            }
        }
        // A free partition whose hinted worker is short of its target goes
        // to it (where it is, or is on its way to, in the table the goal
        // is for: no copy, or no copy wasted).
        if let Some(hint) = hint {
            free.retain(|p| match hint.get(*p).copied().flatten() {
                Some(w) if count.get(&w).is_some_and(|c| *c < targets[&w]) => {
                    owners[*p] = Some(w);
                    *count.get_mut(&w).expect("a key") += 1;
                    false
                }
                _ => true,
            });
        }
        // Deal free partitions round-robin over workers with a deficit, so a
        // newcomer's partitions interleave with everyone else's.
        let mut free = free.into_iter();
        'deal: loop {
            let mut dealt = false;
            for (w, t) in &targets {
                let c = count.get_mut(w).expect("same keys");
                if *c < *t {
                    match free.next() {
                        Some(p) => {
                            owners[p] = Some(*w);
                            *c += 1;
                            dealt = true;
                        }
                        None => break 'deal,
                    }
                }
            }
            if !dealt {
                break;
            }
        }
        PartitionTable { epoch: self.epoch + 1, owners, moving: BTreeMap::new() }
    }

    /// Starts moving partitions `(p, to)`: each must be owned by another
    /// worker and not moving already (else nothing changes).
    pub fn begin_moves(&mut self, moves: &[(u32, WorkerId)]) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (p, to) in moves {
            match self.owner(*p) {
                None => return Err(format!("partition {p} has no owner to move it from")),
                Some(o) if o == *to => return Err(format!("partition {p} is already on worker {to}")),
                Some(_) if self.moving.contains_key(p) || !seen.insert(*p) => {
                    return Err(format!("partition {p} is moving already"))
                }
                Some(_) => {}
            }
        }
        self.moving.extend(moves.iter().copied());
        Ok(())
    }

    /// The moves of partitions `ps` are done: their new workers own them.
    /// Partitions not moving are left alone. The epoch grows if any owner changed.
    pub fn finish_moves(&mut self, ps: &[u32]) {
        let mut changed = false;
        for p in ps {
            if let Some(to) = self.moving.remove(p) {
                self.owners[*p as usize] = Some(to);
                changed = true;
            }
        }
        if changed {
            self.epoch += 1;
        }
    }

    /// The moves of partitions `ps` are given up: their owners stay.
    pub fn abort_moves(&mut self, ps: &[u32]) {
        for p in ps {
            self.moving.remove(p);
        }
    }

    /// Gives every partition owned by `gone` to the workers of `weights`
    /// (which must not include it) at once, without copying: what `gone`
    /// held is lost. No other partition changes owner (the others' chunks
    /// stay where they are, owners missing from `weights` included); the
    /// freed ones go to the workers of `weights` below their share. Moves from or to `gone` are given up;
    /// the others go on.
    pub fn without(&self, gone: WorkerId, weights: &[(WorkerId, u64)]) -> PartitionTable {
        let mut moving = self.moving.clone();
        moving.retain(|p, to| *to != gone && self.owners[*p as usize] != Some(gone));
        let mut next = self.handed_out(gone, weights, None);
        next.moving = moving;
        next
    }

    /// The partitions of `gone` dealt to the workers of `weights`, each to
    /// the one then furthest below its exact share (so shares stay close
    /// to the weights); no other partition changes owner.
    /// `near`, if given, is the table this one is a goal for: a partition
    /// of `gone` stays with, or goes on to, the worker it is with or
    /// moving to there when that one takes any.
    pub fn handed_out(
        &self,
        gone: WorkerId,
        weights: &[(WorkerId, u64)],
        near: Option<&PartitionTable>,
    ) -> PartitionTable {
        let n = self.partitions();
        let exact = exact_shares(weights, n);
        let mut targets = self.shares();
        let freed = targets.remove(&gone).unwrap_or(0);
        for w in exact.keys().filter(|w| **w != gone) {
            targets.entry(*w).or_insert(0);
        }
        for _ in 0..freed {
            let below = |w: &WorkerId, c: u32| exact[w] - f64::from(c);
            let Some((&w, _)) = (targets.iter())
                .filter(|(w, _)| exact.contains_key(w) && **w != gone)
                .max_by(|(a, ca), (b, cb)| below(a, **ca).total_cmp(&below(b, **cb)).then(b.cmp(a)))
            else {
                break;
            };
            *targets.get_mut(&w).expect("a key") += 1;
        }
        let hint: Option<Vec<Option<WorkerId>>> =
            near.map(|t| (0..t.partitions()).map(|p| t.moving.get(&p).copied().or(t.owner(p))).collect());
        self.dealt_near(targets, hint.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let after = before.joined(&ws2, WorkerId(100));
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
                t = t.joined(&ws, WorkerId(i as u32));
                let exact = exact_shares(&ws, p);
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
            let after = before.joined(&ws2, WorkerId(extra));
            prop_assert_eq!(after.epoch(), before.epoch() + 1);
            for q in 0..4096 {
                let (a, b) = (before.owner(q).unwrap(), after.owner(q).unwrap());
                prop_assert!(a == b || b == WorkerId(extra), "partition {} moved {} -> {}", q, a, b);
            }
        }
    }
}
