//! The decision maker: which pages are present and dirty, which chunks are
//! least recently used, and what an access needs done first.

use crate::pages::runs_of;
use crate::{Geometry, PageRun, PageSet, Readahead, PAGE_SIZE};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// How an access uses its bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Counters a region reports to its user.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Bytes fetched from the pool (whole pages, clipped at the region's end).
    pub bytes_fetched: u64,
    /// Bytes sent back to the pool (dirty pages only).
    pub bytes_written_back: u64,
    /// Accesses served without fetching anything.
    pub cache_hits: u64,
    /// Accesses that had to fetch at least one page.
    pub cache_misses: u64,
    /// Times a chunk with dirty pages was written back (on eviction, or made
    /// clean by a flush): what a whole-chunk write-back would send, in chunks.
    pub chunks_written_back: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// The access reaches past the region's end.
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// The cache cannot hold even one chunk.
    TooSmall { capacity: u64, chunk_size: u64 },
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::OutOfRange { offset, len, size } => {
                write!(f, "bytes {offset}..{} are outside the region of {size} bytes", offset + len)
            }
            CacheError::TooSmall { capacity, chunk_size } => {
                write!(f, "a cache of {capacity} bytes cannot hold one chunk of {chunk_size} bytes")
            }
        }
    }
}

impl std::error::Error for CacheError {}

/// A chunk to drop from the cache, after its dirty pages are written back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    pub chunk: u64,
    pub write_back: Vec<PageRun>,
}

/// What one access within one chunk needs, in order: evictions (write back,
/// then drop), fetches, and pages to create without fetching (they will be
/// overwritten whole).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub evict: Vec<Eviction>,
    pub fetch: Vec<PageRun>,
    pub create: Vec<PageRun>,
}

impl Plan {
    pub fn is_hit(&self) -> bool {
        self.fetch.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
struct ChunkState {
    present: PageSet,
    dirty: PageSet,
    tick: u64,
}

/// Page states of one region's cache. Capacity is counted in present pages.
#[derive(Clone, Debug)]
pub struct CacheState {
    geom: Geometry,
    capacity_pages: u64,
    chunks: HashMap<u64, ChunkState>,
    /// tick -> chunk, least recently used first.
    lru: BTreeMap<u64, u64>,
    tick: u64,
    resident_pages: u64,
    readahead: Readahead,
    stats: CacheStats,
}

impl CacheState {
    /// A cache of `capacity` bytes (at least one chunk) for a region of shape
    /// `geom`, reading ahead up to `max_readahead` bytes.
    pub fn new(geom: Geometry, capacity: u64, max_readahead: u64) -> Result<CacheState, CacheError> {
        if capacity < geom.chunk_size {
            return Err(CacheError::TooSmall { capacity, chunk_size: geom.chunk_size });
        }
        Ok(CacheState {
            geom,
            capacity_pages: capacity / PAGE_SIZE,
            chunks: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            resident_pages: 0,
            readahead: Readahead::new(max_readahead / PAGE_SIZE),
            stats: CacheStats::default(),
        })
    }

    pub fn geometry(&self) -> Geometry {
        self.geom
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Bytes of pages held (the cache's resident memory).
    pub fn resident_bytes(&self) -> u64 {
        self.resident_pages * PAGE_SIZE
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_pages * PAGE_SIZE
    }

    pub fn is_present(&self, chunk: u64, page: u32) -> bool {
        self.chunks.get(&chunk).is_some_and(|c| c.present.contains(page))
    }

    pub fn is_dirty(&self, chunk: u64, page: u32) -> bool {
        self.chunks.get(&chunk).is_some_and(|c| c.dirty.contains(page))
    }

    pub fn dirty_pages(&self) -> u64 {
        self.chunks.values().map(|c| u64::from(c.dirty.len())).sum()
    }

    /// What an access of `offset..offset+len`, which must lie within one
    /// chunk, needs before it can be served. Does not change the state.
    pub fn plan(&self, offset: u64, len: u64, access: Access) -> Result<Plan, CacheError> {
        let size = self.geom.size;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(CacheError::OutOfRange { offset, len, size });
        }
        if len == 0 {
            return Ok(Plan::default());
        }
        let (chunk, first) = self.geom.locate(offset);
        let (last_chunk, last) = self.geom.locate(offset + len - 1);
        assert_eq!(chunk, last_chunk, "an access is planned one chunk at a time");
        let present = |p: u32| self.is_present(chunk, p);
        let (mut fetch, mut create) = (Vec::new(), Vec::new());
        for p in (first..=last).filter(|&p| !present(p)) {
            let whole = access == Access::Write && self.covers(offset, len, chunk, p);
            if whole {
                create.push(p)
            } else {
                fetch.push(p)
            }
        }
        let needed = (fetch.len() + create.len()) as u64;
        // Read-ahead: the missing pages after the access, within this chunk,
        // as far as the window and the room left over allow.
        // Only a miss reads ahead: a hit inside the window fetches nothing.
        let room = self.room_without(chunk).saturating_sub(needed);
        let ahead = if fetch.is_empty() { 0 } else { self.readahead.window_for(offset).min(room) };
        let ahead_end = (u64::from(last) + 1 + ahead).min(u64::from(self.geom.chunk_pages(chunk))) as u32;
        fetch.extend((last + 1..ahead_end).filter(|&p| !present(p)));
        let total = (fetch.len() + create.len()) as u64;
        Ok(Plan { evict: self.victims(chunk, total), fetch: runs_of(chunk, fetch), create: runs_of(chunk, create) })
    }

    /// Whether the write `offset..offset+len` covers every byte of the page.
    fn covers(&self, offset: u64, len: u64, chunk: u64, page: u32) -> bool {
        let start = self.geom.page_offset(chunk, page);
        offset <= start && offset + len >= start + self.geom.page_len(chunk, page)
    }

    /// Pages that can be made free without evicting `keep`.
    fn room_without(&self, keep: u64) -> u64 {
        let kept = self.chunks.get(&keep).map_or(0, |c| u64::from(c.present.len()));
        self.capacity_pages - kept
    }

    /// Least recently used chunks (never `keep`) to drop so that `incoming`
    /// more pages fit.
    fn victims(&self, keep: u64, incoming: u64) -> Vec<Eviction> {
        let mut free = self.capacity_pages - self.resident_pages;
        let mut out = Vec::new();
        for &chunk in self.lru.values() {
            if free >= incoming {
                break;
            }
            if chunk == keep {
                continue;
            }
            let c = &self.chunks[&chunk];
            free += u64::from(c.present.len());
            out.push(Eviction { chunk, write_back: c.dirty.runs(chunk) });
        }
        out
    }

    /// The chunk of `ev` was written back and dropped.
    pub fn evicted(&mut self, ev: &Eviction) {
        for run in &ev.write_back {
            self.stats.bytes_written_back += self.bytes_of(*run);
        }
        self.stats.chunks_written_back += u64::from(!ev.write_back.is_empty());
        if let Some(c) = self.chunks.remove(&ev.chunk) {
            self.resident_pages -= u64::from(c.present.len());
            self.lru.remove(&c.tick);
        }
    }

    /// The pages of `run` were fetched (`fetched`) or created (zeros or about
    /// to be overwritten) and are now held.
    pub fn loaded(&mut self, run: PageRun, fetched: bool) {
        if fetched {
            self.stats.bytes_fetched += self.bytes_of(run);
            let end = self.geom.page_offset(run.chunk, run.first + run.count).min(self.geom.size);
            self.readahead.fetched_ahead(end);
        }
        let tick = self.next_tick();
        let c = self.chunks.entry(run.chunk).or_insert_with(|| ChunkState { tick, ..Default::default() });
        for p in run.first..run.first + run.count {
            self.resident_pages += u64::from(c.present.insert(p));
        }
        assert!(self.resident_pages <= self.capacity_pages, "a plan's evictions make room for its pages");
        if c.tick == tick {
            self.lru.insert(tick, run.chunk);
        }
    }

    /// The access `offset..offset+len` (one chunk, all its pages present) was
    /// served; `hit` says whether its plan fetched nothing.
    pub fn accessed(&mut self, offset: u64, len: u64, access: Access, hit: bool) {
        if hit {
            self.stats.cache_hits += 1
        } else {
            self.stats.cache_misses += 1
        }
        self.readahead.record(offset, offset + len);
        if len == 0 {
            return;
        }
        let (chunk, first) = self.geom.locate(offset);
        let (_, last) = self.geom.locate(offset + len - 1);
        let tick = self.next_tick();
        let c = self.chunks.get_mut(&chunk).expect("an accessed chunk is present");
        self.lru.remove(&c.tick);
        c.tick = tick;
        self.lru.insert(tick, chunk);
        if access == Access::Write {
            for p in first..=last {
                debug_assert!(c.present.contains(p));
                c.dirty.insert(p);
            }
        }
    }

    /// Forgets every page held, dirty ones included (the pool's copy changed
    /// under the cache); returns the chunks that had pages. Statistics stay.
    pub fn forget_all(&mut self) -> Vec<u64> {
        let chunks: Vec<u64> = self.chunks.drain().map(|(k, _)| k).collect();
        self.lru.clear();
        self.resident_pages = 0;
        chunks
    }

    /// Every run of dirty pages, chunk by chunk.
    pub fn dirty_runs(&self) -> Vec<PageRun> {
        let chunks: BTreeSet<u64> = self.chunks.iter().filter(|(_, c)| !c.dirty.is_empty()).map(|(&k, _)| k).collect();
        chunks.into_iter().flat_map(|k| self.chunks[&k].dirty.runs(k)).collect()
    }

    /// The pages of `run` were written back and are clean now.
    pub fn cleaned(&mut self, run: PageRun) {
        self.stats.bytes_written_back += self.bytes_of(run);
        if let Some(c) = self.chunks.get_mut(&run.chunk) {
            let keep: Vec<u32> = c.dirty.iter().filter(|&p| p < run.first || p >= run.first + run.count).collect();
            let was_dirty = !c.dirty.is_empty();
            c.dirty.clear();
            for p in keep {
                c.dirty.insert(p);
            }
            self.stats.chunks_written_back += u64::from(was_dirty && c.dirty.is_empty());
        }
    }

    fn bytes_of(&self, run: PageRun) -> u64 {
        let r = self.geom.run_bytes(run);
        r.end - r.start
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}
