//! Placement policies: `local` puts a chunk's first replica on the
//! writer's worker, `round-robin` deals a file's chunks over the workers in
//! turn, and every home is a partition of the pool that the key then names.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_placement::{home, partition_of_key, Near, NoWorkerHere, PartitionTable};
use tierpool_types::{ChunkKey, InodeId, Placement, WorkerId};

fn table(workers: u32, replicas: u8, parts: u32) -> PartitionTable {
    let weights: Vec<(WorkerId, u64)> = (0..workers).map(|i| (WorkerId(i), 10)).collect();
    PartitionTable::replicated(parts, replicas).rebalanced(&weights)
}

fn near(host: &[u32], rack: &[u32]) -> Near {
    Near { host: host.iter().map(|w| WorkerId(*w)).collect(), rack: rack.iter().map(|w| WorkerId(*w)).collect() }
}

#[test]
fn hash_has_no_home() {
    let t = table(3, 2, 64);
    assert_eq!(home(Placement::Hash, &t, &near(&[1], &[]), InodeId(9), 4), Ok(None));
}

#[test]
fn local_only_without_a_worker_here_has_nowhere() {
    let t = table(3, 1, 64);
    assert_eq!(home(Placement::LocalOnly, &t, &near(&[], &[2]), InodeId(9), 0), Err(NoWorkerHere));
    assert_eq!(home(Placement::Local, &t, &near(&[], &[]), InodeId(9), 0), Ok(None), "local falls back to hashing");
}

proptest! {
    /// `local` and `local-only` put the first replica on the writer's
    /// worker; without one on its host, `local` uses one in its rack.
    #[test]
    fn local_chunks_have_their_first_replica_here(
        n in 1u32..6, r in 1u8..4, parts in 8u32..256, me in 0u32..6, inode in 1u64..1000, index in 0u64..64,
    ) {
        let me = me % n;
        let t = table(n, r, parts);
        for policy in [Placement::Local, Placement::LocalOnly] {
            let h = home(policy, &t, &near(&[me], &[]), InodeId(inode), index).unwrap();
            let key = ChunkKey { home: h, ..ChunkKey::hashed(InodeId(inode), index, 1) };
            prop_assert!(h.is_some_and(|p| p < parts));
            prop_assert_eq!(t.write_targets(key, r).first().copied(), Some(WorkerId(me)));
            prop_assert_eq!(t.partition(key), partition_of_key(key, parts));
        }
        let h = home(Placement::Local, &t, &near(&[], &[me]), InodeId(inode), index).unwrap();
        let key = ChunkKey { home: h, ..ChunkKey::hashed(InodeId(inode), index, 1) };
        prop_assert_eq!(t.locate(key), Some(WorkerId(me)));
    }

    /// `round-robin` deals consecutive chunks of a file to consecutive
    /// workers: over any run of chunks, no worker has more than one more
    /// first replica than another.
    #[test]
    fn round_robin_deals_chunks_evenly(n in 1u32..6, r in 1u8..3, inode in 1u64..1000, chunks in 1u64..40) {
        let t = table(n, r, 128);
        let mut per: BTreeMap<WorkerId, u64> = (0..n).map(|i| (WorkerId(i), 0)).collect();
        let mut last = None;
        for index in 0..chunks {
            let h = home(Placement::RoundRobin, &t, &Near::default(), InodeId(inode), index).unwrap();
            let key = ChunkKey { home: h, ..ChunkKey::hashed(InodeId(inode), index, 1) };
            let w = t.locate(key).unwrap();
            if n > 1 {
                prop_assert_ne!(Some(w), last, "chunk {} on the same worker as the one before", index);
            }
            last = Some(w);
            *per.get_mut(&w).unwrap() += 1;
        }
        let (lo, hi) = (per.values().min().unwrap(), per.values().max().unwrap());
        prop_assert!(hi - lo <= 1, "{:?}", per);
    }
}

proptest! {
    /// Readers try replicas in RCSS's order: host, rack, remote, each in
    /// replica order, workers that failed lately last; every holder once.
    #[test]
    fn read_classes_follow_the_ranking(
        near in proptest::collection::vec(0u8..3, 1..8),
        suspect in proptest::collection::vec(any::<bool>(), 8),
    ) {
        use tierpool_placement::{read_classes, Nearness};
        let holders: Vec<WorkerId> = (0..near.len() as u32).map(WorkerId).collect();
        let nearness = |w: WorkerId| [Nearness::Host, Nearness::Rack, Nearness::Remote][near[w.0 as usize] as usize];
        let sus = |w: WorkerId| suspect[w.0 as usize];
        let classes = read_classes(&holders, nearness, sus);
        let flat: Vec<WorkerId> = classes.concat();
        let mut sorted = flat.clone();
        sorted.sort();
        prop_assert_eq!(&sorted, &holders, "every holder once");
        let rank = |w: WorkerId| (sus(w), nearness(w), w.0);
        prop_assert!(flat.windows(2).all(|p| rank(p[0]) < rank(p[1])), "ranked: {:?}", flat);
        for c in &classes {
            prop_assert!(c.iter().all(|w| (sus(*w), nearness(*w)) == (sus(c[0]), nearness(c[0]))), "a class mixes: {:?}", c);
        }
        prop_assert!(classes.windows(2).all(|p| (sus(p[0][0]), nearness(p[0][0])) != (sus(p[1][0]), nearness(p[1][0]))));
    }
}
