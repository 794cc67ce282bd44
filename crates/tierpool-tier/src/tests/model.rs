//! The tier manager against a `BTreeMap` model: random puts (new chunks,
//! retries and refused overwrites of write-once versions), gets, deletes,
//! range writes, reclaimable marks, attribute changes and restarts over small
//! budgets (chunks of 1..16 KiB). Some puts, and every get, are made as
//! the worker makes them: first the call that must not block, which either
//! serves from MEM alone (no demotion, no DISK change) or declines and
//! changes nothing, then the blocking call.
//!
//! Reclaimable chunks may vanish from the manager whenever a change needs
//! room; the model follows by forgetting the marked chunks the manager no
//! longer has, and checks that it dropped them by the rules: a live chunk is
//! never dropped, a reclaimable chunk is never demoted, no live chunk is
//! demoted while a reclaimable one is left in MEM, and a put fails with
//! `PoolFull` only if dropping every reclaimable chunk would not make room
//! (and then nothing changes).

use super::{attrs, chunk, config, key, put, KIB};
use crate::{TierKind, TierManager, TierStats};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId, Result};

#[derive(Clone, Debug)]
enum Op {
    Put {
        inode: u64,
        index: u64,
        len: u64,
        seed: u8,
        priority: u8,
        pinned: bool,
        /// Tried first without blocking, as the worker does.
        no_wait: bool,
    },
    /// Puts the bytes the chunk holds again (a retried put).
    Reput {
        inode: u64,
        index: u64,
    },
    Get {
        inode: u64,
        index: u64,
    },
    Delete {
        inode: u64,
        index: u64,
    },
    DeleteInodes(Vec<u64>),
    SetAttrs {
        inode: u64,
        priority: u8,
        pinned: bool,
    },
    /// Overwrite `(offset fraction, len)` ranges of a chunk in place.
    WriteRanges {
        inode: u64,
        index: u64,
        ranges: Vec<(u16, u16, u8)>,
    },
    Mark(Vec<(u64, u64)>),
    MarkInodes(Vec<u64>),
    /// The worker is killed and restarted: MEM chunks and marks are gone.
    Restart,
    /// The worker stops gracefully (memory spilled to disk), then restarts.
    StopAndRestart,
}

fn op() -> impl Strategy<Value = Op> {
    let inode = 0u64..6;
    let index = 0u64..12;
    let pinned = prop::bool::weighted(0.2);
    prop_oneof![
        40 => (inode.clone(), index.clone(), 1..=16 * KIB, any::<u8>(), 1u8..=5, pinned, any::<bool>()).prop_map(
            |(inode, index, len, seed, priority, pinned, no_wait)| Op::Put { inode, index, len, seed, priority, pinned, no_wait }
        ),
        4 => (inode.clone(), index.clone()).prop_map(|(inode, index)| Op::Reput { inode, index }),
        16 => (inode.clone(), index.clone()).prop_map(|(inode, index)| Op::Get { inode, index }),
        // A few hot chunks, so that DISK chunks get read again and promoted.
        16 => (0u64..2, 0u64..3).prop_map(|(inode, index)| Op::Get { inode, index }),
        6 => (inode.clone(), index.clone()).prop_map(|(inode, index)| Op::Delete { inode, index }),
        3 => (inode.clone(), 1u8..=5, pinned).prop_map(|(inode, priority, pinned)| Op::SetAttrs { inode, priority, pinned }),
        10 => (0u64..3, 0u64..4, prop::collection::vec((any::<u16>(), 0u16..5000, any::<u8>()), 1..4))
            .prop_map(|(inode, index, ranges)| Op::WriteRanges { inode, index, ranges }),
        6 => prop::collection::vec((inode.clone(), index), 1..4).prop_map(Op::Mark),
        2 => prop::collection::vec(inode.clone(), 1..3).prop_map(Op::MarkInodes),
        1 => Just(Op::Restart),
        1 => Just(Op::StopAndRestart),
        1 => prop::collection::vec(inode, 1..3).prop_map(Op::DeleteInodes),
    ]
}

/// What the checks after an op compare with.
struct Before {
    stats: TierStats,
    /// Reclaimable chunks in MEM.
    mem_reclaimable: BTreeSet<ChunkKey>,
}

struct Harness {
    mem: u64,
    disk: u64,
    dir: tempfile::TempDir,
    m: TierManager,
    model: BTreeMap<ChunkKey, Vec<u8>>,
    /// Model keys marked reclaimable.
    reclaimable: BTreeSet<ChunkKey>,
}

impl Harness {
    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        let before = self.before();
        match op {
            Op::Put { inode, index, len, seed, priority, pinned, no_wait } => {
                self.put_data(key(inode, index), chunk(len, seed), attrs(priority, pinned), no_wait)?
            }
            Op::Reput { inode, index } => {
                let k = key(inode, index);
                if let Some(v) = self.model.get(&k) {
                    self.put_data(k, v.clone().into(), attrs(3, false), false)?
                }
            }
            Op::Get { inode, index } => self.get(key(inode, index))?,
            Op::Delete { inode, index } => {
                let k = key(inode, index);
                self.reclaimable.remove(&k);
                prop_assert_eq!(self.m.delete(k).unwrap(), self.model.remove(&k).is_some());
            }
            Op::DeleteInodes(inodes) => {
                let n = self.model.len();
                self.model.retain(|k, _| !inodes.contains(&k.inode.0));
                self.reclaimable.retain(|k| !inodes.contains(&k.inode.0));
                let ids: Vec<InodeId> = inodes.into_iter().map(InodeId).collect();
                prop_assert_eq!(self.m.delete_inodes(&ids).unwrap(), (n - self.model.len()) as u64);
            }
            Op::SetAttrs { inode, priority, pinned } => self.m.set_attrs(InodeId(inode), attrs(priority, pinned)),
            Op::WriteRanges { inode, index, ranges } => self.write_ranges(key(inode, index), ranges)?,
            Op::Mark(keys) => {
                let keys: Vec<ChunkKey> = keys.into_iter().map(|(inode, index)| key(inode, index)).collect();
                let stored: BTreeSet<ChunkKey> = keys.iter().filter(|k| self.model.contains_key(k)).copied().collect();
                prop_assert_eq!(self.m.mark_reclaimable(&keys), stored.len() as u64);
                self.reclaimable.extend(stored);
            }
            Op::MarkInodes(inodes) => {
                let stored: Vec<ChunkKey> =
                    self.model.keys().filter(|k| inodes.contains(&k.inode.0)).copied().collect();
                let ids: Vec<InodeId> = inodes.into_iter().map(InodeId).collect();
                prop_assert_eq!(self.m.mark_reclaimable_inodes(&ids), stored.len() as u64);
                self.reclaimable.extend(stored);
            }
            Op::Restart => self.restart(),
            Op::StopAndRestart => self.stop_and_restart()?,
        }
        self.follow_drops(&before)?;
        self.check()
    }

    fn before(&self) -> Before {
        let in_mem = |k: &&ChunkKey| self.m.locate(**k) == Some(TierKind::Mem);
        Before { stats: self.m.stats(), mem_reclaimable: self.reclaimable.iter().filter(in_mem).copied().collect() }
    }

    /// Bytes of reclaimable chunks in MEM and on DISK.
    fn reclaimable_bytes(&self) -> (u64, u64) {
        let mut by_tier = (0, 0);
        for k in &self.reclaimable {
            let len = self.model[k].len() as u64;
            match self.m.locate(*k) {
                Some(TierKind::Mem) => by_tier.0 += len,
                Some(TierKind::Disk) => by_tier.1 += len,
                None => {}
            }
        }
        by_tier
    }

    /// Forgets the reclaimable chunks the manager dropped, and checks it
    /// dropped them by the rules.
    fn follow_drops(&mut self, before: &Before) -> Result<(), TestCaseError> {
        let gone: Vec<ChunkKey> = self.reclaimable.iter().filter(|k| self.m.locate(**k).is_none()).copied().collect();
        for k in &gone {
            self.reclaimable.remove(k);
            self.model.remove(k);
        }
        let s = self.m.stats();
        if s.reclaimed >= before.stats.reclaimed {
            prop_assert_eq!(s.reclaimed - before.stats.reclaimed, gone.len() as u64, "drops are counted");
        }
        for k in &before.mem_reclaimable {
            prop_assert!(self.m.locate(*k) != Some(TierKind::Disk), "reclaimable {} was demoted", k);
            if s.demotions > before.stats.demotions {
                prop_assert!(self.m.locate(*k).is_none(), "a live chunk was demoted while reclaimable {} stayed", k);
            }
        }
        for k in self.model.keys().filter(|k| !self.reclaimable.contains(k)) {
            prop_assert!(self.m.locate(*k).is_some(), "live chunk {} was dropped", k);
        }
        Ok(())
    }

    /// A put of a stored key changes nothing: it succeeds if the bytes are
    /// the same (length and checksum) and is refused otherwise.
    fn put_data(&mut self, k: ChunkKey, data: Bytes, a: ChunkAttrs, no_wait: bool) -> Result<(), TestCaseError> {
        let s = self.m.stats();
        let (len, tier) = (data.len() as u64, self.m.locate(k));
        let (reclaimable_mem, reclaimable_disk) = self.reclaimable_bytes();
        let result = if no_wait { self.put_as_worker(k, &data, a)? } else { put(&self.m, k, &data, a) };
        if let Some(v) = self.model.get(&k) {
            let same = v.len() as u64 == len && crc32c::crc32c(v) == crc32c::crc32c(&data);
            match result {
                Ok(()) => prop_assert!(same, "put of other bytes over {} accepted", k),
                Err(e) => prop_assert!(!same && e.kind == ErrorKind::AlreadyExists, "{}", e),
            }
            prop_assert_eq!(self.m.stats(), s, "a put of a stored key changed the tiers");
            prop_assert_eq!(self.m.locate(k), tier);
            return Ok(());
        }
        match result {
            Ok(()) => {
                self.model.insert(k, data.to_vec());
            }
            Err(e) => {
                prop_assert_eq!(e.kind, ErrorKind::PoolFull, "{}", e);
                let fits_mem = len <= self.mem - (s.mem_used - reclaimable_mem);
                let fits_disk = len <= self.disk - (s.disk_used - reclaimable_disk);
                prop_assert!(!fits_mem && !fits_disk, "put of {} bytes refused with room left: {:?}", len, s);
                prop_assert_eq!(self.m.stats(), s, "a refused put changed the tiers");
            }
        }
        Ok(())
    }

    /// The put without blocking, and the blocking put if it declined.
    fn put_as_worker(&self, k: ChunkKey, data: &Bytes, a: ChunkAttrs) -> Result<Result<()>, TestCaseError> {
        let (s, tier) = (self.m.stats(), self.m.locate(k));
        let Some(r) = self.m.try_put_in_mem(k, data, crc32c::crc32c(data), a) else {
            prop_assert_eq!(self.m.stats(), s, "a declined put changed the tiers");
            prop_assert_eq!(self.m.locate(k), tier);
            return Ok(put(&self.m, k, data, a));
        };
        self.m.check_invariants();
        let after = self.m.stats();
        prop_assert_eq!(after.demotions, s.demotions, "a put without blocking demoted");
        prop_assert_eq!((after.disk_used, after.disk_chunks), (s.disk_used, s.disk_chunks), "it changed DISK");
        Ok(r)
    }

    fn get(&mut self, k: ChunkKey) -> Result<(), TestCaseError> {
        let in_mem = self.m.locate(k) == Some(TierKind::Mem);
        match self.m.try_get_in_mem(k) {
            Some(got) => prop_assert!(in_mem && self.model.get(&k).is_some_and(|v| got == v[..]), "{} from MEM", k),
            None => prop_assert!(!in_mem, "{} is in MEM but was not served without blocking", k),
        }
        match (self.m.get(k), self.model.get(&k)) {
            (Ok(got), Some(want)) => prop_assert!(got == want[..], "wrong bytes for {}", k),
            (Err(e), None) => prop_assert_eq!(e.kind, ErrorKind::NotFound),
            (got, want) => prop_assert!(false, "{}: got {:?}, model has {:?} bytes", k, got, want.map(|v| v.len())),
        }
        Ok(())
    }

    fn write_ranges(&mut self, k: ChunkKey, ranges: Vec<(u16, u16, u8)>) -> Result<(), TestCaseError> {
        let len = self.model.get(&k).map_or(16 * KIB, |v| v.len() as u64);
        // Offsets spread over the chunk; lengths may run past its end.
        let ranges: Vec<(u64, Vec<u8>)> =
            ranges.into_iter().map(|(at, n, b)| (u64::from(at) * len / 65536, vec![b; usize::from(n)])).collect();
        let past_end = ranges.iter().any(|(off, b)| off + b.len() as u64 > len);
        let refs: Vec<(u64, &[u8])> = ranges.iter().map(|(o, b)| (*o, &b[..])).collect();
        let s = self.m.stats();
        match (self.m.write_ranges(k, &refs), self.model.get_mut(&k)) {
            (Ok(()), Some(v)) => {
                prop_assert!(!past_end);
                for (off, b) in &ranges {
                    v[*off as usize..*off as usize + b.len()].copy_from_slice(b);
                }
            }
            (Err(e), None) => prop_assert_eq!(e.kind, ErrorKind::NotFound),
            (Err(e), Some(_)) if past_end => prop_assert_eq!(e.kind, ErrorKind::InvalidArgument),
            // A DISK chunk comes back whole; with both tiers full that can fail.
            (Err(e), Some(_)) => prop_assert!(e.kind == ErrorKind::PoolFull, "{} ({:?})", e, s),
            (Ok(()), None) => prop_assert!(false, "wrote into absent chunk {}", k),
        }
        Ok(())
    }

    /// Spills: every live chunk reaches DISK unless DISK ran out of room,
    /// reclaimable MEM chunks are dropped, writes are refused; then restarts.
    fn stop_and_restart(&mut self) -> Result<(), TestCaseError> {
        let done = self.m.close_and_spill(&|_| {}).unwrap();
        self.m.check_invariants();
        let k = key(99, 0);
        let refused = self.m.put(k, chunk(10, 1), crc32c::crc32c(&chunk(10, 1)), attrs(3, false)).unwrap_err();
        prop_assert_eq!(refused.kind, ErrorKind::Unavailable);
        let s = self.m.stats();
        prop_assert_eq!((s.mem_chunks, s.mem_used), (done.left_chunks, done.left_bytes));
        if !done.stuck {
            prop_assert_eq!(s.mem_chunks, 0);
            for k in self.model.keys() {
                if !self.reclaimable.contains(k) {
                    prop_assert_eq!(self.m.locate(*k), Some(TierKind::Disk), "{} spilled", k);
                }
            }
        }
        self.restart();
        Ok(())
    }

    fn restart(&mut self) {
        let m = &self.m;
        self.model.retain(|k, _| m.locate(*k) == Some(TierKind::Disk));
        self.reclaimable.clear();
        let cfg = config(self.dir.path(), self.mem, self.disk, 2);
        self.m = TierManager::open(cfg).unwrap();
    }

    fn check(&self) -> Result<(), TestCaseError> {
        self.m.check_invariants();
        let s = self.m.stats();
        prop_assert!(s.mem_used <= self.mem && s.disk_used <= self.disk, "{:?}", s);
        prop_assert_eq!(s.mem_chunks + s.disk_chunks, self.model.len() as u64);
        prop_assert_eq!(s.mem_used + s.disk_used, self.model.values().map(|v| v.len() as u64).sum::<u64>());
        prop_assert_eq!(s.reclaimable_chunks, self.reclaimable.len() as u64);
        let (reclaimable_mem, reclaimable_disk) = self.reclaimable_bytes();
        prop_assert_eq!(s.reclaimable_bytes, reclaimable_mem + reclaimable_disk);
        for k in self.model.keys() {
            prop_assert_eq!(self.m.is_reclaimable(*k), self.reclaimable.contains(k), "mark of {}", k);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Budgets are the suggested 64 KiB and 256 KiB, or tight ones where
    /// victims often do not fit on DISK.
    #[test]
    fn tiers_behave_like_a_map(
        mem in prop::sample::select(vec![64 * KIB, 20 * KIB]),
        disk in prop::sample::select(vec![256 * KIB, 48 * KIB]),
        ops in prop::collection::vec(op(), 1..250),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let m = TierManager::open(config(dir.path(), mem, disk, 2)).unwrap();
        let mut h = Harness { mem, disk, dir, m, model: BTreeMap::new(), reclaimable: BTreeSet::new() };
        for op in ops {
            h.apply(op)?;
        }
        // Reads may promote, and so drop reclaimable chunks: each is an op.
        for k in h.model.keys().copied().collect::<Vec<_>>() {
            if h.model.contains_key(&k) {
                h.apply(Op::Get { inode: k.inode.0, index: k.index })?;
            }
        }
    }
}
