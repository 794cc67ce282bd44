//! A cache shell that holds page bytes in memory.

use crate::{Access, CacheError, CacheState, CacheStats, Geometry, PageRun, Plan, PAGE_SIZE};
use std::collections::HashMap;

/// Moves bytes between the cache and the pool. Offsets are within a chunk.
pub trait Backend {
    type Error: From<CacheError>;
    /// `len` bytes of `chunk` from `offset`; bytes never written read as zeros.
    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, Self::Error>;
    /// Stores `data` into `chunk` at `offset`.
    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> Result<(), Self::Error>;
}

type Page = Box<[u8; PAGE_SIZE as usize]>;

/// A region's cache: reads and writes at any offset, backed by a [`Backend`].
/// Resident bytes never exceed the capacity; only dirty pages are written back.
pub struct PageCache<B: Backend> {
    state: CacheState,
    /// The pages held, by chunk: an eviction drops a chunk's pages without
    /// looking at any other's.
    pages: HashMap<u64, HashMap<u32, Page>>,
    backend: B,
}

impl<B: Backend> PageCache<B> {
    pub fn new(geom: Geometry, capacity: u64, max_readahead: u64, backend: B) -> Result<PageCache<B>, CacheError> {
        Ok(PageCache { state: CacheState::new(geom, capacity, max_readahead)?, pages: HashMap::new(), backend })
    }

    pub fn state(&self) -> &CacheState {
        &self.state
    }

    pub fn stats(&self) -> CacheStats {
        self.state.stats()
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Fills `buf` from region offset `offset`.
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), B::Error> {
        let geom = self.state.geometry();
        let mut done = 0usize;
        for (chunk, range) in geom.split(offset, buf.len() as u64) {
            let len = range.end - range.start;
            let at = chunk * geom.chunk_size + range.start;
            self.prepare(at, len, Access::Read)?;
            self.copy(
                at,
                len,
                |page, from, n, out_at| {
                    buf[out_at..out_at + n].copy_from_slice(&page[from..from + n]);
                },
                done,
            );
            done += len as usize;
        }
        if buf.is_empty() {
            self.state.plan(offset, 0, Access::Read)?;
        }
        Ok(())
    }

    /// Writes `data` at region offset `offset`; it reaches the pool on
    /// eviction or [`flush`](Self::flush).
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), B::Error> {
        let geom = self.state.geometry();
        let mut done = 0usize;
        for (chunk, range) in geom.split(offset, data.len() as u64) {
            let len = range.end - range.start;
            let at = chunk * geom.chunk_size + range.start;
            self.prepare(at, len, Access::Write)?;
            let src = &data[done..done + len as usize];
            self.copy_in(at, src);
            done += len as usize;
        }
        if data.is_empty() {
            self.state.plan(offset, 0, Access::Write)?;
        }
        Ok(())
    }

    /// Drops every page held, dirty ones unwritten: the next access fetches
    /// from the pool again.
    pub fn discard(&mut self) {
        self.state.forget_all();
        self.pages.clear();
    }

    /// Sends every dirty page to the pool.
    pub fn flush(&mut self) -> Result<(), B::Error> {
        for run in self.state.dirty_runs() {
            let bytes = self.gather(run);
            let off = self.state.geometry().run_bytes(run).start;
            self.backend.write_back(run.chunk, off, &bytes)?;
            self.state.cleaned(run);
        }
        Ok(())
    }

    /// Carries out the plan of one access within one chunk and records it.
    fn prepare(&mut self, offset: u64, len: u64, access: Access) -> Result<(), B::Error> {
        let plan: Plan = self.state.plan(offset, len, access)?;
        let geom = self.state.geometry();
        for ev in &plan.evict {
            for &run in &ev.write_back {
                let bytes = self.gather(run);
                self.backend.write_back(run.chunk, geom.run_bytes(run).start, &bytes)?;
            }
            self.pages.remove(&ev.chunk);
            self.state.evicted(ev);
        }
        for &run in &plan.fetch {
            let r = geom.run_bytes(run);
            let bytes = self.backend.fetch(run.chunk, r.start, r.end - r.start)?;
            let pages = self.pages.entry(run.chunk).or_default();
            for (i, p) in (run.first..run.first + run.count).enumerate() {
                let mut page: Page = Box::new([0; PAGE_SIZE as usize]);
                let from = (i * PAGE_SIZE as usize).min(bytes.len());
                let to = (from + PAGE_SIZE as usize).min(bytes.len());
                page[..to - from].copy_from_slice(&bytes[from..to]);
                pages.insert(p, page);
            }
            self.state.loaded(run, true);
        }
        for &run in &plan.create {
            let pages = self.pages.entry(run.chunk).or_default();
            for p in run.first..run.first + run.count {
                pages.insert(p, Box::new([0; PAGE_SIZE as usize]));
            }
            self.state.loaded(run, false);
        }
        self.state.accessed(offset, len, access, plan.is_hit());
        Ok(())
    }

    /// Calls `f(page, offset in page, bytes, offset in output)` for each page
    /// piece of `offset..offset+len`.
    fn copy(&self, offset: u64, len: u64, mut f: impl FnMut(&[u8], usize, usize, usize), base: usize) {
        let geom = self.state.geometry();
        let mut at = offset;
        while at < offset + len {
            let (chunk, page) = geom.locate(at);
            let within = (at % PAGE_SIZE) as usize;
            let n = ((PAGE_SIZE as usize - within) as u64).min(offset + len - at) as usize;
            f(&self.page(chunk, page)[..], within, n, base + (at - offset) as usize);
            at += n as u64;
        }
    }

    fn copy_in(&mut self, offset: u64, src: &[u8]) {
        let geom = self.state.geometry();
        let mut done = 0usize;
        while done < src.len() {
            let at = offset + done as u64;
            let (chunk, page) = geom.locate(at);
            let within = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - within).min(src.len() - done);
            let p = self.pages.get_mut(&chunk).and_then(|c| c.get_mut(&page)).expect("a written page is present");
            p[within..within + n].copy_from_slice(&src[done..done + n]);
            done += n;
        }
    }

    /// A page the plan of its access made present.
    fn page(&self, chunk: u64, page: u32) -> &Page {
        &self.pages[&chunk][&page]
    }

    /// The bytes of a run, clipped to the region.
    fn gather(&self, run: PageRun) -> Vec<u8> {
        let r = self.state.geometry().run_bytes(run);
        let mut out = Vec::with_capacity((r.end - r.start) as usize);
        for p in run.first..run.first + run.count {
            out.extend_from_slice(&self.page(run.chunk, p)[..]);
        }
        out.truncate((r.end - r.start) as usize);
        out
    }
}
