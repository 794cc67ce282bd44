//! Chunk-sized buffers kept for reuse: the large frame bodies a server
//! reads (chunks being written to a worker), or a client (chunks read from
//! workers, `PoolConfig::buffers`), go into buffers taken from here, as do
//! the whole chunks a client writes ([`ChunkBuffers::copy`]). A buffer
//! comes back when the last `Bytes` of its body is dropped: the chunk
//! deleted or moved to disk, the request refused, the bytes read copied
//! where the caller wanted them, or the chunk written stored.
//!
//! A fresh buffer costs a page fault and the zeroing of each page at its
//! first touch (on a virtual machine that hands freed memory back to its
//! host, the host's first touch too); a reused one costs neither.
//! [`ChunkBuffers::prefault`] fills the spare list ahead, so that even the
//! first writes into a fresh worker find their pages ready, and the
//! worker's resident size is set from its start.
//!
//! A worker's buffers also keep shorter bodies, by size class
//! (`small_buffers.rs`, [`ChunkBuffers::with_small`]): the small chunks
//! it stores and the requests that carry many of them.
//!
//! Invariants: every chunk buffer kept has capacity `size`; at most `keep`
//! are spare, and once a `limit` is set, spare and lent ones together are
//! kept within it (a buffer given back beyond it, and spare ones beyond a
//! lowered limit, are freed); a body goes into one only if it is exactly
//! `size` long (a whole chunk), so a chunk buffer in use holds no slack and
//! what counts bodies' bytes counts their memory. A shorter body goes into
//! a small buffer only if this keeps them, with at most its class's slack.

use crate::small_buffers::SmallBuffers;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tierpool_types::BufferStats;

/// No limit on the buffers spare and lent together.
const NO_LIMIT: usize = usize::MAX;

/// Buffers of one size, kept for reuse.
#[derive(Debug)]
pub struct ChunkBuffers {
    size: usize,
    keep: usize,
    /// Buffers spare and lent together beyond which none is kept.
    limit: AtomicUsize,
    spare: Mutex<Vec<Vec<u8>>>,
    /// Taken and not given back yet.
    lent: AtomicUsize,
    reused: AtomicU64,
    fresh: AtomicU64,
    /// Shorter buffers, if these keep them.
    small: Option<SmallBuffers>,
}

impl ChunkBuffers {
    /// Buffers of `size` bytes, at most `keep` of them spare.
    pub fn new(size: usize, keep: usize) -> Arc<ChunkBuffers> {
        Arc::new(Self::build(size, keep, None))
    }

    /// As [`new`](Self::new), also keeping buffers for shorter bodies, at
    /// most `room` bytes of them spare.
    pub fn with_small(size: usize, keep: usize, room: usize) -> Arc<ChunkBuffers> {
        Arc::new(Self::build(size, keep, Some(SmallBuffers::new(size, room))))
    }

    fn build(size: usize, keep: usize, small: Option<SmallBuffers>) -> ChunkBuffers {
        ChunkBuffers {
            size,
            keep,
            limit: AtomicUsize::new(NO_LIMIT),
            spare: Mutex::new(Vec::new()),
            lent: AtomicUsize::new(0),
            reused: AtomicU64::new(0),
            fresh: AtomicU64::new(0),
            small,
        }
    }

    /// Whether a body of `len` bytes is read into one of these.
    pub(crate) fn fits(&self, len: usize) -> bool {
        len == self.size || self.small_class(len).is_some()
    }

    /// An empty buffer for a body of `len` bytes (one that [`fits`](Self::fits)),
    /// lent until given back.
    pub(crate) fn take_for(&self, len: usize) -> Vec<u8> {
        match self.small_class(len) {
            Some((small, class)) => small.take(class),
            None => self.take(),
        }
    }

    /// As [`take_for`](Self::take_for), only if a spare buffer is there:
    /// `None` (nothing lent, nothing allocated) otherwise.
    pub(crate) fn take_spare_for(&self, len: usize) -> Option<Vec<u8>> {
        match self.small_class(len) {
            Some((small, class)) => small.take_spare(class),
            None => self.take_spare(),
        }
    }

    /// The shorter buffers and the class a body of `len` bytes takes
    /// there, if it is one of theirs.
    fn small_class(&self, len: usize) -> Option<(&SmallBuffers, usize)> {
        self.small.as_ref().and_then(|s| Some((s, s.class(len)?)))
    }

    /// Keeps spare and lent buffers together within `limit` from now on:
    /// the spare ones beyond it are freed now, buffers given back beyond
    /// it later.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
        let extra = {
            let mut spare = self.spare.lock();
            let room = limit.saturating_sub(self.lent.load(Ordering::Relaxed));
            let at = spare.len().min(room);
            spare.split_off(at)
        };
        drop(extra);
    }

    /// Whether one more spare buffer is kept, with `spare` spare now.
    fn keeps(&self, spare: usize) -> bool {
        spare < self.keep && spare + self.lent.load(Ordering::Relaxed) < self.limit.load(Ordering::Relaxed)
    }

    /// An empty buffer of capacity `size`, lent until given back: a spare
    /// one if there is one.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.take_spare().unwrap_or_else(|| {
            self.lent.fetch_add(1, Ordering::Relaxed);
            self.fresh.fetch_add(1, Ordering::Relaxed);
            Vec::with_capacity(self.size)
        })
    }

    /// A spare buffer of capacity `size`, lent until given back; `None`
    /// (nothing lent, nothing allocated) if none is spare.
    fn take_spare(&self) -> Option<Vec<u8>> {
        let buf = self.spare.lock().pop()?;
        self.lent.fetch_add(1, Ordering::Relaxed);
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(buf)
    }

    /// `buf` (taken from here) as `Bytes` that give it back when the last
    /// of them is dropped.
    pub(crate) fn lend(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Lent { buf, home: self.clone() })
    }

    /// A copy of `bytes` in a buffer taken from here, given back when the
    /// last of the returned `Bytes` goes; `None` unless they [`fit`](Self::fits)
    /// (exactly a buffer long, a whole chunk being written, or shorter
    /// where these keep shorter buffers).
    pub fn copy(self: &Arc<Self>, bytes: &[u8]) -> Option<Bytes> {
        if !self.fits(bytes.len()) {
            return None;
        }
        let mut buf = self.take_for(bytes.len());
        buf.extend_from_slice(bytes);
        Some(self.lend(buf))
    }

    /// Takes back `buf` (taken from here), spare if [`keeps`](Self::keeps)
    /// (a shorter one, if its class has room).
    pub(crate) fn give_back(&self, mut buf: Vec<u8>) {
        if let Some(small) = self.small.as_ref().filter(|_| buf.capacity() != self.size) {
            return small.give_back(buf);
        }
        self.lent.fetch_sub(1, Ordering::Relaxed);
        if buf.capacity() != self.size {
            return;
        }
        buf.clear();
        let mut spare = self.spare.lock();
        if self.keeps(spare.len()) {
            spare.push(buf);
            return;
        }
        drop(spare);
        drop(buf);
    }

    /// Adds spare buffers, each touched in full, while one more is kept;
    /// returns how many were added. Slow (the pages are faulted in one by
    /// one): run it off the serving threads.
    pub fn prefault(&self) -> usize {
        let mut added = 0;
        while self.keeps(self.spare.lock().len()) {
            let mut buf = vec![0u8; self.size];
            buf.fill(1);
            buf.clear();
            let mut spare = self.spare.lock();
            if !self.keeps(spare.len()) {
                break;
            }
            spare.push(buf);
            added += 1;
        }
        added
    }

    pub fn stats(&self) -> BufferStats {
        let limit = self.limit.load(Ordering::Relaxed);
        let (small_room, small_spare, small_lent, small_reused, small_fresh) =
            self.small.as_ref().map_or((0, 0, 0, 0, 0), |s| s.figures());
        BufferStats {
            size: self.size as u64,
            keep: self.keep as u64,
            limit: (limit != NO_LIMIT).then_some(limit as u64),
            spare: self.spare.lock().len() as u64,
            lent: self.lent.load(Ordering::Relaxed) as u64,
            reused: self.reused.load(Ordering::Relaxed),
            fresh: self.fresh.load(Ordering::Relaxed),
            small_room,
            small_spare,
            small_lent,
            small_reused,
            small_fresh,
        }
    }
}

/// A buffer lent out as the bytes of a body.
struct Lent {
    buf: Vec<u8>,
    home: Arc<ChunkBuffers>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_when_its_last_bytes_go_and_is_reused() {
        let b = ChunkBuffers::new(4096, 2);
        let mut buf = b.take();
        buf.extend_from_slice(&[7u8; 4096]);
        let first = buf.as_ptr();
        let bytes = b.lend(buf);
        let part = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(b.stats().spare, 0, "a slice still holds it");
        assert_eq!(&part[..], &[7u8; 10]);
        drop(part);
        assert_eq!(b.stats().spare, 1);
        let again = b.take();
        assert_eq!((again.as_ptr(), again.len(), again.capacity()), (first, 0, 4096));
        let s = b.stats();
        assert_eq!((s.reused, s.fresh, s.spare), (1, 1, 0));
    }

    #[test]
    fn no_more_than_keep_are_spare_and_prefault_fills_to_keep() {
        let b = ChunkBuffers::new(8192, 2);
        let lent: Vec<Bytes> = (0..3).map(|_| b.lend(b.take())).collect();
        assert_eq!(b.stats().lent, 3);
        drop(lent);
        assert_eq!((b.stats().spare, b.stats().lent), (2, 0));
        let c = ChunkBuffers::new(8192, 3);
        assert_eq!(c.prefault(), 3);
        assert_eq!(c.prefault(), 0);
        assert_eq!(c.stats().spare, 3);
        let taken = c.take();
        assert_eq!(taken.capacity(), 8192);
        c.give_back(Vec::with_capacity(4096));
        assert_eq!(c.stats().spare, 2, "a buffer of another size is not kept");
    }

    #[test]
    fn a_limit_bounds_spare_and_lent_together() {
        let b = ChunkBuffers::new(8192, 8);
        b.set_limit(5);
        assert_eq!(b.prefault(), 5);
        let lent: Vec<Bytes> = (0..3).map(|_| b.lend(b.take())).collect();
        assert_eq!((b.stats().spare, b.stats().lent), (2, 3));
        b.set_limit(4);
        assert_eq!(b.stats().spare, 1, "the spare ones beyond the limit are freed");
        drop(lent);
        assert_eq!((b.stats().spare, b.stats().lent), (4, 0), "those given back within it are kept");
        b.set_limit(8);
        assert_eq!(b.prefault(), 4);
        assert_eq!(b.stats().limit, Some(8));
        assert_eq!(ChunkBuffers::new(8192, 1).stats().limit, None);
    }

    #[test]
    fn copies_of_shorter_bytes_go_into_buffers_of_their_class_where_kept() {
        let b = ChunkBuffers::with_small(1 << 20, 1, 1 << 20);
        let copy = b.copy(&[3u8; 10_000]).unwrap();
        assert_eq!(&copy[..], &[3u8; 10_000]);
        let s = b.stats();
        assert_eq!((s.small_lent, s.small_fresh, s.lent, s.fresh), (10_240, 1, 0, 0));
        let whole = b.copy(&vec![4u8; 1 << 20]).unwrap();
        assert_eq!((b.stats().lent, b.stats().small_lent), (1, 10_240), "a whole chunk takes a chunk buffer");
        drop((copy, whole));
        let s = b.stats();
        assert_eq!((s.small_spare, s.small_lent, s.spare, s.lent), (10_240, 0, 1, 0));
        let again = b.copy(&[5u8; 9_500]).unwrap();
        assert_eq!((&again[..], b.stats().small_reused), (&[5u8; 9_500][..], 1));
        assert!(b.copy(&[]).is_none() && b.copy(&vec![0u8; (1 << 20) + 1]).is_none());
        assert!(ChunkBuffers::new(1 << 20, 1).copy(&[3u8; 10_000]).is_none(), "a client's keep whole chunks only");
    }

    #[test]
    fn only_whole_chunks_fit() {
        let b = ChunkBuffers::new(4 << 20, 1);
        assert!(b.fits(4 << 20));
        assert!(!b.fits((4 << 20) - 1));
        assert!(!b.fits((4 << 20) + 1));
        assert!(!b.fits(0));
    }
}
