//! A set of pages of one chunk.

use crate::PageRun;

/// A bitset over the pages of one chunk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageSet {
    words: Vec<u64>,
    len: u32,
}

impl PageSet {
    pub fn new() -> PageSet {
        PageSet::default()
    }

    pub fn contains(&self, page: u32) -> bool {
        self.words.get((page / 64) as usize).is_some_and(|w| w & (1 << (page % 64)) != 0)
    }

    /// Adds `page`; true if it was not there.
    pub fn insert(&mut self, page: u32) -> bool {
        let i = (page / 64) as usize;
        if self.words.len() <= i {
            self.words.resize(i + 1, 0);
        }
        let bit = 1 << (page % 64);
        let new = self.words[i] & bit == 0;
        self.words[i] |= bit;
        self.len += u32::from(new);
        new
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.len = 0;
    }

    /// The pages in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| (0..64).filter(move |b| w & (1 << b) != 0).map(move |b| i as u32 * 64 + b))
    }

    /// Maximal runs of consecutive pages, as runs of `chunk`.
    pub fn runs(&self, chunk: u64) -> Vec<PageRun> {
        runs_of(chunk, self.iter())
    }
}

/// Groups ascending pages into maximal runs.
pub(crate) fn runs_of(chunk: u64, pages: impl IntoIterator<Item = u32>) -> Vec<PageRun> {
    let mut out: Vec<PageRun> = Vec::new();
    for p in pages {
        match out.last_mut() {
            Some(r) if r.first + r.count == p => r.count += 1,
            _ => out.push(PageRun { chunk, first: p, count: 1 }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_maximal() {
        let mut s = PageSet::new();
        for p in [0, 1, 2, 5, 63, 64, 65, 200] {
            assert!(s.insert(p));
        }
        assert!(!s.insert(64));
        assert_eq!(s.len(), 8);
        let r: Vec<_> = s.runs(7).iter().map(|r| (r.first, r.count)).collect();
        assert_eq!(r, vec![(0, 3), (5, 1), (63, 3), (200, 1)]);
    }
}
