//! When each inode's chunks on this worker were last read or written by a
//! client: what lets the pool tell which files of an under-store were used
//! least recently when it has to let some go (the metadata sees writes, not
//! reads). Pure: the caller passes the time in.
//!
//! Invariants: an inode has an entry iff one of its chunks was used since it
//! was last forgotten; an entry only moves forward in time; a copy taken for
//! another worker, a move between tiers or a spill is not a use.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tierpool_types::InodeId;

#[derive(Debug, Default)]
pub(crate) struct LastUse {
    at: HashMap<InodeId, Instant>,
}

impl LastUse {
    pub fn used(&mut self, inode: InodeId, now: Instant) {
        let at = self.at.entry(inode).or_insert(now);
        *at = (*at).max(now);
    }

    pub fn forget(&mut self, inodes: &[InodeId]) {
        for i in inodes {
            self.at.remove(i);
        }
    }

    /// How long ago each inode was last used, in order; `None` if not since
    /// this worker started (or since it was forgotten).
    pub fn ages(&self, inodes: &[InodeId], now: Instant) -> Vec<Option<Duration>> {
        inodes.iter().map(|i| self.at.get(i).map(|at| now.saturating_duration_since(*at))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_follow_the_latest_use_and_forgotten_inodes_have_none() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut u = LastUse::default();
        u.used(InodeId(1), s(1));
        u.used(InodeId(2), s(5));
        u.used(InodeId(1), s(3));
        u.used(InodeId(1), s(2));
        let ages = u.ages(&[InodeId(1), InodeId(2), InodeId(3)], s(10));
        assert_eq!(ages, vec![Some(Duration::from_secs(7)), Some(Duration::from_secs(5)), None]);
        u.forget(&[InodeId(2)]);
        assert_eq!(u.ages(&[InodeId(2), InodeId(1)], s(10)), vec![None, Some(Duration::from_secs(7))]);
        assert_eq!(u.ages(&[InodeId(1)], s(0)), vec![Some(Duration::ZERO)], "a clock behind the use: age 0");
    }
}
