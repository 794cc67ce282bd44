//! One open file's contents as the mount sees them: the published chunks
//! plus local changes not yet published. Pure: no I/O; the caller fetches
//! and stores chunks and tells this state what happened.
//!
//! Where chunk `i`'s bytes are, first match wins:
//! 1. `local[i]`: bytes held here, either being written (`Dirty`) or on
//!    their way to a worker (`Sending`, with the version they go as);
//! 2. `stored[i]`: a version this writer stored and has not published yet;
//! 3. `base[i]`: the version published when the file was opened or last
//!    published;
//! 4. otherwise zeros (a hole, or past the end of `base`).
//!
//! Invariants: every source of chunk `i` holds at most the chunk's share of
//! `size` (bytes after a source's end read as zeros); `base` has no entry
//! past the chunks of `size`; a local buffer holds the chunk's whole content
//! from its first byte. Every stored version is fresh (never overwritten),
//! so a reader may fetch one without holding the state.
//!
//! Publishing sends every local chunk, then commits `stored` with the size
//! and the smallest size the file was cut to (`cut`). A small file whose
//! bytes are all held here is published with them instead (inline: no
//! chunk is sent). Versions this writer stored and then replaced, or cut
//! away, before publishing are `garbage`.

use bytes::Bytes;
use std::collections::BTreeMap;
use tierpool_types::{ChunkKey, ChunkRef, InodeId};

/// Where a chunk's bytes are now (see the module docs).
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    Local(Vec<u8>),
    Stored(ChunkRef),
    Zero,
}

#[derive(Debug)]
enum Local {
    /// Being written; `touched` orders chunks by their last write; `covered`
    /// lists the byte ranges known (written, or loaded from the chunk's
    /// version), sorted and disjoint: the chunk is complete when they cover it.
    Dirty { data: Vec<u8>, touched: u64, covered: Vec<(u64, u64)> },
    /// Handed out to be stored as `version`.
    Sending { data: Bytes, version: u64 },
}

impl Local {
    fn len(&self) -> usize {
        match self {
            Local::Dirty { data, .. } => data.len(),
            Local::Sending { data, .. } => data.len(),
        }
    }
}

/// What publishing commits: see `MetaOp::UpdateFile`.
#[derive(Debug, PartialEq, Eq)]
pub struct Commit {
    pub size: u64,
    pub cut: Option<u64>,
    pub chunks: Vec<(u64, ChunkRef)>,
}

#[derive(Debug)]
pub struct FileState {
    inode: InodeId,
    chunk_size: u64,
    size: u64,
    base: Vec<ChunkRef>,
    local: BTreeMap<u64, Local>,
    stored: BTreeMap<u64, ChunkRef>,
    cut: Option<u64>,
    changed: bool,
    garbage: Vec<ChunkKey>,
    clock: u64,
    dirty_bytes: u64,
}

impl FileState {
    /// The file as published: `size` bytes in chunks `base`.
    pub fn new(inode: InodeId, chunk_size: u64, size: u64, base: Vec<ChunkRef>) -> FileState {
        FileState {
            inode,
            chunk_size,
            size,
            base,
            local: BTreeMap::new(),
            stored: BTreeMap::new(),
            cut: None,
            changed: false,
            garbage: Vec::new(),
            clock: 0,
            dirty_bytes: 0,
        }
    }

    pub fn inode(&self) -> InodeId {
        self.inode
    }

    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether anything changed since the file was opened or published.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// Bytes of chunks being written (not yet handed out to be stored).
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    /// Bytes of chunk `index` that belong to the file now.
    fn share(&self, index: u64) -> u64 {
        self.size.saturating_sub(index * self.chunk_size).min(self.chunk_size)
    }

    /// The published or stored version of chunk `index`, ignoring local bytes.
    fn version_ref(&self, index: u64) -> ChunkRef {
        self.stored.get(&index).or_else(|| self.base.get(index as usize)).copied().unwrap_or(ChunkRef::HOLE)
    }

    /// Where bytes `from..to` of chunk `index` are now: copied out if they
    /// are held here (zeros past the local bytes), else the version to fetch
    /// (bytes past its length are zeros), or zeros.
    pub fn source(&self, index: u64, from: usize, to: usize) -> Source {
        let data: &[u8] = match self.local.get(&index) {
            Some(Local::Dirty { data, .. }) => data,
            Some(Local::Sending { data, .. }) => data,
            None => {
                return match self.version_ref(index) {
                    r if r.is_hole() || (r.len == 0 && !r.is_below()) => Source::Zero,
                    r => Source::Stored(r),
                }
            }
        };
        let mut out = vec![0u8; to - from];
        if from < data.len() {
            let n = data.len().min(to) - from;
            out[..n].copy_from_slice(&data[from..from + n]);
        }
        Source::Local(out)
    }

    /// Chunks whose stored bytes must be installed (see [`FileState::install`])
    /// before `len` bytes at `offset` can be written: those the write covers
    /// only in part, that hold bytes and are not held here.
    pub fn loads_for_write(&self, offset: u64, len: u64) -> Vec<(u64, ChunkRef)> {
        let cs = self.chunk_size;
        let mut out = Vec::new();
        if len == 0 {
            return out;
        }
        for index in offset / cs..=(offset + len - 1) / cs {
            let start = index * cs;
            let (a, b) = (offset.max(start) - start, (offset + len).min(start + cs) - start);
            let r = self.version_ref(index);
            let len = self.stored_len(index, r);
            if !self.local.contains_key(&index) && len > 0 && !(a == 0 && b >= len) {
                out.push((index, r));
            }
        }
        out
    }

    /// The chunk whose stored bytes must be installed before the file is
    /// cut to `size`: the one the cut goes through, if it holds bytes past it.
    pub fn load_for_cut(&self, size: u64) -> Option<(u64, ChunkRef)> {
        let index = size / self.chunk_size;
        let keep = size - index * self.chunk_size;
        let r = self.version_ref(index);
        let len = self.stored_len(index, r);
        (keep > 0 && size < self.size && !self.local.contains_key(&index) && len > keep).then_some((index, r))
    }

    /// Bytes chunk `index` (version `r`) holds: a chunk of an under-store
    /// not loaded yet holds its whole share of the file.
    fn stored_len(&self, index: u64, r: ChunkRef) -> u64 {
        if r.is_below() {
            self.size.saturating_sub(index * self.chunk_size).min(self.chunk_size)
        } else {
            r.len
        }
    }

    /// Makes the fetched bytes of chunk `index` local, to be changed in place.
    pub fn install(&mut self, index: u64, data: &[u8]) {
        if self.local.contains_key(&index) {
            return;
        }
        let share = self.share(index) as usize;
        let data = data[..data.len().min(share)].to_vec();
        self.clock += 1;
        self.dirty_bytes += data.len() as u64;
        let covered = vec![(0, data.len() as u64)];
        self.local.insert(index, Local::Dirty { data, touched: self.clock, covered });
    }

    /// The local buffer of chunk `index`, made dirty (a chunk on its way to
    /// a worker is copied back: the copy in flight will be superseded).
    fn dirty_mut(&mut self, index: u64) -> (&mut Vec<u8>, &mut Vec<(u64, u64)>) {
        self.clock += 1;
        let clock = self.clock;
        let entry = (self.local.entry(index)).or_insert_with(|| Local::Dirty {
            data: Vec::new(),
            touched: clock,
            covered: Vec::new(),
        });
        if let Local::Sending { data, .. } = entry {
            self.dirty_bytes += data.len() as u64;
            let covered = vec![(0, data.len() as u64)];
            *entry = Local::Dirty { data: data.to_vec(), touched: clock, covered };
        }
        match entry {
            Local::Dirty { data, touched, covered } => {
                *touched = clock;
                (data, covered)
            }
            Local::Sending { .. } => unreachable!("made dirty above"),
        }
    }

    /// Writes `data` at `offset` (needed loads installed first). Returns the
    /// chunks this write completed (every byte known) or rewrote up to their
    /// end: worth sending now.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Vec<u64> {
        debug_assert!(self.loads_for_write(offset, data.len() as u64).is_empty(), "loads installed first");
        let cs = self.chunk_size;
        let mut full = Vec::new();
        let mut at = 0usize;
        while at < data.len() {
            let pos = offset + at as u64;
            let index = pos / cs;
            let from = (pos - index * cs) as usize;
            let n = (cs as usize - from).min(data.len() - at);
            let (buf, covered) = self.dirty_mut(index);
            let before = buf.len();
            grow(buf, from + n, cs as usize);
            if from >= buf.len() {
                // Appending (the common case): no zeroing of what is copied next.
                buf.resize(from, 0);
                buf.extend_from_slice(&data[at..at + n]);
            } else {
                let overlap = (buf.len() - from).min(n);
                buf[from..from + overlap].copy_from_slice(&data[at..at + overlap]);
                buf.extend_from_slice(&data[at + overlap..at + n]);
            }
            let after = buf.len();
            let was_complete = is_complete(covered, cs);
            cover(covered, from as u64, (from + n) as u64);
            // Worth sending now: completed by this write, or rewritten up to its end.
            if is_complete(covered, cs) && (!was_complete || from + n == cs as usize) {
                full.push(index);
            }
            self.dirty_bytes += (after - before) as u64;
            at += n;
        }
        self.size = self.size.max(offset + data.len() as u64);
        self.changed = true;
        full
    }

    /// Cuts or extends the file to `size` (the load of
    /// [`FileState::load_for_cut`] installed first).
    pub fn truncate(&mut self, size: u64) {
        debug_assert!(self.load_for_cut(size).is_none(), "the cut chunk is installed first");
        let cs = self.chunk_size;
        if size < self.size {
            let count = size.div_ceil(cs);
            let gone: Vec<u64> = self.local.range(count..).map(|(i, _)| *i).collect();
            for i in gone {
                if let Some(Local::Dirty { data, .. }) = self.local.remove(&i) {
                    self.dirty_bytes -= data.len() as u64;
                }
            }
            let cut: Vec<u64> = self.stored.range(count..).map(|(i, _)| *i).collect();
            for i in cut {
                let r = self.stored.remove(&i).expect("listed above");
                self.garbage.push(r.key(self.inode, i));
            }
            self.base.truncate(count as usize);
            let keep = (size - (size / cs) * cs) as usize;
            if keep > 0 && self.local.get(&(size / cs)).is_some_and(|l| l.len() > keep) {
                let (buf, covered) = self.dirty_mut(size / cs);
                let cut_off = buf.len() - keep;
                buf.truncate(keep);
                covered.retain(|r| r.0 < keep as u64);
                if let Some(last) = covered.last_mut() {
                    last.1 = last.1.min(keep as u64);
                }
                self.dirty_bytes -= cut_off as u64;
            }
            self.cut = Some(self.cut.map_or(size, |c| c.min(size)));
        }
        self.size = size;
        self.changed = true;
    }

    /// Whether chunk `index` is being written and holds a whole chunk.
    #[cfg(test)]
    pub fn is_full(&self, index: u64) -> bool {
        matches!(self.local.get(&index), Some(Local::Dirty { data, .. }) if data.len() as u64 == self.chunk_size)
    }

    /// The dirty chunk written longest ago.
    pub fn oldest_dirty(&self) -> Option<u64> {
        (self.local.iter())
            .filter_map(|(i, l)| match l {
                Local::Dirty { touched, .. } => Some((*touched, *i)),
                Local::Sending { .. } => None,
            })
            .min()
            .map(|(_, i)| i)
    }

    /// Every dirty chunk, in index order.
    pub fn dirty_chunks(&self) -> Vec<u64> {
        (self.local.iter()).filter(|(_, l)| matches!(l, Local::Dirty { .. })).map(|(i, _)| *i).collect()
    }

    /// Hands the dirty chunk `index` out to be stored as `version` (fresh).
    pub fn send(&mut self, index: u64, version: u64) -> Option<Bytes> {
        let Some(Local::Dirty { data, .. }) = self.local.remove(&index) else { return None };
        self.dirty_bytes -= data.len() as u64;
        let data = Bytes::from(data);
        self.local.insert(index, Local::Sending { data: data.clone(), version });
        Some(data)
    }

    /// Chunk `index` was stored as `r`. If nothing changed it since it was
    /// handed out, `r` now holds it; otherwise `r` is already superseded.
    pub fn sent(&mut self, index: u64, r: ChunkRef) {
        let current = matches!(self.local.get(&index), Some(Local::Sending { version, .. }) if *version == r.version);
        if !current {
            self.garbage.push(r.key(self.inode, index));
            return;
        }
        self.local.remove(&index);
        if let Some(old) = self.stored.insert(index, r) {
            self.garbage.push(old.key(self.inode, index));
        }
    }

    /// Storing chunk `index` as `version` failed: it is dirty again (unless
    /// it changed meanwhile), to be retried.
    pub fn send_failed(&mut self, index: u64, version: u64) {
        if let Some(Local::Sending { data, version: v }) = self.local.get(&index) {
            if *v == version {
                let data = data.to_vec();
                self.dirty_bytes += data.len() as u64;
                self.clock += 1;
                let covered = vec![(0, data.len() as u64)];
                self.local.insert(index, Local::Dirty { data, touched: self.clock, covered });
            }
        }
    }

    /// What to commit, once nothing is held locally; `None` while something is.
    pub fn commit(&self) -> Option<Commit> {
        if !self.local.is_empty() {
            return None;
        }
        Some(Commit { size: self.size, cut: self.cut, chunks: self.stored.iter().map(|(i, r)| (*i, *r)).collect() })
    }

    /// Whether the file is small enough to be published inline, the
    /// metadata keeping files of up to `max` bytes so: in one chunk, of at
    /// most `max` bytes.
    pub fn fits_inline(&self, max: u64) -> bool {
        self.size <= max.min(self.chunk_size)
    }

    /// The file's whole contents when they may be published inline (see
    /// `MetaOp::UpdateInline`): it changed, holds at most `max` bytes in
    /// one chunk, and every byte is held here, being written (zeros past
    /// the local bytes). `None` otherwise: it is published by chunks.
    pub fn small_contents(&self, max: u64) -> Option<Vec<u8>> {
        if !self.changed || !self.fits_inline(max) {
            return None;
        }
        if self.size == 0 {
            return Some(Vec::new());
        }
        match self.local.get(&0) {
            Some(Local::Dirty { data, .. }) if self.local.len() == 1 => {
                let mut out = data.clone();
                out.resize(self.size as usize, 0);
                Some(out)
            }
            _ => None,
        }
    }

    /// The inline publish of [`FileState::small_contents`] went through:
    /// the file is now `size` bytes in `chunks`, and every version this
    /// writer stored is garbage.
    pub fn published_inline(&mut self, size: u64, chunks: Vec<ChunkRef>) {
        let stored = std::mem::take(&mut self.stored);
        self.garbage.extend(stored.iter().map(|(i, r)| r.key(self.inode, *i)));
        self.local.clear();
        self.dirty_bytes = 0;
        self.published(size, chunks);
    }

    /// The commit went through: the file is now `size` bytes in `chunks`.
    pub fn published(&mut self, size: u64, chunks: Vec<ChunkRef>) {
        self.size = size;
        self.base = chunks;
        self.stored.clear();
        self.cut = None;
        self.changed = false;
    }

    /// A newer published version replaces what this state shows (only when
    /// nothing changed here).
    pub fn refresh(&mut self, size: u64, chunks: Vec<ChunkRef>) {
        if !self.changed && self.local.is_empty() {
            self.size = size;
            self.base = chunks;
        }
    }

    /// Versions stored by this writer that nothing will publish.
    pub fn take_garbage(&mut self) -> Vec<ChunkKey> {
        std::mem::take(&mut self.garbage)
    }

    /// Every version this writer stored and has not published (to delete
    /// when the file is gone before it could be published). A version
    /// still being sent is named by its hashed partition: if a placement
    /// policy gave it another home, the orphan sweep collects it instead.
    pub fn unpublished(&self) -> Vec<ChunkKey> {
        let sending = self.local.iter().filter_map(|(i, l)| match l {
            Local::Sending { version, .. } => Some(ChunkKey::hashed(self.inode, *i, *version)),
            Local::Dirty { .. } => None,
        });
        (self.stored.iter().map(|(i, r)| r.key(self.inode, *i))).chain(sending).collect()
    }
}

/// Adds byte range `a..b` to `ranges` (sorted, disjoint), merging neighbours.
fn cover(ranges: &mut Vec<(u64, u64)>, a: u64, b: u64) {
    let (mut a, mut b) = (a, b);
    ranges.retain(|&(x, y)| {
        if y < a || x > b {
            return true;
        }
        (a, b) = (a.min(x), b.max(y));
        false
    });
    let at = ranges.partition_point(|r| r.0 < a);
    ranges.insert(at, (a, b));
}

/// Room for `needed` bytes in a chunk's buffer of at most `chunk_size`:
/// doubling from [`FIRST_ROOM`], so a small file holds little (and a new
/// file's first write touches few fresh pages), never more than a chunk.
fn grow(buf: &mut Vec<u8>, needed: usize, chunk_size: usize) {
    if needed <= buf.capacity() {
        return;
    }
    let room = needed.max(2 * buf.capacity()).max(FIRST_ROOM).min(chunk_size.max(needed));
    buf.reserve_exact(room - buf.len());
}

/// The first room a chunk's buffer is given.
const FIRST_ROOM: usize = 64 << 10;

fn is_complete(ranges: &[(u64, u64)], chunk_size: u64) -> bool {
    ranges.first() == Some(&(0, chunk_size))
}

#[cfg(test)]
mod tests;
