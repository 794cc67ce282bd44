//! The change feed: what the latest ops changed (inodes, and entries by
//! directory and name), for clients that keep copies of what they read. A
//! mount asks for the changes since a position (`CoordRequest::Changes`)
//! and tells its kernel to drop what they touch, so the kernel may keep
//! names and attributes for long instead of a second.
//!
//! Positions are lsns: the changes of the op with lsn L are at L, and a
//! reader that has read up to `next` asks next for `since = next`. The
//! feed keeps the changes of the latest ops, at most `MAX_ITEMS` items in
//! all; a reader further behind, or one that read from another feed (this
//! coordinator's `id` is new at every start, and lsns say nothing across
//! starts), is told it *lost* changes and must drop every copy it has.
//!
//! Invariant: every op applied after a reader's position, with changes,
//! is in the answers it gets from that position on, or it is told it lost
//! some. Changes are recorded under the coordinator's state lock, as the op
//! is applied, so any read that saw an op's effect was answered after the
//! op's changes were in the feed. Pure: no I/O.

use std::collections::VecDeque;
use tierpool_meta::Changes;
use tierpool_proto::ChangesAnswer;

/// Items (inodes and entries) kept, over all ops.
const MAX_ITEMS: usize = 256 * 1024;
/// Items one answer carries at most (it then stops before the op that
/// would pass it; one op's items always go whole).
pub(crate) const ANSWER_ITEMS: usize = 8192;

pub(crate) struct Feed {
    id: u64,
    /// Every op from this lsn on is here (if it changed anything).
    from: u64,
    /// The lsn the next op gets.
    next: u64,
    ops: VecDeque<(u64, Changes)>,
    items: usize,
}

fn size(c: &Changes) -> usize {
    c.inodes.len() + c.entries.len()
}

impl Feed {
    /// A feed named `id`, whose first op gets lsn `next`.
    pub(crate) fn new(id: u64, next: u64) -> Feed {
        Feed { id, from: next, next, ops: VecDeque::new(), items: 0 }
    }

    /// The op with lsn `lsn` (the next one) changed `changes`.
    pub(crate) fn record(&mut self, lsn: u64, changes: Changes) {
        debug_assert!(lsn >= self.next, "ops are recorded in lsn order");
        self.next = lsn + 1;
        if changes.is_empty() {
            return;
        }
        self.items += size(&changes);
        self.ops.push_back((lsn, changes));
        while self.items > MAX_ITEMS {
            let Some((lsn, c)) = self.ops.pop_front() else { break };
            self.items -= size(&c);
            self.from = lsn + 1;
        }
    }

    /// `(from, next, ops, items)` for the status.
    pub(crate) fn extent(&self) -> (u64, u64, u64, u64) {
        (self.from, self.next, self.ops.len() as u64, self.items as u64)
    }

    /// The changes since position `since` of feed `feed` (`None`: a reader
    /// starting, told only where the feed is).
    pub(crate) fn read(&self, feed: u64, since: Option<u64>) -> ChangesAnswer {
        let mut a = ChangesAnswer { feed: self.id, next: self.next, ..ChangesAnswer::default() };
        let Some(since) = since else { return a };
        if feed != self.id || since < self.from || since > self.next {
            a.lost = true;
            return a;
        }
        let start = self.ops.partition_point(|(lsn, _)| *lsn < since);
        let mut n = 0;
        for (lsn, c) in self.ops.range(start..) {
            if n == 0 && size(c) > ANSWER_ITEMS {
                // One op too large to send (a tree removed whole): the
                // reader drops everything and goes on after it.
                return ChangesAnswer { lost: true, next: lsn + 1, ..a };
            }
            if n + size(c) > ANSWER_ITEMS {
                a.next = *lsn;
                break;
            }
            n += size(c);
            a.inodes.extend_from_slice(&c.inodes);
            a.entries.extend(c.entries.iter().cloned());
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::InodeId;

    fn changed(ids: &[u64]) -> Changes {
        Changes { inodes: ids.iter().map(|i| (InodeId(*i), 7)).collect(), entries: vec![(InodeId(1), "n".into(), 7)] }
    }

    fn ids(a: &ChangesAnswer) -> Vec<u64> {
        a.inodes.iter().map(|(i, _)| i.0).collect()
    }

    #[test]
    fn a_reader_gets_every_change_after_its_position_once() {
        let mut f = Feed::new(9, 10);
        let start = f.read(9, None);
        assert_eq!((start.next, start.lost, start.inodes.len()), (10, false, 0));
        f.record(10, changed(&[2, 3]));
        f.record(11, Changes::default());
        f.record(12, changed(&[4]));
        let a = f.read(9, Some(10));
        assert_eq!((ids(&a), a.entries.len(), a.next, a.lost), (vec![2, 3, 4], 2, 13, false));
        let b = f.read(9, Some(11));
        assert_eq!((ids(&b), b.next), (vec![4], 13), "from the position on");
        let c = f.read(9, Some(13));
        assert_eq!((ids(&c), c.next, c.lost), (vec![], 13, false), "nothing new");
    }

    #[test]
    fn a_reader_too_far_behind_or_of_another_feed_is_told_it_lost_changes() {
        let mut f = Feed::new(9, 1);
        assert!(f.read(8, Some(1)).lost, "another coordinator's position");
        assert!(f.read(9, Some(2)).lost, "a position beyond the feed");
        let big: Vec<u64> = (0..MAX_ITEMS as u64 / 2).collect();
        f.record(1, changed(&big));
        f.record(2, changed(&big));
        assert!(f.read(9, Some(1)).lost, "op 1 was dropped to keep the bound");
        let a = f.read(9, Some(2));
        assert_eq!((a.lost, a.next), (true, 3), "an op too large to answer: lost, and on after it");
        f.record(3, changed(&[5]));
        assert_eq!(ids(&f.read(9, Some(3))), vec![5]);
        assert!(f.items <= MAX_ITEMS);
    }

    #[test]
    fn a_long_run_of_changes_comes_in_answers_of_bounded_size_that_resume_where_they_stopped() {
        let mut f = Feed::new(1, 1);
        for lsn in 1..=5000u64 {
            f.record(lsn, changed(&[lsn, lsn + 100_000]));
        }
        let (mut since, mut seen) = (1, Vec::new());
        loop {
            let a = f.read(1, Some(since));
            assert!(!a.lost && a.inodes.len() + a.entries.len() <= ANSWER_ITEMS);
            seen.extend(ids(&a).into_iter().filter(|i| *i < 100_000));
            if a.next == since {
                break;
            }
            since = a.next;
        }
        assert_eq!(seen, (1..=5000).collect::<Vec<u64>>());
    }
}
