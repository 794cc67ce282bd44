//! Whether the DISK tier's file system ran out of space, and the budget that
//! leaves: pure, the clock is passed in.
//!
//! When writing a chunk file fails with ENOSPC, the disk is full whatever the
//! configured budget says. The tier is then capped at the bytes it holds: its
//! effective budget becomes `min(budget, held)`, so changes that need more
//! DISK room fail at once with `PoolFull` instead of writing into a full file
//! system again (each attempt would write, fail and unlink a partial file).
//! Room made inside the cap by dropping reclaimable chunks stays usable (they
//! are unlinked before anything is written); room a change frees only after
//! its writes (the old file of the chunk it moves) is not counted while the
//! cap is in force, so a full disk is not written to on the strength of it.
//!
//! The cap lifts when chunks are deleted from DISK at the coordinator's
//! request (space came back), or [`RETRY`] after it was set (others may have
//! freed space on a shared file system), whichever comes first. A new ENOSPC
//! sets it again at what the tier holds then.

use std::time::{Duration, Instant};

/// How long a full disk is believed full without a delete: long enough that
/// a full disk costs one failed write per half minute, not one per put; short
/// enough that space freed outside the tier is used soon.
pub const RETRY: Duration = Duration::from_secs(30);

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskFull {
    /// Bytes held when the disk was found full, and when.
    cap: Option<(u64, Instant)>,
}

impl DiskFull {
    /// The disk was found full at `now`, holding `held` bytes of chunks.
    pub fn engage(&mut self, held: u64, now: Instant) {
        self.cap = Some((held, now));
    }

    /// Space came back: the configured budget applies again.
    pub fn lift(&mut self) {
        self.cap = None;
    }

    /// The cap in force at `now`, if any.
    pub fn cap(&self, now: Instant, retry: Duration) -> Option<u64> {
        self.cap.filter(|(_, since)| now.saturating_duration_since(*since) < retry).map(|(held, _)| held)
    }

    /// The DISK budget in force at `now`.
    pub fn budget(&self, configured: u64, now: Instant, retry: Duration) -> u64 {
        self.cap(now, retry).map_or(configured, |held| held.min(configured))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_the_budget_at_what_was_held_until_lifted() {
        let t0 = Instant::now();
        let mut f = DiskFull::default();
        assert_eq!((f.cap(t0, RETRY), f.budget(1000, t0, RETRY)), (None, 1000));
        f.engage(600, t0);
        assert_eq!((f.cap(t0, RETRY), f.budget(1000, t0, RETRY)), (Some(600), 600));
        assert_eq!(f.budget(500, t0, RETRY), 500, "never above the configured budget");
        f.lift();
        assert_eq!(f.budget(1000, t0, RETRY), 1000);
    }

    #[test]
    fn the_cap_expires_after_the_retry_interval() {
        let t0 = Instant::now();
        let mut f = DiskFull::default();
        f.engage(600, t0);
        assert_eq!(f.budget(1000, t0 + RETRY - Duration::from_millis(1), RETRY), 600);
        assert_eq!(f.budget(1000, t0 + RETRY, RETRY), 1000);
        f.engage(700, t0 + RETRY);
        assert_eq!(f.budget(1000, t0 + RETRY, RETRY), 700, "a new ENOSPC sets it again");
        assert_eq!(f.budget(1000, t0, RETRY), 700, "a clock read before the cap does not lift it");
    }
}
