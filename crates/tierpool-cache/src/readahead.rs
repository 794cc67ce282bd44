//! Sequential-access detection: how many pages to fetch beyond an access.

/// Grows a read-ahead window while accesses follow each other, and drops it
/// at the first jump, so random access fetches only what it touches.
#[derive(Clone, Debug)]
pub struct Readahead {
    /// Region offset just past the previous access.
    next: Option<u64>,
    window: u64,
    max_pages: u64,
}

/// Pages fetched ahead after the first sequential step.
const FIRST_WINDOW: u64 = 8;

impl Readahead {
    pub fn new(max_pages: u64) -> Readahead {
        Readahead { next: None, window: 0, max_pages }
    }

    /// Pages to fetch beyond an access starting at `offset` (not yet recorded).
    pub fn window_for(&self, offset: u64) -> u64 {
        match self.next {
            Some(n) if n == offset => (self.window.max(FIRST_WINDOW / 2) * 2).min(self.max_pages),
            _ => 0,
        }
    }

    /// Records the access `offset..end`.
    pub fn record(&mut self, offset: u64, end: u64) {
        self.window = self.window_for(offset);
        self.next = Some(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_while_sequential_and_resets_on_a_jump() {
        let mut r = Readahead::new(64);
        let mut at = 0;
        let mut seen = vec![];
        for _ in 0..6 {
            seen.push(r.window_for(at));
            r.record(at, at + 4096);
            at += 4096;
        }
        assert_eq!(seen, vec![0, 8, 16, 32, 64, 64]);
        assert_eq!(r.window_for(1 << 30), 0);
        r.record(1 << 30, (1 << 30) + 1);
        assert_eq!(r.window_for((1 << 30) + 1), 8);
    }
}
