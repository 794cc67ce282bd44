//! How to make room in MEM: a pure planner over the eviction index and the
//! reclaimable queues of both tiers, no I/O.
//!
//! The rules, in order:
//! 1. reclaimable MEM chunks are dropped first (oldest mark first), only as
//!    many as needed;
//! 2. only when every one of them is not enough are live MEM chunks demoted
//!    to DISK, in eviction order (see [`EvictionIndex::plan`]);
//! 3. the demoted bytes need DISK room: reclaimable DISK chunks are dropped
//!    for it, oldest mark first, only as many as needed.
//!
//! A reclaimable chunk is never demoted and a live chunk is never dropped.
//! `None` means no plan fits; the caller then changes nothing (it may still
//! try DISK alone, planning with [`ReclaimQueue::plan`] on DISK).

use super::{EvictionIndex, Rank, ReclaimQueue};
use tierpool_types::ChunkKey;

/// A request for `need` bytes of MEM.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemRequest {
    pub need: u64,
    /// MEM bytes free now (counting the space of the old copy of `exclude`).
    pub mem_free: u64,
    /// DISK bytes free now (counting the space of the old copy of `exclude`).
    pub disk_free: u64,
    /// The chunk being written or promoted: never dropped nor demoted.
    pub exclude: Option<ChunkKey>,
    /// A promotion's rank: only live chunks ranked strictly below it may be demoted.
    pub below: Option<Rank>,
}

/// What to do, in this order, to make the room of a [`MemRequest`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemRoom {
    /// Reclaimable DISK chunks to delete (room for `demote`).
    pub drop_disk: Vec<ChunkKey>,
    /// Live MEM chunks to write to DISK, first victim first.
    pub demote: Vec<ChunkKey>,
    /// Reclaimable MEM chunks to delete.
    pub drop_mem: Vec<ChunkKey>,
}

/// Plans room in MEM by the rules of this module; `None` if it cannot be made.
pub fn plan_mem(
    live: &EvictionIndex,
    mem_reclaim: &ReclaimQueue,
    disk_reclaim: &ReclaimQueue,
    req: &MemRequest,
) -> Option<MemRoom> {
    if let Some(drop_mem) = mem_reclaim.plan(req.need, req.mem_free, req.exclude) {
        return Some(MemRoom { drop_mem, ..MemRoom::default() });
    }
    let dropped: Vec<(ChunkKey, u64)> = mem_reclaim.iter().filter(|(k, _)| Some(*k) != req.exclude).collect();
    let room = dropped.iter().fold(req.mem_free, |r, (_, size)| r.saturating_add(*size));
    let demote = live.plan(req.need, room, req.exclude, req.below)?;
    let demoted = demote.iter().filter_map(|k| live.size_of(*k)).fold(0u64, u64::saturating_add);
    let drop_disk = disk_reclaim.plan(demoted, req.disk_free, req.exclude)?;
    Some(MemRoom { drop_disk, demote, drop_mem: dropped.into_iter().map(|(k, _)| k).collect() })
}

#[cfg(test)]
mod tests {
    use super::super::Marked;
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use tierpool_types::{ChunkAttrs, InodeId, Priority};

    fn key(i: u64) -> ChunkKey {
        ChunkKey::hashed(InodeId(i), 0, 1)
    }

    fn rank(priority: u8, pinned: bool, last_use: u64) -> Rank {
        Rank::new(ChunkAttrs { priority: Priority::new(priority).unwrap(), pinned }, last_use)
    }

    fn queue(entries: &[(u64, u64, u64)]) -> ReclaimQueue {
        let mut q = ReclaimQueue::new();
        for &(k, seq, size) in entries {
            q.insert(key(k), Marked { seq, size });
        }
        q
    }

    fn request(need: u64, mem_free: u64, disk_free: u64) -> MemRequest {
        MemRequest { need, mem_free, disk_free, exclude: None, below: None }
    }

    #[test]
    fn drops_reclaimable_memory_before_demoting_anything() {
        let mut live = EvictionIndex::new();
        live.insert(key(1), rank(1, false, 1), 10);
        let mem = queue(&[(2, 7, 10), (3, 3, 10)]);
        let disk = queue(&[(4, 1, 10)]);
        let want = MemRoom { drop_mem: vec![key(3)], ..MemRoom::default() };
        assert_eq!(plan_mem(&live, &mem, &disk, &request(10, 0, 0)), Some(want));
        let want = MemRoom { drop_disk: vec![key(4)], demote: vec![key(1)], drop_mem: vec![key(3), key(2)] };
        assert_eq!(plan_mem(&live, &mem, &disk, &request(30, 0, 0)), Some(want), "all of MEM's, then demote");
        assert_eq!(plan_mem(&live, &mem, &ReclaimQueue::new(), &request(30, 0, 0)), None);
        let want = MemRoom { drop_disk: vec![], demote: vec![key(1)], drop_mem: vec![key(3), key(2)] };
        assert_eq!(plan_mem(&live, &mem, &disk, &request(30, 0, 10)), Some(want), "free DISK room first");
    }

    #[test]
    fn never_drops_nor_demotes_the_excluded_chunk() {
        let mut live = EvictionIndex::new();
        live.insert(key(1), rank(1, false, 1), 10);
        live.insert(key(2), rank(1, false, 2), 10);
        let mem = queue(&[(3, 1, 10)]);
        let disk = queue(&[(1, 1, 10), (5, 2, 10)]);
        let req = MemRequest { exclude: Some(key(1)), ..request(20, 0, 0) };
        let want = MemRoom { drop_disk: vec![key(5)], demote: vec![key(2)], drop_mem: vec![key(3)] };
        assert_eq!(plan_mem(&live, &mem, &disk, &req), Some(want));
    }

    /// The rules of the module written as plainly as possible.
    fn naive(
        live: &BTreeMap<u64, (Rank, u64)>,
        mem: &BTreeMap<u64, (u64, u64)>,
        disk: &BTreeMap<u64, (u64, u64)>,
        req: &MemRequest,
    ) -> Option<MemRoom> {
        let allowed = |k: &u64| Some(key(*k)) != req.exclude;
        let mut mem: Vec<_> = mem.iter().filter(|(k, _)| allowed(k)).map(|(k, (seq, s))| (*seq, *k, *s)).collect();
        mem.sort();
        let mut room = req.mem_free;
        let mut out = MemRoom::default();
        for (_, k, s) in mem {
            if room >= req.need {
                break;
            }
            room += s;
            out.drop_mem.push(key(k));
        }
        let mut live: Vec<_> = live.iter().map(|(k, (r, s))| (*r, key(*k), *s)).collect();
        live.sort();
        let mut demoted = 0;
        for (r, k, s) in live {
            if room >= req.need || req.below.is_some_and(|b| r >= b) {
                break;
            }
            if Some(k) != req.exclude {
                room += s;
                demoted += s;
                out.demote.push(k);
            }
        }
        if room < req.need {
            return None;
        }
        let mut disk: Vec<_> = disk.iter().filter(|(k, _)| allowed(k)).map(|(k, (seq, s))| (*seq, *k, *s)).collect();
        disk.sort();
        let mut disk_room = req.disk_free;
        for (_, k, s) in disk {
            if disk_room >= demoted {
                break;
            }
            disk_room += s;
            out.drop_disk.push(key(k));
        }
        (disk_room >= demoted).then_some(out)
    }

    type Entries = BTreeMap<u64, (u64, u64)>;

    /// Live MEM chunks are keys 0..10, reclaimable MEM 10..16, reclaimable DISK 16..22.
    fn inputs() -> impl Strategy<Value = (BTreeMap<u64, (Rank, u64)>, Entries, Entries)> {
        let live = prop::collection::btree_map(0u64..10, (1u8..=5, any::<bool>(), 0u64..50, 0u64..40), 0..8)
            .prop_map(|m| m.into_iter().map(|(k, (p, pin, at, s))| (k, (rank(p, pin, at * 100 + k), s))).collect());
        let mem = prop::collection::btree_map(10u64..16, (0u64..20, 0u64..40), 0..5);
        let disk = prop::collection::btree_map(16u64..22, (0u64..20, 0u64..40), 0..5);
        (live, mem, disk)
    }

    fn request_strategy() -> impl Strategy<Value = MemRequest> {
        let below = prop::option::of((1u8..=5, any::<bool>(), 0u64..5000));
        (0u64..300, 0u64..40, 0u64..80, prop::option::of(0u64..22), below).prop_map(|(need, mf, df, x, b)| MemRequest {
            need,
            mem_free: mf,
            disk_free: df,
            exclude: x.map(key),
            below: b.map(|(p, pin, at)| rank(p, pin, at)),
        })
    }

    proptest! {
        #[test]
        fn follows_the_rules((live, mem, disk) in inputs(), req in request_strategy()) {
            let mut ix = EvictionIndex::new();
            for (k, (r, s)) in &live {
                ix.insert(key(*k), *r, *s);
            }
            let mem_q = queue(&mem.iter().map(|(k, (q, s))| (*k, *q, *s)).collect::<Vec<_>>());
            let disk_q = queue(&disk.iter().map(|(k, (q, s))| (*k, *q, *s)).collect::<Vec<_>>());
            let plan = plan_mem(&ix, &mem_q, &disk_q, &req);
            prop_assert_eq!(&plan, &naive(&live, &mem, &disk, &req));

            let reclaimable_mem: u64 = mem.iter().filter(|(k, _)| Some(key(**k)) != req.exclude).map(|(_, (_, s))| s).sum();
            if req.need <= req.mem_free + reclaimable_mem {
                let plan = plan.clone();
                prop_assert!(plan.is_some_and(|p| p.demote.is_empty()), "fits by dropping, yet demotes or fails");
            }
            let Some(p) = plan else { return Ok(()) };
            let size = |k: &ChunkKey, m: &Entries| m.get(&k.inode.0).map_or(0, |e| e.1);
            let live_size = |k: &ChunkKey| live.get(&k.inode.0).map_or(0, |e| e.1);
            prop_assert!(p.drop_mem.iter().all(|k| mem.contains_key(&k.inode.0)), "only reclaimable MEM chunks are dropped");
            prop_assert!(p.drop_disk.iter().all(|k| disk.contains_key(&k.inode.0)), "only reclaimable DISK chunks are dropped");
            prop_assert!(p.demote.iter().all(|k| live.contains_key(&k.inode.0)), "only live chunks are demoted");
            let all = p.drop_mem.iter().chain(&p.demote).chain(&p.drop_disk);
            prop_assert!(all.clone().all(|k| Some(*k) != req.exclude));
            if !p.demote.is_empty() {
                prop_assert_eq!(p.drop_mem.len() as u64, mem.keys().filter(|k| Some(key(**k)) != req.exclude).count() as u64,
                    "a live chunk is demoted only after every reclaimable MEM chunk is dropped");
            }
            let mem_room = req.mem_free + p.drop_mem.iter().map(|k| size(k, &mem)).sum::<u64>()
                + p.demote.iter().map(live_size).sum::<u64>();
            prop_assert!(mem_room >= req.need);
            let demoted: u64 = p.demote.iter().map(live_size).sum();
            prop_assert!(req.disk_free + p.drop_disk.iter().map(|k| size(k, &disk)).sum::<u64>() >= demoted);
            prop_assert!(p.demote.iter().all(|k| req.below.is_none_or(|b| live[&k.inode.0].0 < b)));
        }
    }
}
