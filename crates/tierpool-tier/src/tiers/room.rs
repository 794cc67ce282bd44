//! Puts, range writes and promotions of `Tiers`: the changes that need room,
//! made by carrying out a plan of `eviction::plan_mem` (or, for DISK alone,
//! of the DISK reclaim queue).
//!
//! Carrying out a plan, in this order: unlink the reclaimable DISK chunks it
//! drops (their space must be free before anything is written), write the
//! files of the demoted chunks (`stage`), unlink the old DISK file of the key
//! being written, then change the indexes (drop reclaimable MEM chunks,
//! commit the demotions, insert the key), which cannot fail. An error before
//! the last step discards the staged files: the demoted chunks stay in MEM,
//! the old value of the key stays where it was. Every chunk file is written
//! through `DiskStore::stage`, and every write error through
//! `Tiers::write_failed`, which turns ENOSPC into the disk-full cap.

use super::Tiers;
use crate::eviction::{plan_mem, Marked, MemRequest, MemRoom, Rank};
use crate::store::{not_found, ChunkStore, DiskStore, Staged};
use bytes::{Bytes, BytesMut};
use tierpool_types::{ByteSize, Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, Result};

impl Tiers {
    /// Stores a new chunk version. Versions are write-once: if the key is
    /// stored already, the same length and checksum is a success that changes
    /// nothing (not even a reclaimable mark), anything else is refused with
    /// `AlreadyExists`. `checksum` must be the CRC-32C of `data` (the manager
    /// checks it).
    pub fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        self.check_open()?;
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

    /// [`put`](Self::put) if it needs no DISK I/O: the key is stored
    /// already (such a put writes nothing), or MEM has room for the chunk,
    /// free or held by reclaimable MEM chunks. `None`, with nothing
    /// changed, if it would need DISK (a demotion, a DISK file).
    pub fn put_without_disk(
        &mut self,
        key: ChunkKey,
        data: &Bytes,
        checksum: Checksum,
        attrs: ChunkAttrs,
    ) -> Option<Result<()>> {
        if self.stored(key).is_none() && !self.mem_room_without_disk(key, data.len() as u64) {
            return None;
        }
        Some(self.put(key, data.clone(), checksum, attrs))
    }

    /// Whether a new chunk of `len` bytes fits in MEM without DISK I/O:
    /// the plan `put_mem` would carry out demotes nothing and unlinks nothing.
    fn mem_room_without_disk(&self, key: ChunkKey, len: u64) -> bool {
        if len > self.mem_budget || self.disk.entry(key).is_some() {
            return false;
        }
        if len <= self.mem_free() {
            return true;
        }
        let req = MemRequest {
            need: len,
            mem_free: self.mem_free(),
            disk_free: self.disk_free(),
            exclude: Some(key),
            below: None,
        };
        matches!(plan_mem(&self.evict, &self.reclaim_mem, &self.reclaim_disk, &req),
            Some(room) if room.demote.is_empty() && room.drop_disk.is_empty())
    }

    /// Length and checksum of the stored chunk, if any.
    fn stored(&mut self, key: ChunkKey) -> Option<(u64, Checksum)> {
        if let Some((data, sum)) = self.mem.peek(key) {
            return Some((data.len() as u64, sum));
        }
        self.disk.entry(key).map(|e| (e.len, e.checksum))
    }

    /// Stores a chunk, replacing any stored value of the key (keeping its
    /// reclaimable mark): the way of range writes and zeroed chunks, whose
    /// chunks change in place.
    pub fn store(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        self.check_open()?;
        let rank = Rank::new(attrs, self.tick());
        if !self.put_mem(key, &data, checksum, rank)? && !self.put_disk(key, &data, checksum)? {
            return Err(self.pool_full(key, data.len()));
        }
        if self.attrs.get(&key.inode) != Some(&attrs) {
            self.set_attrs(key.inode, attrs);
        }
        Ok(())
    }

    /// Puts the chunk in MEM, dropping reclaimable chunks and demoting live
    /// ones to make room; `Ok(false)` if it cannot fit (then nothing changed).
    fn put_mem(&mut self, key: ChunkKey, data: &Bytes, checksum: Checksum, rank: Rank) -> Result<bool> {
        let len = data.len() as u64;
        if len > self.mem_budget {
            return Ok(false);
        }
        let old_mem = self.mem.meta_len(key).unwrap_or(0);
        let old_disk = self.disk.entry(key).map_or(0, |e| e.len);
        let req = MemRequest {
            need: len,
            mem_free: self.mem_free() + old_mem,
            disk_free: self.disk_free() + self.freed_after_writes(old_disk),
            exclude: Some(key),
            below: None,
        };
        let Some(room) = plan_mem(&self.evict, &self.reclaim_mem, &self.reclaim_disk, &req) else {
            return Ok(false);
        };
        self.carry_out(&room, key)?;
        self.mem.put(key, data.clone(), checksum)?;
        self.index_mem(key, rank, len);
        Ok(true)
    }

    /// Writes the chunk straight to DISK, dropping reclaimable DISK chunks to
    /// make room; `Ok(false)` if it cannot fit.
    fn put_disk(&mut self, key: ChunkKey, data: &[u8], checksum: Checksum) -> Result<bool> {
        let len = data.len() as u64;
        let old_disk = self.disk.entry(key).map_or(0, |e| e.len);
        let free = self.disk_free() + self.freed_after_writes(old_disk);
        let Some(drops) = self.reclaim_disk.plan(len, free, Some(key)) else {
            return Ok(false);
        };
        for k in drops {
            self.drop_disk(k)?;
        }
        let staged = self.disk.stage(key, data, checksum).map_err(|e| self.write_failed(e))?;
        if let Err(e) = self.disk.remove(key) {
            self.disk.discard(staged);
            return Err(e);
        }
        self.mem.take(key);
        self.disk.commit(staged);
        self.index_disk(key, len);
        Ok(true)
    }

    /// Makes the room of `room` and frees the old DISK file of `key`, or
    /// changes nothing but the dropped reclaimable DISK chunks.
    fn carry_out(&mut self, room: &MemRoom, key: ChunkKey) -> Result<()> {
        for &k in &room.drop_disk {
            self.drop_disk(k)?;
        }
        let staged = self.stage_victims(&room.demote)?;
        if let Err(e) = self.disk.remove(key) {
            self.discard(staged);
            return Err(e);
        }
        for &k in &room.drop_mem {
            self.mem.take(k);
            self.reclaim_mem.remove(k);
            self.reclaimed += 1;
            tracing::trace!(chunk = %k, "dropped reclaimable chunk from memory");
        }
        self.commit_victims(staged);
        Ok(())
    }

    /// The DISK room a change may count on from the old file of its key,
    /// `len` bytes, unlinked only after the change's writes: all of it
    /// normally (the budget is an accounting limit), none while the disk is
    /// full (the writes would need that space before it is freed).
    fn freed_after_writes(&self, len: u64) -> u64 {
        if self.disk_is_full() {
            0
        } else {
            len
        }
    }

    /// Deletes a reclaimable DISK chunk to make room.
    pub(super) fn drop_disk(&mut self, key: ChunkKey) -> Result<()> {
        self.disk.remove(key)?;
        self.reclaim_disk.remove(key);
        self.reclaimed += 1;
        tracing::trace!(chunk = %key, "dropped reclaimable chunk from disk");
        Ok(())
    }

    /// Indexes a chunk just put in MEM: reclaimable if it was (keeping its
    /// place in drop order), else live.
    fn index_mem(&mut self, key: ChunkKey, rank: Rank, size: u64) {
        match self.reclaim_disk.remove(key).or_else(|| self.reclaim_mem.remove(key)) {
            Some(m) => self.reclaim_mem.insert(key, Marked { size, ..m }),
            None => self.evict.insert(key, rank, size),
        }
    }

    /// Indexes a chunk just put on DISK (and gone from MEM).
    pub(super) fn index_disk(&mut self, key: ChunkKey, size: u64) {
        self.evict.remove(key);
        if let Some(m) = self.reclaim_mem.remove(key).or_else(|| self.reclaim_disk.remove(key)) {
            self.reclaim_disk.insert(key, Marked { size, ..m });
        }
    }

    pub(super) fn pool_full(&self, key: ChunkKey, len: usize) -> Error {
        let full = if self.disk_is_full() {
            format!("; the disk under {} is out of space", self.disk.root().display())
        } else {
            String::new()
        };
        Error::new(
            ErrorKind::PoolFull,
            format!(
                "pool full: worker memory ({} of {} used) and disk ({} of {} used{full}) cannot hold chunk {key} of {len} bytes",
                ByteSize(self.mem.used()),
                ByteSize(self.mem_budget),
                ByteSize(self.disk.used()),
                ByteSize(self.disk_budget),
            ),
        )
    }

    /// Writes DISK files for MEM chunks about to be demoted. On error every
    /// file written so far is discarded and nothing has changed.
    pub(super) fn stage_victims(&mut self, victims: &[ChunkKey]) -> Result<Vec<Staged>> {
        let mut staged = Vec::with_capacity(victims.len());
        for &key in victims {
            let Some((data, checksum)) = self.mem.peek(key) else {
                self.discard(staged);
                return Err(Error::internal(format!("eviction victim {key} is not in memory")));
            };
            match self.disk.stage(key, &data, checksum) {
                Ok(s) => staged.push(s),
                Err(e) if e.kind == ErrorKind::PoolFull => {
                    self.discard(staged);
                    return Err(self.write_failed(e));
                }
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
    pub(super) fn commit_victims(&mut self, staged: Vec<Staged>) {
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
        if reads < self.promote_after_reads || self.closed {
            return;
        }
        if let Err(e) = self.promote(key, gen, data) {
            tracing::warn!(chunk = %key, "promotion to memory failed, chunk stays on disk: {e}");
        }
    }

    /// Moves a live DISK chunk to MEM if room can be made by dropping
    /// reclaimable chunks and demoting only live chunks ranked below it;
    /// `Ok(false)` if not. Reclaimable chunks are never promoted.
    fn promote(&mut self, key: ChunkKey, gen: u64, data: &Bytes) -> Result<bool> {
        let Some(entry) = self.disk.entry(key).filter(|e| e.gen == gen) else { return Ok(false) };
        if entry.len > self.mem_budget || data.len() as u64 != entry.len || self.reclaim_disk.contains(key) {
            return Ok(false);
        }
        let rank = Rank::new(self.attrs_of(key.inode), self.tick());
        let req = MemRequest {
            need: entry.len,
            mem_free: self.mem_free(),
            disk_free: self.disk_free() + self.freed_after_writes(entry.len),
            exclude: Some(key),
            below: Some(rank),
        };
        let Some(room) = plan_mem(&self.evict, &self.reclaim_mem, &self.reclaim_disk, &req) else {
            return Ok(false);
        };
        self.carry_out(&room, key)?;
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
        self.check_open()?;
        let len = match (self.mem.meta_len(key), self.disk.entry(key)) {
            (Some(len), _) => len,
            (None, Some(e)) => e.len,
            (None, None) => return Err(not_found(key)),
        };
        if let Some((off, b)) =
            ranges.iter().find(|(off, b)| off.checked_add(b.len() as u64).is_none_or(|end| end > len))
        {
            return Err(Error::invalid(format!(
                "chunk {key}: bytes {off}..{} are past its end ({len} bytes)",
                off.saturating_add(b.len() as u64)
            )));
        }
        if self.mem.write_at(key, ranges) {
            let now = self.tick();
            self.evict.touch(key, now);
            return Ok(());
        }
        let ticket = self.disk.ticket(key).ok_or_else(|| not_found(key))?;
        let old = DiskStore::read(&ticket)?;
        let mut data = BytesMut::from(&old[..]);
        for (off, b) in ranges {
            data[*off as usize..*off as usize + b.len()].copy_from_slice(b);
        }
        let data = data.freeze();
        let checksum = crc32c::crc32c(&data);
        self.store(key, data, checksum, self.attrs_of(key.inode))
    }
}
