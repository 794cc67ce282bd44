//! `TierManager`: a worker's MEM and DISK tiers behind one lock.
//!
//! A put goes to MEM, demoting chunks to DISK in eviction order (see
//! `eviction`) to make room; a chunk that cannot fit in MEM goes straight to
//! DISK; when neither can hold it the put fails with `PoolFull` and nothing
//! stored before changes. Chunk versions are write-once: a put never replaces
//! a stored value (the same bytes again are a no-op, other bytes are refused
//! with `AlreadyExists`); only range writes and zeroed chunks of regions
//! change a stored chunk. A failed call (of any kind) leaves the previous
//! value of its key, if any, intact. DISK chunks read `promote_after_reads` times
//! move back to MEM when that needs demoting only chunks ranked below them.
//!
//! A DISK write that finds the file system out of space (ENOSPC) fails its
//! put with `PoolFull` and caps the DISK tier at what it holds, so that later
//! puts needing DISK room fail at once; deletes of DISK chunks, or 30 s, lift
//! the cap (see `disk_full`). Reads are not affected.
//!
//! Reclaimable chunks (`mark_reclaimable`) are versions the coordinator has
//! given up but not yet deleted: still readable, still counted as used, but
//! their space comes back at once. Any change that needs room drops them
//! first, before demoting a live chunk or answering `PoolFull`; a live chunk
//! is never dropped. `TierStats::reclaimable_bytes` says how much of `used`
//! they are.
//!
//! Clients' reads and writes also record when each inode was last used
//! (`last_use`, asked by the coordinator when it lets files of under-stores
//! go); copies for other workers and moves between tiers do not.
//!
//! Locking: one `parking_lot::Mutex` over all stored state (`Tiers`), and one
//! over the last uses, never taken while the first is held, so no lock order. Puts, deletes and promotions hold it across
//! their DISK writes and unlinks: that keeps demotion simple and atomic, at the
//! cost of serialising writers behind disk I/O. DISK reads do not hold it: a
//! get captures the file path and expected length and checksum under the lock
//! and reads outside it. DISK files are never rewritten in place (each write
//! has a new generation and name), so such a read sees the complete file it
//! expected or no file; if the file is gone it looks the key up again (it was
//! replaced, promoted or deleted meanwhile), so it never returns bytes of a
//! value other than one the key held during the call. A range write into a
//! DISK chunk reads the file under the lock: it rewrites the chunk anyway.
//!
//! For async callers that must not block, `try_put_in_mem` and
//! `try_get_in_mem` do the MEM-only cases (the common ones while MEM has
//! room): they wait at most `NO_WAIT` for the lock, do no DISK I/O under
//! it, and decline otherwise, changing nothing, so the caller can make the
//! blocking call on a thread allowed to block.

use crate::config::{TierConfig, TierKind};
use crate::last_use::LastUse;
use crate::reads::ReadPermits;
use crate::stats::TierStats;
use crate::store::{not_found, DiskStore};
use crate::tiers::{Lookup, Spill, Tiers};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};

/// Chunks a spill writes per hold of the lock.
const SPILL_STEP: usize = 4;

/// How many times a get follows a chunk that moves while it reads it.
const MAX_READ_RACES: usize = 16;

/// How long the calls that must not block (`try_*`) wait for the lock:
/// long enough for calls that touch MEM alone, far shorter than a DISK write.
pub const NO_WAIT: Duration = Duration::from_micros(50);

/// `Corrupt` unless `checksum` is the CRC-32C of `data`.
fn check_put(key: ChunkKey, data: &[u8], checksum: Checksum) -> Result<()> {
    let actual = crc32c::crc32c(data);
    if actual != checksum {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "chunk {key}: checksum mismatch: its {} bytes have crc {actual:08x}, the put says {checksum:08x}",
                data.len()
            ),
        ));
    }
    Ok(())
}

/// Thread-safe: every method takes `&self`.
pub struct TierManager {
    tiers: Mutex<Tiers>,
    reads: Arc<ReadPermits>,
    last_use: Mutex<LastUse>,
}

impl TierManager {
    /// Opens the tiers; DISK chunks left by an earlier run are indexed again
    /// (their bytes are verified on read), partial files are removed.
    pub fn open(cfg: TierConfig) -> Result<TierManager> {
        Ok(TierManager {
            tiers: Mutex::new(Tiers::open(&cfg)?),
            reads: ReadPermits::new(cfg.disk_reads),
            last_use: Mutex::default(),
        })
    }

    /// Stores a chunk version in MEM, demoting others to DISK to make room.
    ///
    /// Chunk versions are write-once: a put of a key already stored (in either
    /// tier) with the same length and checksum succeeds and changes nothing
    /// (a retried put); with other bytes it is refused with `AlreadyExists`.
    /// `Corrupt` if `checksum` is not the CRC-32C of `data`: no bytes are ever
    /// stored under a wrong checksum. `PoolFull` when neither tier can take
    /// it, or when writing to DISK found its file system out of space (then
    /// later puts that need DISK room fail at once until chunks are deleted
    /// or 30 s pass, see `TierStats::disk_full`); nothing stored before is
    /// lost.
    pub fn put(&self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        check_put(key, &data, checksum)?;
        self.tiers.lock().put(key, data, checksum, attrs)?;
        self.used(key.inode);
        Ok(())
    }

    /// [`put`](Self::put) if it can be done at once without DISK I/O (MEM
    /// has room, or the key is stored already). `None`, with nothing
    /// changed, if it would need DISK or the lock stays taken for more than
    /// `NO_WAIT` (it is held across DISK writes): then call `put` where
    /// blocking is allowed. For callers that must not block.
    pub fn try_put_in_mem(
        &self,
        key: ChunkKey,
        data: &Bytes,
        checksum: Checksum,
        attrs: ChunkAttrs,
    ) -> Option<Result<()>> {
        if let Err(e) = check_put(key, data, checksum) {
            return Some(Err(e));
        }
        let done = self.tiers.try_lock_for(NO_WAIT)?.put_without_disk(key, data, checksum, attrs);
        if let Some(Ok(())) = done {
            self.used(key.inode);
        }
        done
    }

    /// The chunk's bytes if they are in MEM and the lock is free within
    /// `NO_WAIT`; `None` otherwise (on DISK, absent, or the lock busy):
    /// then call [`get`](Self::get) where blocking is allowed.
    pub fn try_get_in_mem(&self, key: ChunkKey) -> Option<Bytes> {
        self.try_get_in_mem_summed(key).map(|(data, _)| data)
    }

    /// [`try_get_in_mem`](Self::try_get_in_mem), with the chunk's checksum
    /// as stored (given at its put), unless it changed in place since it
    /// was last computed. Serving that checksum rather than one of the
    /// bytes as they are now lets a reader catch bytes damaged in memory.
    pub fn try_get_in_mem_summed(&self, key: ChunkKey) -> Option<(Bytes, Option<Checksum>)> {
        let found = match self.tiers.try_lock_for(NO_WAIT)?.lookup(key) {
            Lookup::Mem(data, sum) => (data, sum),
            Lookup::Disk(_) | Lookup::Absent => return None,
        };
        self.used(key.inode);
        Some(found)
    }

    /// Stores a copy of a chunk taken from another worker (a partition
    /// moving here), replacing any value of the key, with the eviction
    /// attributes its inode has here. `Corrupt` if `checksum` is not the
    /// CRC-32C of `data`; `PoolFull` as for [`put`](Self::put).
    pub fn replace(&self, key: ChunkKey, data: Bytes, checksum: Checksum) -> Result<()> {
        let actual = crc32c::crc32c(&data);
        if actual != checksum {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("chunk {key}: a copy of {} bytes with crc {actual:08x}, expected {checksum:08x}", data.len()),
            ));
        }
        let mut t = self.tiers.lock();
        let attrs = t.attrs_of(key.inode);
        t.store(key, data, checksum, attrs)
    }

    /// The chunk's bytes. `NotFound` if absent; `Corrupt` if the DISK copy fails its checksum.
    pub fn get(&self, key: ChunkKey) -> Result<Bytes> {
        self.read(key, true)
    }

    /// [`get`](Self::get) for a copy to another worker: the read does not
    /// count toward promoting the chunk to MEM (a partition moving away
    /// must not displace what this worker keeps serving).
    pub fn get_for_copy(&self, key: ChunkKey) -> Result<Bytes> {
        self.read(key, false)
    }

    fn read(&self, key: ChunkKey, counts: bool) -> Result<Bytes> {
        let data = self.read_following_moves(key, counts)?;
        if counts {
            self.used(key.inode);
        }
        Ok(data)
    }

    fn read_following_moves(&self, key: ChunkKey, counts: bool) -> Result<Bytes> {
        for _ in 0..MAX_READ_RACES {
            let ticket = match self.tiers.lock().lookup(key) {
                Lookup::Mem(data, _) => return Ok(data),
                Lookup::Disk(ticket) => ticket,
                Lookup::Absent => return Err(not_found(key)),
            };
            let permit = self.reads.acquire();
            match DiskStore::read(&ticket) {
                Ok(data) => {
                    if counts {
                        self.tiers.lock().after_disk_read(key, ticket.gen, &data);
                    }
                    return Ok(crate::reads::hold(data, permit));
                }
                Err(e) if e.kind == ErrorKind::NotFound => {
                    if self.tiers.lock().disk_gen(key) == Some(ticket.gen) {
                        let msg = format!("chunk {key}: its file {} vanished from disk", ticket.path.display());
                        return Err(Error::new(ErrorKind::Io, msg));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::new(ErrorKind::Unavailable, format!("chunk {key} kept moving while being read; try again")))
    }

    /// A zero-filled chunk of `len` bytes, created unless `key` exists (then
    /// nothing changes): the space of a region, taken when it is allocated.
    /// `PoolFull` when neither tier can hold it.
    pub fn create_zeroed(&self, key: ChunkKey, len: u64, attrs: ChunkAttrs) -> Result<()> {
        let mut t = self.tiers.lock();
        if t.locate(key).is_some() {
            return Ok(());
        }
        let zeros = Bytes::from(vec![0u8; len as usize]);
        let checksum = crc32c::crc32c(&zeros);
        t.store(key, zeros, checksum, attrs)
    }

    /// Copies chunk `from` to `to` (replacing `to` if stored), unless the
    /// chunk stored at `unless` holds the same bytes as `from`. Returns
    /// `from`'s length and checksum and whether it copied. A copy of a
    /// chunk in MEM shares its buffer until either is written (a write
    /// copies first); one read from DISK is copied out of the read (whose
    /// bytes hold a DISK read permit until dropped). `NotFound` if `from`
    /// is absent; `PoolFull` as for [`put`](Self::put).
    pub fn copy_chunk(&self, from: ChunkKey, to: ChunkKey, unless: Option<ChunkKey>) -> Result<(u64, Checksum, bool)> {
        let (data, sum) = match self.try_get_in_mem_summed(from) {
            Some(found) => found,
            None => (Bytes::copy_from_slice(&self.get(from)?), None),
        };
        let (len, checksum) = (data.len() as u64, sum.unwrap_or_else(|| crc32c::crc32c(&data)));
        if let Some(u) = unless {
            // Read for the comparison only: it does not count as a use (a
            // kept copy is not to look hot to eviction for it).
            match self.get_for_copy(u) {
                Ok(d) if d == data => return Ok((len, checksum, false)),
                Ok(_) => {}
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let mut t = self.tiers.lock();
        let attrs = t.attrs_of(to.inode);
        t.store(to, data, checksum, attrs)?;
        drop(t);
        self.used(to.inode);
        Ok((len, checksum, true))
    }

    /// `len` bytes of a chunk from `offset` (no copy from MEM).
    /// `InvalidArgument` if the range reaches past the chunk's end.
    pub fn read_range(&self, key: ChunkKey, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.get(key)?;
        match offset.checked_add(len) {
            Some(end) if end <= data.len() as u64 => Ok(data.slice(offset as usize..end as usize)),
            _ => Err(Error::invalid(format!(
                "chunk {key}: bytes {offset}..{} are past its end ({} bytes)",
                offset.saturating_add(len),
                data.len()
            ))),
        }
    }

    /// Overwrites byte ranges `(offset, bytes)` of an existing chunk, all or
    /// none: in place when the chunk is in MEM, so writing a few pages of a
    /// large chunk costs those pages. `NotFound` if absent.
    pub fn write_ranges(&self, key: ChunkKey, ranges: &[(u64, &[u8])]) -> Result<()> {
        self.tiers.lock().write_ranges(key, ranges)?;
        self.used(key.inode);
        Ok(())
    }

    fn used(&self, inode: InodeId) {
        self.last_use.lock().used(inode, Instant::now());
    }

    /// How long ago a client last read or wrote a chunk of each inode here,
    /// in order; `None` if not since this worker started.
    pub fn last_use(&self, inodes: &[InodeId]) -> Vec<Option<Duration>> {
        self.last_use.lock().ages(inodes, Instant::now())
    }

    /// What this worker stores, a page at a time: up to `limit` keys after
    /// `after` (from the first without it) in key order, with their lengths.
    pub fn inventory(&self, after: Option<ChunkKey>, limit: usize) -> Vec<(ChunkKey, u64)> {
        self.tiers.lock().keys_after(after, limit)
    }

    /// Where a chunk is, if anywhere.
    pub fn locate(&self, key: ChunkKey) -> Option<TierKind> {
        self.tiers.lock().locate(key)
    }

    /// Deletes a chunk (and its reclaimable mark); `false` if it was absent.
    pub fn delete(&self, key: ChunkKey) -> Result<bool> {
        self.tiers.lock().delete(key)
    }

    /// Deletes every chunk of these inodes from both tiers (and their
    /// reclaimable marks); returns how many.
    pub fn delete_inodes(&self, inodes: &[InodeId]) -> Result<u64> {
        let n = self.tiers.lock().delete_inodes(inodes)?;
        self.last_use.lock().forget(inodes);
        Ok(n)
    }

    /// Marks chunks reclaimable: the coordinator gave up these versions
    /// (replaced, or their file removed) and will delete them after a grace
    /// period. They stay readable, but whenever a put, a promotion or a
    /// zeroed chunk needs room in MEM or DISK they are deleted outright
    /// (oldest mark first, never demoted) before any live chunk is demoted or
    /// the call fails with `PoolFull`. Only stored chunks are marked: a key
    /// stored later is live. The mark lasts until the chunk is deleted or
    /// dropped, or the worker restarts (marks are not persisted). Returns how
    /// many distinct keys are stored (all of them now reclaimable).
    pub fn mark_reclaimable(&self, keys: &[ChunkKey]) -> u64 {
        self.tiers.lock().mark_reclaimable(keys)
    }

    /// Marks every chunk of these inodes stored now reclaimable, as
    /// [`TierManager::mark_reclaimable`] does; chunks of them stored later
    /// are live. Returns how many chunks were found.
    pub fn mark_reclaimable_inodes(&self, inodes: &[InodeId]) -> u64 {
        self.tiers.lock().mark_reclaimable_inodes(inodes)
    }

    /// Whether a chunk is stored and marked reclaimable.
    pub fn is_reclaimable(&self, key: ChunkKey) -> bool {
        self.tiers.lock().is_reclaimable(key)
    }

    /// Sets the eviction attributes of every chunk of `inode`, present and future.
    pub fn set_attrs(&self, inode: InodeId, attrs: ChunkAttrs) {
        self.tiers.lock().set_attrs(inode, attrs)
    }

    /// Sets the attributes of every inode at once: the listed ones get
    /// theirs, every other inode the default (a full sync from the coordinator).
    pub fn replace_attrs(&self, all: &[(InodeId, ChunkAttrs)]) {
        self.tiers.lock().replace_attrs(all)
    }

    pub fn stats(&self) -> TierStats {
        self.tiers.lock().stats()
    }

    /// Moves a chunk from MEM to DISK (one on DISK already stays), dropping
    /// reclaimable DISK chunks for room: from then on it outlives a kill of
    /// the process. `NotFound` if absent, `PoolFull` if DISK has no room
    /// (nothing changed).
    pub fn keep_on_disk(&self, key: ChunkKey) -> Result<()> {
        self.tiers.lock().keep_on_disk(key)
    }

    /// Stops taking writes and moves everything held in MEM to DISK, so a
    /// restart of the worker on the same directory serves it again. Every
    /// later put, copy, range write and zeroed chunk fails `Unavailable`
    /// (never acknowledged); reads go on while it runs. The lock is taken
    /// for a few chunks at a time. `progress` hears after each step.
    /// Returns the total written and what stayed in MEM (DISK full).
    pub fn close_and_spill(&self, progress: &dyn Fn(&Spill)) -> Result<Spill> {
        self.tiers.lock().close();
        let mut total = Spill::default();
        loop {
            let step = self.tiers.lock().spill(SPILL_STEP)?;
            total.chunks += step.chunks;
            total.bytes += step.bytes;
            total.left_chunks = step.left_chunks;
            total.left_bytes = step.left_bytes;
            total.stuck = step.stuck;
            progress(&total);
            if step.left_chunks == 0 || step.stuck {
                return Ok(total);
            }
        }
    }

    /// How long a full disk is believed full without a delete (tests only).
    #[cfg(test)]
    pub(crate) fn set_disk_full_retry(&self, retry: std::time::Duration) {
        self.tiers.lock().set_disk_full_retry(retry)
    }

    /// Panics if an internal invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.tiers.lock().check_invariants()
    }
}
