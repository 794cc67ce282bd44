//! Chunks that must outlive a kill of the worker: `keep_on_disk` moves one
//! from MEM to DISK (a write acknowledged as durable in the pool).
//!
//! Stopping a worker without losing what it holds in memory: `close` refuses
//! every later change of stored bytes, then `spill` moves the MEM chunks to
//! DISK a few at a time, so a restarted worker serves them from its disk.
//!
//! Live chunks go in reverse eviction order (pinned, higher priority and
//! recently used first), so that if DISK cannot take them all, the ones the
//! pool keeps are those it would have kept in MEM longest. Reclaimable MEM
//! chunks are garbage already given up: they are dropped, not written.
//! Reclaimable DISK chunks make room as for any DISK write.

use super::Tiers;
use crate::store::{not_found, ChunkStore};
use tierpool_types::ChunkKey;
use tierpool_types::{ByteSize, Error, ErrorKind, Result};

/// What one `spill` step did, and what is left.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Spill {
    /// Chunks (and their bytes) written to DISK by this step.
    pub chunks: u64,
    pub bytes: u64,
    /// Live chunks (and bytes) still only in MEM: zero when done, or what
    /// DISK had no room for once `stuck`.
    pub left_chunks: u64,
    pub left_bytes: u64,
    /// DISK has no room for the next chunk: further steps change nothing.
    pub stuck: bool,
}

impl Tiers {
    /// Refuses every later put, copy, range write and zeroed chunk with
    /// `Unavailable` (reads, deletes and marks go on).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// `Unavailable` once closed: the change must not be acknowledged.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "worker is stopping: it writes what it holds in memory to disk and takes no more writes",
            ));
        }
        Ok(())
    }

    /// Moves chunk `key` from MEM to DISK unless it is there already.
    pub fn keep_on_disk(&mut self, key: ChunkKey) -> Result<()> {
        let len = match (self.mem.meta_len(key), self.disk.entry(key)) {
            (_, Some(_)) => return Ok(()),
            (Some(len), None) => len,
            (None, None) => return Err(not_found(key)),
        };
        let Some(drops) = self.reclaim_disk.plan(len, self.disk_free(), None) else {
            return Err(self.pool_full(key, len as usize));
        };
        for k in drops {
            self.drop_disk(k)?;
        }
        let staged = self.stage_victims(&[key])?;
        self.commit_victims(staged);
        self.index_disk(key, len);
        Ok(())
    }

    /// Writes up to `max` live MEM chunks to DISK (dropping every
    /// reclaimable MEM chunk on the way). A failed write changes nothing
    /// and is returned; the chunks written before it stay written.
    pub fn spill(&mut self, max: usize) -> Result<Spill> {
        for key in self.reclaim_mem.iter().map(|(k, _)| k).collect::<Vec<_>>() {
            self.mem.take(key);
            self.reclaim_mem.remove(key);
            self.reclaimed += 1;
        }
        let mut out = Spill::default();
        let next: Vec<_> = self.evict.victims().collect::<Vec<_>>().into_iter().rev().take(max).collect();
        for (key, len) in next {
            let Some(drops) = self.reclaim_disk.plan(len, self.disk_free(), None) else {
                out.stuck = true;
                break;
            };
            for k in drops {
                self.drop_disk(k)?;
            }
            let staged = self.stage_victims(&[key])?;
            self.commit_victims(staged);
            out.chunks += 1;
            out.bytes += len;
        }
        out.left_chunks = self.evict.len() as u64;
        out.left_bytes = self.evict.total_size();
        if out.stuck {
            tracing::warn!(
                "disk ({} of {} used) has no room for the rest of memory: {} chunks ({}) stay in memory only",
                ByteSize(self.disk.used()),
                ByteSize(self.disk_budget()),
                out.left_chunks,
                ByteSize(out.left_bytes)
            );
        }
        Ok(out)
    }
}
