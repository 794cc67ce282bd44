//! The state behind `TierManager`'s lock: both stores, the eviction index of
//! live MEM chunks, the reclaimable queues of both tiers, per-inode
//! attributes; the moves between tiers are in `room`.
//!
//! Invariants (checked by `check_invariants` in tests):
//! - a key is in at most one tier;
//! - `mem.used() <= mem_budget` and `disk.used() <= disk_budget()`, always
//!   (the DISK budget in force: capped at what the tier held while its file
//!   system is out of space, see `disk_full`);
//! - the eviction index holds exactly the live MEM chunks, `reclaim_mem`
//!   exactly the reclaimable MEM chunks and `reclaim_disk` exactly the
//!   reclaimable DISK chunks, each with its size: so `mem.used()` is the sum
//!   of the index's and `reclaim_mem`'s sizes.
//!
//! Reclaimable chunks are still stored and counted in `used`; `used` minus
//! the reclaimable bytes is what live data takes. Marks live in memory only:
//! after a restart every chunk is live until it is deleted or marked again.
//!
//! Every multi-step change is staged then committed (see `room`): DISK files
//! are written first, old files unlinked next, and only then are the
//! in-memory indexes changed, which cannot fail. A failed write or unlink
//! therefore changes nothing the caller can see, except that reclaimable
//! DISK chunks the change dropped to make room stay dropped (they are unlinked
//! before the writes, so that their space is really free; they were garbage
//! waiting for deletion). The budget check counts the space the change frees,
//! so physical disk use may exceed the budget by the files of one change while
//! it is in flight; the accounted use never does.
//!
//! A chunk file write that fails with ENOSPC fails its change with `PoolFull`
//! ("pool full: the disk under ... is out of space") and caps the DISK budget
//! at what the tier holds (`disk_full`): later changes that need more DISK
//! room fail at once, without writing. Deleting DISK chunks lifts the cap, as
//! does the passing of `disk_full_retry`.

mod room;
mod spill;

pub use spill::Spill;

use crate::config::{TierConfig, TierKind};
use crate::disk_full::{self, DiskFull};
use crate::eviction::{EvictionIndex, Marked, ReclaimQueue};
use crate::stats::TierStats;
use crate::store::{ChunkStore, DiskStore, MemStore, ReadTicket};
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};
use tierpool_types::{ByteSize, Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};

/// Where `lookup` found a chunk.
pub(crate) enum Lookup {
    /// Its bytes, and its checksum if MEM knows it (see `MemStore::data`).
    Mem(Bytes, Option<Checksum>),
    Disk(ReadTicket),
    Absent,
}

#[derive(Debug)]
pub(crate) struct Tiers {
    mem_budget: u64,
    disk_budget: u64,
    promote_after_reads: u32,
    mem: MemStore,
    disk: DiskStore,
    /// Live MEM chunks, in eviction order.
    evict: EvictionIndex,
    /// Reclaimable MEM chunks, in drop order.
    reclaim_mem: ReclaimQueue,
    /// Reclaimable DISK chunks, in drop order.
    reclaim_disk: ReclaimQueue,
    attrs: HashMap<InodeId, ChunkAttrs>,
    /// Use counter: the `last_use` of eviction ranks and the `seq` of marks.
    clock: u64,
    demotions: u64,
    promotions: u64,
    reclaimed: u64,
    /// Set while the DISK file system is believed out of space.
    disk_full: DiskFull,
    /// How long a full disk is believed full without a delete.
    disk_full_retry: Duration,
    /// Set by `close`: stored bytes change no more.
    closed: bool,
}

impl Tiers {
    pub fn open(cfg: &TierConfig) -> Result<Tiers> {
        let disk = DiskStore::open(&cfg.disk_dir, cfg.disk_budget.0)?;
        Ok(Tiers {
            mem_budget: cfg.mem_budget.0,
            disk_budget: cfg.disk_budget.0,
            promote_after_reads: cfg.promote_after_reads.max(1),
            mem: MemStore::new(),
            disk,
            evict: EvictionIndex::new(),
            reclaim_mem: ReclaimQueue::new(),
            reclaim_disk: ReclaimQueue::new(),
            attrs: HashMap::new(),
            clock: 0,
            demotions: 0,
            promotions: 0,
            reclaimed: 0,
            disk_full: DiskFull::default(),
            disk_full_retry: disk_full::RETRY,
            closed: false,
        })
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    pub(crate) fn attrs_of(&self, inode: InodeId) -> ChunkAttrs {
        self.attrs.get(&inode).copied().unwrap_or_default()
    }

    fn mem_free(&self) -> u64 {
        self.mem_budget - self.mem.used()
    }

    /// The DISK budget in force: the configured one, or less while the disk is full.
    fn disk_budget(&self) -> u64 {
        self.disk_full.budget(self.disk_budget, Instant::now(), self.disk_full_retry)
    }

    fn disk_is_full(&self) -> bool {
        self.disk_full.cap(Instant::now(), self.disk_full_retry).is_some()
    }

    fn disk_free(&self) -> u64 {
        self.disk_budget().saturating_sub(self.disk.used())
    }

    /// Turns the error of a failed chunk file write into the caller's: an
    /// out-of-space error caps the DISK tier at what it holds and says so.
    fn write_failed(&mut self, e: Error) -> Error {
        if e.kind != ErrorKind::PoolFull {
            return e;
        }
        let held = self.disk.used();
        self.disk_full.engage(held, Instant::now());
        let msg = format!(
            "pool full: {}; {} of chunks stored, budget {}",
            e.message,
            ByteSize(held),
            ByteSize(self.disk_budget)
        );
        tracing::warn!("{msg}; disk tier capped at what it holds until chunks are deleted");
        Error::new(ErrorKind::PoolFull, msg)
    }

    #[cfg(test)]
    pub fn set_disk_full_retry(&mut self, retry: Duration) {
        self.disk_full_retry = retry;
    }

    /// Finds a chunk; a MEM hit counts as a use.
    pub fn lookup(&mut self, key: ChunkKey) -> Lookup {
        if let Some((data, sum)) = self.mem.data(key) {
            let now = self.tick();
            self.evict.touch(key, now);
            return Lookup::Mem(data, sum);
        }
        self.disk.ticket(key).map_or(Lookup::Absent, Lookup::Disk)
    }

    /// The generation of the chunk's DISK file, if it is on DISK.
    pub fn disk_gen(&self, key: ChunkKey) -> Option<u64> {
        self.disk.entry(key).map(|e| e.gen)
    }

    /// Up to `limit` stored keys after `after`, in key order, both tiers
    /// merged (a key is in one tier only), with their lengths.
    pub fn keys_after(&self, after: Option<ChunkKey>, limit: usize) -> Vec<(ChunkKey, u64)> {
        let mut all = self.mem.keys_after(after, limit);
        all.extend(self.disk.keys_after(after, limit));
        all.sort_unstable_by_key(|(k, _)| *k);
        all.truncate(limit);
        all
    }

    pub fn locate(&self, key: ChunkKey) -> Option<TierKind> {
        if self.mem.contains(key) {
            Some(TierKind::Mem)
        } else {
            self.disk.entry(key).map(|_| TierKind::Disk)
        }
    }

    pub fn is_reclaimable(&self, key: ChunkKey) -> bool {
        self.reclaim_mem.contains(key) || self.reclaim_disk.contains(key)
    }

    /// Marks the stored chunks among `keys` reclaimable; returns how many
    /// distinct keys are stored (all of them reclaimable now).
    pub fn mark_reclaimable(&mut self, keys: &[ChunkKey]) -> u64 {
        let keys: BTreeSet<ChunkKey> = keys.iter().copied().collect();
        keys.into_iter().map(|k| u64::from(self.mark(k))).sum()
    }

    /// Marks every chunk of these inodes stored now reclaimable (chunks
    /// stored later are live); returns how many there are.
    pub fn mark_reclaimable_inodes(&mut self, inodes: &[InodeId]) -> u64 {
        let mut keys = BTreeSet::new();
        for &inode in inodes {
            keys.extend(self.mem.keys_of(inode));
            keys.extend(self.disk.keys_of(inode));
        }
        keys.into_iter().map(|k| u64::from(self.mark(k))).sum()
    }

    /// Moves a stored chunk out of eviction order into its tier's reclaim
    /// queue (a mark keeps its first place); `false` if absent.
    fn mark(&mut self, key: ChunkKey) -> bool {
        if self.is_reclaimable(key) {
            return true;
        }
        let seq = self.tick();
        if let Some(size) = self.mem.meta_len(key) {
            self.evict.remove(key);
            self.reclaim_mem.insert(key, Marked { seq, size });
        } else if let Some(e) = self.disk.entry(key) {
            self.reclaim_disk.insert(key, Marked { seq, size: e.len });
        } else {
            return false;
        }
        true
    }

    pub fn delete(&mut self, key: ChunkKey) -> Result<bool> {
        if self.mem.take(key).is_some() {
            self.evict.remove(key);
            self.reclaim_mem.remove(key);
            return Ok(true);
        }
        let found = self.disk.remove(key)?.is_some();
        self.reclaim_disk.remove(key);
        if found {
            self.disk_full.lift();
        }
        Ok(found)
    }

    pub fn delete_inodes(&mut self, inodes: &[InodeId]) -> Result<u64> {
        let mut n = 0;
        for &inode in inodes {
            for key in self.mem.keys_of(inode) {
                self.mem.take(key);
                self.evict.remove(key);
                self.reclaim_mem.remove(key);
                n += 1;
            }
            for key in self.disk.keys_of(inode) {
                self.disk.remove(key)?;
                self.reclaim_disk.remove(key);
                self.disk_full.lift();
                n += 1;
            }
            self.attrs.remove(&inode);
        }
        Ok(n)
    }

    pub fn set_attrs(&mut self, inode: InodeId, attrs: ChunkAttrs) {
        self.attrs.insert(inode, attrs);
        for key in self.mem.keys_of(inode) {
            self.evict.set_attrs(key, attrs);
        }
    }

    /// The listed inodes get their attributes, every other inode the default.
    pub fn replace_attrs(&mut self, all: &[(InodeId, ChunkAttrs)]) {
        let listed: HashMap<InodeId, ChunkAttrs> = all.iter().copied().collect();
        let stale: Vec<InodeId> = self.attrs.keys().filter(|i| !listed.contains_key(i)).copied().collect();
        for inode in stale {
            self.set_attrs(inode, ChunkAttrs::default());
        }
        for (inode, attrs) in listed {
            self.set_attrs(inode, attrs);
        }
    }

    pub fn stats(&self) -> TierStats {
        TierStats {
            mem_capacity: self.mem_budget,
            mem_used: self.mem.used(),
            mem_chunks: self.mem.len(),
            disk_capacity: self.disk_budget(),
            disk_used: self.disk.used(),
            disk_chunks: self.disk.len(),
            disk_full: self.disk_is_full(),
            reclaimable_bytes: self.reclaim_mem.total_size() + self.reclaim_disk.total_size(),
            reclaimable_chunks: (self.reclaim_mem.len() + self.reclaim_disk.len()) as u64,
            demotions: self.demotions,
            promotions: self.promotions,
            reclaimed: self.reclaimed,
        }
    }

    #[cfg(test)]
    pub fn check_invariants(&self) {
        assert!(self.mem.used() <= self.mem_budget, "mem {} > {}", self.mem.used(), self.mem_budget);
        assert!(self.disk.used() <= self.disk_budget(), "disk {} > {}", self.disk.used(), self.disk_budget());
        assert_eq!((self.evict.len() + self.reclaim_mem.len()) as u64, self.mem.len());
        assert_eq!(self.evict.total_size() + self.reclaim_mem.total_size(), self.mem.used());
        for (key, size) in self.evict.victims() {
            assert_eq!(self.mem.meta_len(key), Some(size), "live {key} in memory with its size");
            assert!(self.disk.entry(key).is_none() && !self.is_reclaimable(key), "{key} in two places");
        }
        for (key, size) in self.reclaim_mem.iter() {
            assert_eq!(self.mem.meta_len(key), Some(size), "reclaimable {key} in memory with its size");
            assert!(self.disk.entry(key).is_none() && !self.reclaim_disk.contains(key), "{key} in two places");
        }
        for (key, size) in self.reclaim_disk.iter() {
            assert_eq!(self.disk.entry(key).map(|e| e.len), Some(size), "reclaimable {key} on disk with its size");
        }
    }
}
