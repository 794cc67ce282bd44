//! Where bytes, pages and chunks of a region are.

use crate::PAGE_SIZE;
use std::ops::Range;

/// The shape of a region: its size and its chunk size (a multiple of
/// [`PAGE_SIZE`]). The last chunk and its last page may be short.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub size: u64,
    pub chunk_size: u64,
}

/// Consecutive pages of one chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageRun {
    pub chunk: u64,
    pub first: u32,
    pub count: u32,
}

impl Geometry {
    /// # Panics
    /// If `chunk_size` is not a positive multiple of [`PAGE_SIZE`].
    pub fn new(size: u64, chunk_size: u64) -> Geometry {
        assert!(chunk_size > 0 && chunk_size.is_multiple_of(PAGE_SIZE), "chunk size {chunk_size} is not whole pages");
        Geometry { size, chunk_size }
    }

    pub fn pages_per_chunk(&self) -> u32 {
        (self.chunk_size / PAGE_SIZE) as u32
    }

    pub fn chunks(&self) -> u64 {
        self.size.div_ceil(self.chunk_size)
    }

    /// Bytes in chunk `chunk` (short for the last one).
    pub fn chunk_len(&self, chunk: u64) -> u64 {
        self.size.saturating_sub(chunk * self.chunk_size).min(self.chunk_size)
    }

    /// Pages in chunk `chunk`.
    pub fn chunk_pages(&self, chunk: u64) -> u32 {
        self.chunk_len(chunk).div_ceil(PAGE_SIZE) as u32
    }

    /// Region offset of page `page` of `chunk`.
    pub fn page_offset(&self, chunk: u64, page: u32) -> u64 {
        chunk * self.chunk_size + u64::from(page) * PAGE_SIZE
    }

    /// Bytes of page `page` of `chunk` that lie inside the region.
    pub fn page_len(&self, chunk: u64, page: u32) -> u64 {
        self.size.saturating_sub(self.page_offset(chunk, page)).min(PAGE_SIZE)
    }

    /// The chunk and page holding region offset `offset`.
    pub fn locate(&self, offset: u64) -> (u64, u32) {
        (offset / self.chunk_size, ((offset % self.chunk_size) / PAGE_SIZE) as u32)
    }

    /// The part of `offset..offset+len` inside each chunk it touches, in order:
    /// `(chunk, byte range within the chunk)`.
    pub fn split(&self, offset: u64, len: u64) -> Vec<(u64, Range<u64>)> {
        let mut out = Vec::new();
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let chunk = at / self.chunk_size;
            let start = at - chunk * self.chunk_size;
            let stop = (end - chunk * self.chunk_size).min(self.chunk_size);
            out.push((chunk, start..stop));
            at = chunk * self.chunk_size + stop;
        }
        out
    }

    /// Byte range of a run within its chunk, clipped to the region.
    pub fn run_bytes(&self, run: PageRun) -> Range<u64> {
        let start = u64::from(run.first) * PAGE_SIZE;
        let end = (u64::from(run.first + run.count) * PAGE_SIZE).min(self.chunk_len(run.chunk));
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_last_chunk_and_page() {
        let g = Geometry::new(3 * 8192 + 100, 8192);
        assert_eq!((g.chunks(), g.chunk_len(3), g.chunk_pages(3), g.page_len(3, 0)), (4, 100, 1, 100));
        assert_eq!(g.run_bytes(PageRun { chunk: 3, first: 0, count: 1 }), 0..100);
        assert_eq!(g.split(8000, 300), vec![(0, 8000..8192), (1, 0..108)]);
        assert_eq!(g.locate(8192 + 4097), (1, 1));
    }
}
