//! Replica slots: placement keeps a partition's replicas on distinct
//! workers through joins, failures, repairs and rebalances, and a repair
//! restores every replica that has a surviving sibling.

use proptest::prelude::*;
use std::collections::BTreeSet;
use tierpool_placement::plan::{next_moves, remaining};
use tierpool_placement::{slot_targets, PartitionTable};
use tierpool_types::{ChunkKey, InodeId, WorkerId};

fn w(i: u32) -> WorkerId {
    WorkerId(i)
}

/// No worker holds two slots of a partition, counting slots it receives.
fn assert_distinct(t: &PartitionTable) -> Result<(), TestCaseError> {
    for p in 0..t.partitions() {
        let mut seen = BTreeSet::new();
        for s in t.slots_of(p) {
            for x in [t.owner(s), t.moving().get(&s).copied()].into_iter().flatten() {
                prop_assert!(seen.insert(x), "worker {} holds two slots of partition {}: {:?}", x, p, t.holders(p));
            }
        }
    }
    Ok(())
}

/// Walks `t` to `goal` the way the coordinator does, finishing or giving
/// up moves as `choices` say; returns the table reached.
fn walk(mut t: PartitionTable, goal: &[Option<WorkerId>], choices: &[bool]) -> Result<PartitionTable, TestCaseError> {
    let mut choices = choices.iter().copied();
    for _ in 0..10_000 {
        let room = 16usize.saturating_sub(t.moving().len());
        let moves = next_moves(&t, goal, room);
        t.begin_moves(&moves).map_err(TestCaseError::fail)?;
        assert_distinct(&t)?;
        let moving: Vec<u32> = t.moving().keys().copied().collect();
        if moving.is_empty() {
            break;
        }
        if choices.next().unwrap_or(true) {
            t.finish_moves(&moving);
        } else {
            t.abort_moves(&moving[..1]);
        }
        assert_distinct(&t)?;
    }
    Ok(t)
}

fn weights(n: u32) -> Vec<(WorkerId, u64)> {
    (0..n).map(|i| (w(i), 10 + u64::from(i % 3) * 5)).collect()
}

#[test]
fn two_replicas_on_two_workers_are_one_each() {
    let t = PartitionTable::replicated(64, 2).rebalanced(&weights(2));
    for p in 0..64 {
        let mut h = t.holders(p);
        h.sort();
        assert_eq!(h, vec![w(0), w(1)]);
    }
}

#[test]
fn one_worker_holds_one_replica_and_leaves_the_others_unowned() {
    let t = PartitionTable::replicated(16, 2).rebalanced(&weights(1));
    assert_eq!(t.shares(), [(w(0), 16)].into());
    let key = ChunkKey::hashed(InodeId(7), 0, 1);
    assert_eq!(t.write_targets(key, 2), vec![w(0)]);
}

#[test]
fn a_share_above_one_slot_per_partition_goes_to_the_others() {
    let t = slot_targets(&[(w(0), 100), (w(1), 1), (w(2), 1)], 200, 100);
    assert_eq!(t[&w(0)], 100);
    assert_eq!(t[&w(1)] + t[&w(2)], 100);
}

proptest! {
    #[test]
    fn rebalanced_tables_place_every_replica_on_distinct_workers(
        n in 1u32..7, r in 1u8..4, parts in 1u32..300,
    ) {
        let t = PartitionTable::replicated(parts, r).rebalanced(&weights(n));
        assert_distinct(&t)?;
        let owned = t.owners().iter().filter(|o| o.is_some()).count() as u32;
        prop_assert_eq!(owned, parts * u32::from(r).min(n));
        for (_, c) in t.shares() {
            prop_assert!(c <= parts);
        }
    }

    /// Any sequence of failures that leaves a replica of every partition
    /// alive, followed by the repair the coordinator runs (released slots
    /// filled by moves toward a goal dealt over the live workers), puts
    /// every replica back on distinct live workers.
    #[test]
    fn repair_after_failures_restores_every_replica(
        n in 3u32..8, r in 2u8..4, parts in 1u32..64,
        failures in prop::collection::vec(0u32..8, 1..4),
        choices in prop::collection::vec(any::<bool>(), 0..200),
    ) {
        let ws = weights(n);
        let mut t = PartitionTable::replicated(parts, r).rebalanced(&ws);
        let mut down = BTreeSet::new();
        for f in failures {
            let f = w(f % n);
            if down.contains(&f) || n as usize - down.len() - 1 < usize::from(r) {
                continue;
            }
            // Only when every partition keeps a live replica.
            let survives = (0..parts).all(|p| t.holders(p).iter().any(|h| *h != f && !down.contains(h)));
            if !survives {
                continue;
            }
            down.insert(f);
            let (released, _) = t.released(f, &down);
            t = released;
            assert_distinct(&t)?;
            let live: Vec<_> = ws.iter().copied().filter(|(x, _)| !down.contains(x)).collect();
            let goal = t.handed_out(f, &live, Some(&t)).owners().to_vec();
            t = walk(t, &goal, &choices)?;
            prop_assert_eq!(remaining(&t, &goal), 0);
        }
        for s in 0..t.slots() {
            let o = t.owner(s);
            prop_assert!(o.is_some_and(|o| !down.contains(&o)), "slot {} owned by {:?} (down: {:?})", s, o, down);
        }
    }

    /// A join moves slots only to the newcomer and keeps replicas apart.
    #[test]
    fn a_join_keeps_replicas_apart(n in 2u32..7, r in 2u8..4, parts in 1u32..200, choices in prop::collection::vec(any::<bool>(), 0..50)) {
        let ws = weights(n);
        let t = PartitionTable::replicated(parts, r).rebalanced(&ws[..n as usize - 1]);
        let goal = t.joined(&ws, w(n - 1), Some(&t));
        assert_distinct(&goal)?;
        for s in 0..t.slots() {
            let (a, b) = (t.owner(s), goal.owner(s));
            prop_assert!(a == b || b == Some(w(n - 1)), "slot {} moved {:?} -> {:?}", s, a, b);
        }
        let end = walk(t, goal.owners(), &choices)?;
        prop_assert_eq!(end.owners(), goal.owners());
    }

    /// Write targets of a chunk are distinct owned workers, the first
    /// `copies` slots when they are owned.
    #[test]
    fn write_targets_are_distinct(n in 1u32..6, r in 1u8..4, copies in 1u8..4, inode in 0u64..1000, index in 0u64..100) {
        let t = PartitionTable::replicated(32, r).rebalanced(&weights(n));
        let key = ChunkKey::hashed(InodeId(inode), index, 1);
        let ts = t.write_targets(key, copies);
        let set: BTreeSet<_> = ts.iter().collect();
        prop_assert_eq!(set.len(), ts.len());
        prop_assert_eq!(ts.len(), usize::from(copies.min(r)).min(n as usize));
    }
}

proptest! {
    /// Spreading puts as many first replicas on each of equal workers as
    /// on the others, and keeps every partition's holders.
    #[test]
    fn spread_balances_first_replicas(n in 2u32..7, r in 2u8..4, parts in 16u32..300) {
        let equal = |k: u32| (0..k).map(|i| (w(i), 1)).collect::<Vec<_>>();
        let mut t = PartitionTable::replicated(parts, r).rebalanced(&equal(1));
        for i in 1..n {
            t = t.joined(&equal(i + 1), w(i), None);
        }
        let s = t.spread();
        assert_distinct(&s)?;
        let mut firsts = std::collections::BTreeMap::new();
        for p in 0..parts {
            let (mut a, mut b) = (t.holders(p), s.holders(p));
            a.sort();
            b.sort();
            prop_assert_eq!(a, b);
            *firsts.entry(s.owner(p).unwrap()).or_insert(0u32) += 1;
        }
        let (lo, hi) = (firsts.values().min().unwrap(), firsts.values().max().unwrap());
        prop_assert!(firsts.len() as u32 == n.min(parts) && hi - lo <= 2 + parts / 20, "first replicas {:?}", firsts);
    }
}

proptest! {
    /// Trading slots leaves shares and holders' distinctness as they were
    /// and never leaves more partitions with two replicas on one host; with
    /// at least as many equal hosts as replicas, hardly any is left.
    #[test]
    fn replicas_are_traded_apart_onto_distinct_hosts(hosts in 2u32..4, per in 1u32..4, r in 2u8..4, parts in 8u32..200) {
        let n = hosts * per;
        prop_assume!(u32::from(r) <= n);
        let ws: Vec<(WorkerId, u64)> = (0..n).map(|i| (w(i), 1)).collect();
        let t = PartitionTable::replicated(parts, r).rebalanced(&ws);
        let host = |x: WorkerId| Some(x.0 % hosts);
        let s = t.separated(&host, Some(&t));
        assert_distinct(&s)?;
        prop_assert_eq!(s.shares(), t.shares());
        let clashing = |t: &PartitionTable| (0..parts).filter(|p| {
            let hs: Vec<u32> = t.holders(*p).iter().map(|x| x.0 % hosts).collect();
            hs.iter().collect::<BTreeSet<_>>().len() < hs.len()
        }).count();
        prop_assert!(clashing(&s) <= clashing(&t));
        if u32::from(r) <= hosts {
            prop_assert!(clashing(&s) <= 2 + parts as usize / 10, "{} of {} partitions keep two replicas on a host", clashing(&s), parts);
        }
    }
}
