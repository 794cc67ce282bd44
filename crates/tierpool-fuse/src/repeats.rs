//! The files made here that the kernel is told of again after another
//! client changed them (see `watch.rs`, `Again`), kept in the order they
//! are due, so that each wake of the notifying thread costs what is due
//! then, not a pass over every file still being repeated (a mount that
//! makes thousands of files another client then changes, such as the
//! write-back of an attachment, keeps thousands).
//!
//! Invariant: `due` holds exactly one `(next, ino)` per file of `files`,
//! with that file's `next`.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How often, and for how long, a file made here is told again of a change.
pub(crate) const AGAIN_OFTEN: Duration = Duration::from_millis(10);
pub(crate) const AGAIN_OFTEN_FOR: Duration = Duration::from_millis(200);
/// How often it is told again after that.
pub(crate) const AGAIN_LATER: Duration = Duration::from_secs(1);

/// Of a file made here whose answer the kernel may keep until `until`,
/// and which another client changed at `first`: the kernel makes its
/// inode only once the answer reaches the process that made it, and drops
/// nothing of an inode it has not made yet (nor says so), so it is told
/// again (its attributes) at `next`: every 10 ms for 200 ms, then every
/// second, and at `until`. After lost changes, every file made here in the
/// last `LONG` is (up to 65,536: a burst of notifications, as rare as a
/// coordinator starting again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Again {
    first: Instant,
    next: Instant,
    until: Instant,
}

/// Every file being told again, by inode and by when it is due.
#[derive(Debug, Default)]
pub(crate) struct Repeats {
    files: HashMap<u64, Again>,
    due: BTreeSet<(Instant, u64)>,
}

impl Repeats {
    /// File `ino` was changed elsewhere at `now`, and the kernel may keep
    /// the answer that made it until `until`: its repeats start afresh.
    pub fn start(&mut self, ino: u64, now: Instant, until: Instant) {
        let again = Again { first: now, next: now + AGAIN_OFTEN, until };
        if let Some(old) = self.files.insert(ino, again) {
            self.due.remove(&(old.next, ino));
        }
        self.due.insert((again.next, ino));
    }

    /// When the next file is due, if any is repeated.
    pub fn next(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// The files due at `now`, each told again at its next time, or
    /// forgotten once `now` reaches its `until`.
    pub fn take_due(&mut self, now: Instant) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(&(at, ino)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            out.push(ino);
            let Some(a) = self.files.get_mut(&ino) else { continue };
            if now < a.until {
                let step = if now < a.first + AGAIN_OFTEN_FOR { AGAIN_OFTEN } else { AGAIN_LATER };
                a.next = (now + step).min(a.until);
                self.due.insert((a.next, ino));
            } else {
                self.files.remove(&ino);
            }
        }
        out
    }

    #[cfg(test)]
    fn check(&self) {
        assert_eq!(self.due.len(), self.files.len());
        for (ino, a) in &self.files {
            assert!(self.due.contains(&(a.next, *ino)), "{ino} is not due at its next time");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The repeats as a map scanned whole at every wake (what they were).
    #[derive(Default)]
    struct Scanned(HashMap<u64, Again>);

    impl Scanned {
        fn start(&mut self, ino: u64, now: Instant, until: Instant) {
            self.0.insert(ino, Again { first: now, next: now + AGAIN_OFTEN, until });
        }

        fn next(&self) -> Option<Instant> {
            self.0.values().map(|a| a.next).min()
        }

        fn take_due(&mut self, now: Instant) -> Vec<u64> {
            let mut out = Vec::new();
            self.0.retain(|ino, a| {
                if a.next > now {
                    return true;
                }
                out.push(*ino);
                let step = if now < a.first + AGAIN_OFTEN_FOR { AGAIN_OFTEN } else { AGAIN_LATER };
                a.next = (now + step).min(a.until);
                now < a.until
            });
            out
        }
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// A change of file `ino` heard, its answer kept for `for_ms` more.
        Start { ino: u64, for_ms: u64 },
        /// The clock moves on by `ms`, and the due files are told.
        Wake { ms: u64 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..12u64, 0..3_000u64).prop_map(|(ino, for_ms)| Step::Start { ino, for_ms }),
            prop_oneof![0..30u64, 0..1_500u64].prop_map(|ms| Step::Wake { ms }),
        ]
    }

    proptest! {
        #[test]
        fn repeats_tell_what_a_scan_of_every_file_told(steps in prop::collection::vec(step(), 1..120)) {
            let (mut r, mut model) = (Repeats::default(), Scanned::default());
            let mut now = Instant::now();
            for s in steps {
                match s {
                    Step::Start { ino, for_ms } => {
                        let until = now + Duration::from_millis(for_ms);
                        r.start(ino, now, until);
                        model.start(ino, now, until);
                    }
                    Step::Wake { ms } => {
                        now += Duration::from_millis(ms);
                        let (mut got, mut want) = (r.take_due(now), model.take_due(now));
                        got.sort_unstable();
                        want.sort_unstable();
                        prop_assert_eq!(got, want, "told at {:?}", now);
                    }
                }
                r.check();
                prop_assert_eq!(r.next(), model.next());
            }
        }
    }

    #[test]
    fn a_file_is_told_every_10_ms_then_every_second_until_its_answer_lapses() {
        let (mut r, t0) = (Repeats::default(), Instant::now());
        r.start(7, t0, t0 + Duration::from_millis(2_500));
        let mut told = Vec::new();
        while let Some(at) = r.next() {
            assert_eq!(r.take_due(at), vec![7]);
            told.push(at.duration_since(t0).as_millis());
        }
        let often: Vec<u128> = (1..=20).map(|i| i * 10).collect();
        assert_eq!(told, [often, vec![1_200, 2_200, 2_500]].concat());
    }
}
