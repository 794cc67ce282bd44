//! Shares: how many slots each worker should own, and tables that get
//! there moving as few slots as they can.
//!
//! Invariants (checked by property tests):
//! - with at least R workers, every slot has an owner in the table's worker set,
//!   and no worker owns two slots of a partition;
//! - a worker never gets more than P slots (one per partition): its share
//!   is capped there and the rest goes to the others by weight;
//! - after `rebalanced`, each worker owns its target exactly when nothing
//!   stands in the way (with R = 1, always);
//! - after `joined`, no worker but the newcomer gains any, and it gets its
//!   rounded share; largest-remainder rounding can hand an old worker one
//!   more as the total weight grows (the "new states paradox"), which it
//!   does not get (it would come from another old worker): the newcomer
//!   takes from whoever is furthest above its exact share, so after any
//!   sequence of joins every worker is within two slots of its exact share
//!   (one from rounding, one that no one but the newcomer may gain to even out);
//! - a rebalance moves a slot only away from a worker above its target.
//!
//! With R = 1 every table here is exactly what the pool computed before
//! replicas existed: logs replay to the tables they were written with.

use crate::PartitionTable;
use std::collections::BTreeMap;
use tierpool_types::WorkerId;

/// How many of `slots` each worker should own: proportional to its
/// weight, by largest remainder, ties to the lower worker id. A zero total
/// weight counts every worker as weight 1.
pub fn target_counts(weights: &[(WorkerId, u64)], slots: u32) -> BTreeMap<WorkerId, u32> {
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
    let p = u128::from(slots);
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

/// `target_counts` of a table's slots, none above `cap` (its partition
/// count): what a capped worker cannot take goes to the others by weight.
/// With fewer workers than replicas the targets sum to less than the slots.
pub fn slot_targets(weights: &[(WorkerId, u64)], slots: u32, cap: u32) -> BTreeMap<WorkerId, u32> {
    let mut fixed = BTreeMap::new();
    let mut rest: Vec<(WorkerId, u64)> = weights.to_vec();
    let mut total = slots;
    loop {
        let t = target_counts(&rest, total);
        let over: Vec<WorkerId> = t.iter().filter(|(_, c)| **c > cap).map(|(w, _)| *w).collect();
        if over.is_empty() {
            fixed.extend(t);
            return fixed;
        }
        for w in over {
            fixed.insert(w, cap);
            total -= cap;
            rest.retain(|(x, _)| *x != w);
        }
    }
}

/// A worker's weight: its capacity (MEM + DISK) times the percent of a
/// healthy worker's bandwidth it delivers. Only ratios matter.
pub fn weight(mem_capacity: u64, disk_capacity: u64, speed_percent: u8) -> u64 {
    mem_capacity.saturating_add(disk_capacity).saturating_mul(u64::from(speed_percent))
}

/// Each worker's exact (unrounded) share of `slots`, none above `cap`.
pub(crate) fn exact_shares(weights: &[(WorkerId, u64)], slots: u32, cap: u32) -> BTreeMap<WorkerId, f64> {
    let mut fixed = BTreeMap::new();
    let mut rest: BTreeMap<WorkerId, f64> = weights.iter().map(|&(w, x)| (w, x as f64)).collect();
    let mut left = f64::from(slots);
    loop {
        let total: f64 = rest.values().sum();
        let k = rest.len() as f64;
        let share = |x: f64| if total == 0.0 { left / k } else { x / total * left };
        let over: Vec<WorkerId> = rest.iter().filter(|(_, x)| share(**x) > f64::from(cap)).map(|(w, _)| *w).collect();
        if over.is_empty() {
            fixed.extend(rest.iter().map(|(w, x)| (*w, share(*x))));
            return fixed;
        }
        for w in over {
            rest.remove(&w);
            fixed.insert(w, f64::from(cap));
            left -= f64::from(cap);
        }
    }
}

impl PartitionTable {
    /// Targets for `weights` over this table's slots.
    fn targets(&self, weights: &[(WorkerId, u64)]) -> BTreeMap<WorkerId, u32> {
        slot_targets(weights, self.slots(), self.partitions())
    }

    fn exact(&self, weights: &[(WorkerId, u64)]) -> BTreeMap<WorkerId, f64> {
        exact_shares(weights, self.slots(), self.partitions())
    }

    /// A new table for `weights` that keeps every slot whose owner is
    /// still within its target and hands the others to workers below theirs.
    pub fn rebalanced(&self, weights: &[(WorkerId, u64)]) -> PartitionTable {
        self.dealt_near(self.targets(weights), None, None, &|_| false)
    }

    /// `rebalanced` for worker `newcomer` joining: only it gains slots
    /// (so only slots that move to it move at all), its rounded share,
    /// each taken from the worker then furthest above its exact share.
    /// `near`: the table this one is a goal for (no slot goes to a worker
    /// holding another slot of its partition there).
    pub fn joined(
        &self,
        weights: &[(WorkerId, u64)],
        newcomer: WorkerId,
        near: Option<&PartitionTable>,
    ) -> PartitionTable {
        let n = self.slots();
        let targets = self.targets(weights);
        let Some(&want) = targets.get(&newcomer) else { return self.rebalanced(weights) };
        let shares = self.shares();
        let mut left: BTreeMap<WorkerId, u32> =
            targets.keys().map(|w| (*w, shares.get(w).copied().unwrap_or(0))).collect();
        let kept: u32 = left.values().sum();
        let placeable: u32 = targets.values().sum();
        // Slots of no worker in `weights` go to the newcomer first.
        let Some(take) = want.saturating_sub(left[&newcomer]).checked_sub(placeable.min(n) - kept.min(placeable))
        else {
            return self.dealt_near(targets, None, near, &|_| false);
        };
        let exact = self.exact(weights);
        for _ in 0..take {
            let Some((&w, _)) = (left.iter()).filter(|(w, c)| **w != newcomer && **c > 0).max_by(|(a, ca), (b, cb)| {
                let over = |w: &WorkerId, c: u32| f64::from(c) - exact.get(w).copied().unwrap_or(0.0);
                over(a, **ca).total_cmp(&over(b, **cb)).then(b.cmp(a))
            }) else {
                break;
            };
            *left.get_mut(&w).expect("a key") -= 1;
        }
        if self.replicas > 1 {
            return self.given_to(newcomer, &left, near);
        }
        *left.get_mut(&newcomer).expect("a key") =
            placeable - left.iter().filter(|(w, _)| **w != newcomer).map(|(_, c)| c).sum::<u32>();
        self.dealt_near(left, None, near, &|_| false)
    }

    /// `newcomer` takes unowned slots, then slots of the workers above
    /// `left` down to it, each of a partition it holds no slot of (here
    /// or in `near`); nothing else changes.
    fn given_to(
        &self,
        newcomer: WorkerId,
        left: &BTreeMap<WorkerId, u32>,
        near: Option<&PartitionTable>,
    ) -> PartitionTable {
        let mut next = self.clone();
        next.moving.clear();
        next.epoch += 1;
        let mut give: BTreeMap<WorkerId, u32> = self.shares();
        for (w, c) in give.iter_mut() {
            *c = c.saturating_sub(left.get(w).copied().unwrap_or(0));
        }
        // Partition by partition (each replica in turn), so that what it
        // takes mixes first replicas with the others.
        let order: Vec<u32> = (0..self.partitions()).flat_map(|p| self.slots_of(p)).collect();
        for pass in 0..2 {
            for &s in &order {
                let p = self.partition_of_slot(s);
                let free = match self.owner(s) {
                    None => pass == 0,
                    Some(o) => pass == 1 && give.get(&o).is_some_and(|c| *c > 0),
                };
                if !free || next.holds(p, newcomer) || near.is_some_and(|t| t.holds(p, newcomer)) {
                    continue;
                }
                if let Some(o) = self.owner(s) {
                    *give.get_mut(&o).expect("owned") -= 1;
                }
                next.owners[s as usize] = Some(newcomer);
            }
        }
        next
    }

    /// The slots of `gone` dealt to the workers of `weights`, each to
    /// the one then furthest below its exact share (so shares stay close
    /// to the weights); no other slot changes owner.
    /// `near`, if given, is the table this one is a goal for: a slot
    /// of `gone` stays with, or goes on to, the worker it is with or
    /// moving to there when that one takes any.
    pub fn handed_out(
        &self,
        gone: WorkerId,
        weights: &[(WorkerId, u64)],
        near: Option<&PartitionTable>,
    ) -> PartitionTable {
        let exact = self.exact(weights);
        let mut targets = self.shares();
        let mut freed = targets.remove(&gone).unwrap_or(0);
        if self.replicas > 1 {
            // Unowned slots (of workers down or gone) are dealt too.
            freed += self.owners.iter().filter(|o| o.is_none()).count() as u32;
        }
        for w in exact.keys().filter(|w| **w != gone) {
            targets.entry(*w).or_insert(0);
        }
        for _ in 0..freed {
            let below = |w: &WorkerId, c: u32| exact[w] - f64::from(c);
            let Some((&w, _)) = (targets.iter())
                .filter(|(w, c)| exact.contains_key(w) && **w != gone && **c < self.partitions())
                .max_by(|(a, ca), (b, cb)| below(a, **ca).total_cmp(&below(b, **cb)).then(b.cmp(a)))
            else {
                break;
            };
            *targets.get_mut(&w).expect("a key") += 1;
        }
        self.dealt_near(targets, near, near, &|_| false)
    }

    /// `handed_out` touching only the slots of `gone` (at once): every
    /// other slot keeps its owner, unowned ones included.
    pub(crate) fn handed_out_only(&self, gone: WorkerId, weights: &[(WorkerId, u64)]) -> PartitionTable {
        let mut targets = self.handed_out(gone, weights, None).shares();
        targets.retain(|w, _| *w != gone);
        let keep = |s: u32| self.owner(s) != Some(gone);
        self.dealt_near(targets, None, None, &keep)
    }

    /// A new table meeting `targets`: keeps every slot whose owner is
    /// still within its target (and every slot `keep` names, as it is),
    /// and deals the others to workers below theirs, a slot going first to
    /// the worker `hint` has it with (or moving to) if that one is below
    /// its target. No worker is dealt a slot of a partition it holds
    /// another slot of, here or in `avoid`.
    fn dealt_near(
        &self,
        targets: BTreeMap<WorkerId, u32>,
        hint: Option<&PartitionTable>,
        avoid: Option<&PartitionTable>,
        keep: &dyn Fn(u32) -> bool,
    ) -> PartitionTable {
        let slots = self.slots() as usize;
        let mut count: BTreeMap<WorkerId, u32> = targets.keys().map(|w| (*w, 0)).collect();
        let mut owners = self.owners.clone();
        let mut free = Vec::new();
        for (s, o) in owners.iter_mut().enumerate() {
            if keep(s as u32) {
                if let Some(c) = o.and_then(|w| count.get_mut(&w)) {
                    *c += 1;
                }
                continue;
            }
            match o.and_then(|w| count.get_mut(&w).map(|c| (w, c))) {
                Some((w, c)) if *c < targets[&w] => *c += 1,
                _ => {
                    *o = None;
                    free.push(s as u32);
                }
            }
        }
        let busy = |owners: &[Option<WorkerId>], s: u32, w: WorkerId| -> bool {
            let p = self.partition_of_slot(s);
            self.slots_of(p).any(|x| {
                x != s
                    && (owners[x as usize] == Some(w)
                        || self.owner(x) == Some(w)
                        || avoid.is_some_and(|t| t.owner(x) == Some(w) || t.moving.get(&x) == Some(&w)))
            })
        };
        // A free slot whose worker in `near` is short of its target goes
        // to it (where it is, or is on its way to: no copy, or no copy wasted).
        if let Some(t) = hint {
            free.retain(|s| match t.moving.get(s).copied().or(t.owner(*s)) {
                Some(w) if count.get(&w).is_some_and(|c| *c < targets[&w]) && !busy(&owners, *s, w) => {
                    owners[*s as usize] = Some(w);
                    *count.get_mut(&w).expect("a key") += 1;
                    false
                }
                _ => true,
            });
        }
        // Deal free slots round-robin over workers with a deficit, so a
        // newcomer's slots interleave with everyone else's.
        'deal: loop {
            let mut dealt = false;
            for (w, t) in &targets {
                let c = count.get_mut(w).expect("same keys");
                if *c < *t {
                    if free.is_empty() {
                        break 'deal;
                    }
                    if let Some(i) = free.iter().position(|s| !busy(&owners, *s, *w)) {
                        owners[free.remove(i) as usize] = Some(*w);
                        *c += 1;
                        dealt = true;
                    }
                }
            }
            if !dealt {
                break;
            }
        }
        // What no worker below its target may take goes to the least
        // loaded one that may (or stays unowned: too few workers).
        for s in free {
            let pick = (count.iter())
                .filter(|(w, c)| !busy(&owners, s, **w) && **c < self.partitions())
                .min_by_key(|(w, c)| (i64::from(**c) - i64::from(targets[w]), **w))
                .map(|(w, _)| *w);
            if let Some(w) = pick {
                owners[s as usize] = Some(w);
                *count.get_mut(&w).expect("a key") += 1;
            }
        }
        debug_assert_eq!(owners.len(), slots);
        PartitionTable { epoch: self.epoch + 1, replicas: self.replicas, owners, moving: BTreeMap::new() }
    }
}
