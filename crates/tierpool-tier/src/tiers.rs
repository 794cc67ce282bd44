//! The state behind `TierManager`'s lock: both stores, the eviction index of
//! MEM, per-inode attributes, and the moves between tiers.
//!
//! Invariants (checked by `check_invariants` in tests):
//! - a key is in at most one tier;
//! - `mem.used() <= mem_budget` and `disk.used() <= disk_budget`, always;
//! - the eviction index holds exactly the MEM chunks, with their sizes.
//!
//! Every multi-step change is staged then committed: DISK files are written
//! first (`stage`), old files unlinked next, and only then are the in-memory
//! indexes changed, which cannot fail. A failed write or unlink therefore
//! changes nothing the caller can see (a staged file is discarded). The budget
//! check counts the space the change frees, so physical disk use may exceed
//! the budget by the files of one change while it is in flight; the accounted
//! use never does.

use crate::config::{TierConfig, TierKind};
use crate::eviction::{EvictionIndex, Rank};
use crate::stats::TierStats;
use crate::store::{ChunkStore, DiskStore, MemStore, ReadTicket, Staged};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use tierpool_types::{ByteSize, Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};

/// Where `lookup` found a chunk.
pub(crate) enum Lookup {
    Mem(Bytes),
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
    evict: EvictionIndex,
    attrs: HashMap<InodeId, ChunkAttrs>,
    /// Use counter: the `last_use` of eviction ranks.
    clock: u64,
    demotions: u64,
    promotions: u64,
}

impl Tiers {
    pub fn open(cfg: &TierConfig) -> Result<Tiers> {
        let disk = DiskStore::open(&cfg.disk_dir, cfg.disk_budget)?;
        Ok(Tiers {
            mem_budget: cfg.mem_budget,
            disk_budget: cfg.disk_budget,
            promote_after_reads: cfg.promote_after_reads.max(1),
            mem: MemStore::new(),
            disk,
            evict: EvictionIndex::new(),
            attrs: HashMap::new(),
            clock: 0,
            demotions: 0,
            promotions: 0,
        })
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn attrs_of(&self, inode: InodeId) -> ChunkAttrs {
        self.attrs.get(&inode).copied().unwrap_or_default()
    }

    fn mem_free(&self) -> u64 {
        self.mem_budget - self.mem.used()
    }

    fn disk_free(&self) -> u64 {
        self.disk_budget - self.disk.used()
    }

    /// Finds a chunk; a MEM hit counts as a use.
    pub fn lookup(&mut self, key: ChunkKey) -> Lookup {
        if let Some(data) = self.mem.data(key) {
            let now = self.tick();
            self.evict.touch(key, now);
            return Lookup::Mem(data);
        }
        self.disk.ticket(key).map_or(Lookup::Absent, Lookup::Disk)
    }

    /// The generation of the chunk's DISK file, if it is on DISK.
    pub fn disk_gen(&self, key: ChunkKey) -> Option<u64> {
        self.disk.entry(key).map(|e| e.gen)
    }

    /// Stores a new chunk version. Versions are write-once: if the key is
    /// stored already, the same length and checksum is a success that changes
    /// nothing, anything else is refused with `AlreadyExists`.
    /// `checksum` must be the CRC-32C of `data` (the manager checks it).
    pub fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        match self.stored(key) {
            None => self.store(key, data, checksum, attrs),
            Some((len, sum)) if len == data.len() as u64 && sum == checksum => Ok(()),
            Some((len, sum)) => Err(Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "chunk {key} is already stored with other bytes ({len} bytes, crc {sum:08x}; this put has {} bytes, crc {checksum:08x}); chunk versions are write-once",
                    data.len()
                ),
            )),
        }
    }

    /// Length and checksum of the stored chunk, if any.
    fn stored(&mut self, key: ChunkKey) -> Option<(u64, Checksum)> {
        if let Some((data, sum)) = self.mem.peek(key) {
            return Some((data.len() as u64, sum));
        }
        self.disk.entry(key).map(|e| (e.len, e.checksum))
    }

    /// Stores a chunk, replacing any stored value of the key: the way of
    /// range writes and zeroed chunks, whose chunks change in place.
    pub fn store(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        let rank = Rank::new(attrs, self.tick());
        if !self.put_mem(key, &data, checksum, rank)? && !self.put_disk(key, &data, checksum)? {
            return Err(self.pool_full(key, data.len()));
        }
        if self.attrs.get(&key.inode) != Some(&attrs) {
            self.set_attrs(key.inode, attrs);
        }
        Ok(())
    }

    /// Puts the chunk in MEM, demoting victims to DISK; `Ok(false)` if it
    /// cannot fit (then nothing changed).
    fn put_mem(&mut self, key: ChunkKey, data: &Bytes, checksum: Checksum, rank: Rank) -> Result<bool> {
        let len = data.len() as u64;
        if len > self.mem_budget {
            return Ok(false);
        }
        let old_mem = self.mem.meta_len(key).unwrap_or(0);
        let old_disk = self.disk.entry(key).map_or(0, |e| e.len);
        let Some(victims) = self.evict.plan(len, self.mem_free() + old_mem, Some(key), None) else {
            return Ok(false);
        };
        if self.bytes_of(&victims) > self.disk_free() + old_disk {
            return Ok(false);
        }
        let staged = self.stage_victims(&victims)?;
        if let Err(e) = self.disk.remove(key) {
            self.discard(staged);
            return Err(e);
        }
        self.commit_victims(staged);
        self.mem.put(key, data.clone(), checksum)?;
        self.evict.insert(key, rank, len);
        Ok(true)
    }

    /// Writes the chunk straight to DISK; `Ok(false)` if it cannot fit.
    fn put_disk(&mut self, key: ChunkKey, data: &[u8], checksum: Checksum) -> Result<bool> {
        let old_disk = self.disk.entry(key).map_or(0, |e| e.len);
        if data.len() as u64 > self.disk_free() + old_disk {
            return Ok(false);
        }
        let staged = self.disk.stage(key, data, checksum)?;
        if let Err(e) = self.disk.remove(key) {
            self.disk.discard(staged);
            return Err(e);
        }
        self.mem.take(key);
        self.evict.remove(key);
        self.disk.commit(staged);
        Ok(true)
    }

    fn pool_full(&self, key: ChunkKey, len: usize) -> Error {
        Error::new(
            ErrorKind::PoolFull,
            format!(
                "pool full: worker memory ({} of {} used) and disk ({} of {} used) cannot hold chunk {key} of {len} bytes",
                ByteSize(self.mem.used()),
                ByteSize(self.mem_budget),
                ByteSize(self.disk.used()),
                ByteSize(self.disk_budget),
            ),
        )
    }

    fn bytes_of(&self, mem_keys: &[ChunkKey]) -> u64 {
        mem_keys.iter().filter_map(|k| self.mem.meta_len(*k)).sum()
    }

    /// Writes DISK files for MEM chunks about to be demoted. On error every
    /// file written so far is discarded and nothing has changed.
    fn stage_victims(&mut self, victims: &[ChunkKey]) -> Result<Vec<Staged>> {
        let mut staged = Vec::with_capacity(victims.len());
        for &key in victims {
            let Some((data, checksum)) = self.mem.peek(key) else {
                self.discard(staged);
                return Err(Error::internal(format!("eviction victim {key} is not in memory")));
            };
            match self.disk.stage(key, &data, checksum) {
                Ok(s) => staged.push(s),
                Err(e) => {
                    self.discard(staged);
                    return Err(e.context(format!("demoting chunk {key} to disk")));
                }
            }
        }
        Ok(staged)
    }

    fn discard(&self, staged: Vec<Staged>) {
        for s in staged {
            self.disk.discard(s);
        }
    }

    /// Moves staged victims from MEM to DISK in the indexes (cannot fail).
    fn commit_victims(&mut self, staged: Vec<Staged>) {
        for s in staged {
            let key = s.key();
            self.mem.take(key);
            self.evict.remove(key);
            self.disk.commit(s);
            self.demotions += 1;
            tracing::trace!(chunk = %key, "demoted to disk");
        }
    }

    /// Counts a DISK read of generation `gen` and promotes the chunk when it
    /// has been read often enough and fits. Promotion is opportunistic: a
    /// failure is logged and the chunk stays on DISK.
    pub fn after_disk_read(&mut self, key: ChunkKey, gen: u64, data: &Bytes) {
        let Some(reads) = self.disk.count_read(key, gen) else { return };
        if reads < self.promote_after_reads {
            return;
        }
        if let Err(e) = self.promote(key, gen, data) {
            tracing::warn!(chunk = %key, "promotion to memory failed, chunk stays on disk: {e}");
        }
    }

    /// Moves a DISK chunk to MEM if room can be made by demoting only chunks
    /// ranked below it; `Ok(false)` if not.
    fn promote(&mut self, key: ChunkKey, gen: u64, data: &Bytes) -> Result<bool> {
        let Some(entry) = self.disk.entry(key).filter(|e| e.gen == gen) else { return Ok(false) };
        if entry.len > self.mem_budget || data.len() as u64 != entry.len {
            return Ok(false);
        }
        let rank = Rank::new(self.attrs_of(key.inode), self.tick());
        let Some(victims) = self.evict.plan(entry.len, self.mem_free(), None, Some(rank)) else {
            return Ok(false);
        };
        if self.bytes_of(&victims) > self.disk_free() + entry.len {
            return Ok(false);
        }
        let staged = self.stage_victims(&victims)?;
        if let Err(e) = self.disk.remove(key) {
            self.discard(staged);
            return Err(e);
        }
        self.commit_victims(staged);
        self.mem.put(key, data.clone(), entry.checksum)?;
        self.evict.insert(key, rank, entry.len);
        self.promotions += 1;
        tracing::trace!(chunk = %key, "promoted to memory");
        Ok(true)
    }

    /// Overwrites byte ranges of a stored chunk: in place in MEM; a DISK chunk
    /// is read (and verified), changed and put back as a whole, to MEM if it
    /// fits there. `NotFound` if absent, `InvalidArgument` past its end.
    pub fn write_ranges(&mut self, key: ChunkKey, ranges: &[(u64, &[u8])]) -> Result<()> {
        let len = match (self.mem.meta_len(key), self.disk.entry(key)) {
            (Some(len), _) => len,
            (None, Some(e)) => e.len,
            (None, None) => return Err(crate::store::not_found(key)),
        };
        if let Some((off, b)) =
            ranges.iter().find(|(off, b)| off.checked_add(b.len() as u64).is_none_or(|end| end > len))
        {
            return Err(Error::invalid(format!(
                "chunk {key}: bytes {off}..{} are past its end ({len} bytes)",
                off + b.len() as u64
            )));
        }
        if self.mem.write_at(key, ranges) {
            let now = self.tick();
            self.evict.touch(key, now);
            return Ok(());
        }
        let ticket = self.disk.ticket(key).ok_or_else(|| crate::store::not_found(key))?;
        let old = DiskStore::read(&ticket)?;
        let mut data = BytesMut::from(&old[..]);
        for (off, b) in ranges {
            data[*off as usize..*off as usize + b.len()].copy_from_slice(b);
        }
        let data = data.freeze();
        let checksum = crc32c::crc32c(&data);
        self.store(key, data, checksum, self.attrs_of(key.inode))
    }

    pub fn locate(&self, key: ChunkKey) -> Option<TierKind> {
        if self.mem.contains(key) {
            Some(TierKind::Mem)
        } else {
            self.disk.entry(key).map(|_| TierKind::Disk)
        }
    }

    pub fn delete(&mut self, key: ChunkKey) -> Result<bool> {
        if self.mem.take(key).is_some() {
            self.evict.remove(key);
            return Ok(true);
        }
        Ok(self.disk.remove(key)?.is_some())
    }

    pub fn delete_inodes(&mut self, inodes: &[InodeId]) -> Result<u64> {
        let mut n = 0;
        for &inode in inodes {
            for key in self.mem.keys_of(inode) {
                self.mem.take(key);
                self.evict.remove(key);
                n += 1;
            }
            n += self.disk.delete_inode(inode)?;
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

    pub fn stats(&self) -> TierStats {
        TierStats {
            mem_capacity: self.mem_budget,
            mem_used: self.mem.used(),
            mem_chunks: self.mem.len(),
            disk_capacity: self.disk_budget,
            disk_used: self.disk.used(),
            disk_chunks: self.disk.len(),
            demotions: self.demotions,
            promotions: self.promotions,
        }
    }

    #[cfg(test)]
    pub fn check_invariants(&self) {
        assert!(self.mem.used() <= self.mem_budget, "mem {} > {}", self.mem.used(), self.mem_budget);
        assert!(self.disk.used() <= self.disk_budget, "disk {} > {}", self.disk.used(), self.disk_budget);
        assert_eq!(self.evict.len() as u64, self.mem.len());
        assert_eq!(self.evict.total_size(), self.mem.used());
        for (key, _) in self.evict.victims() {
            assert!(self.mem.contains(key) && self.disk.entry(key).is_none(), "{key} in both tiers");
        }
    }
}
