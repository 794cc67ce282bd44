//! Sequential-access detection: how many pages to fetch beyond an access.

/// Grows a read-ahead window while accesses follow each other, and drops it
/// at the first jump, so random access fetches only what it touches.
///
/// An access is sequential if it starts where the previous access ended, or
/// where the previous read-ahead ended: a shell that does not see hits (a
/// page-fault handler sees only misses) next hears of the reader there.
#[derive(Clone, Debug)]
pub struct Readahead {
    /// Region offset just past the previous access.
    next: Option<u64>,
    /// Region offset just past the last read-ahead.
    ahead_end: Option<u64>,
    /// The same, for the access being served (it takes effect when recorded).
    pending_ahead_end: Option<u64>,
    window: u64,
    max_pages: u64,
}

/// Pages fetched ahead after the first sequential step.
const FIRST_WINDOW: u64 = 8;

impl Readahead {
    pub fn new(max_pages: u64) -> Readahead {
        Readahead { next: None, ahead_end: None, pending_ahead_end: None, window: 0, max_pages }
    }

    /// Pages to fetch beyond an access starting at `offset` (not yet recorded).
    pub fn window_for(&self, offset: u64) -> u64 {
        if self.next == Some(offset) || self.ahead_end == Some(offset) {
            (self.window.max(FIRST_WINDOW / 2) * 2).min(self.max_pages)
        } else {
            0
        }
    }

    /// Records the access `offset..end`.
    pub fn record(&mut self, offset: u64, end: u64) {
        self.window = self.window_for(offset);
        self.next = Some(end);
        if let Some(a) = self.pending_ahead_end.take() {
            self.ahead_end = Some(a);
        }
    }

    /// Records that the access about to be recorded fetched pages up to
    /// region offset `end`.
    pub fn fetched_ahead(&mut self, end: u64) {
        self.pending_ahead_end = Some(end);
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

    #[test]
    fn a_miss_where_read_ahead_ended_is_sequential() {
        let mut r = Readahead::new(64);
        r.record(0, 4096);
        assert_eq!(r.window_for(4096), 8);
        r.fetched_ahead(9 * 4096);
        r.record(4096, 8192);
        // The reader consumed the read-ahead without being seen.
        assert_eq!(r.window_for(9 * 4096), 16);
        r.fetched_ahead(25 * 4096);
        r.record(9 * 4096, 10 * 4096);
        assert_eq!(r.window_for(25 * 4096), 32);
        assert_eq!(r.window_for(20 * 4096), 0);
    }
}
