//! Speeds of workers from their measured bandwidth: a link that stays slow
//! for a window changes its worker's share once; blips, idle workers and a
//! pool of one change nothing; a recovered link brings the share back.

use crate::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::engine::speeds::SpeedWatch;
use tierpool_types::WorkerId;

const WINDOW: Duration = Duration::from_secs(30);
const MB: u64 = 1_000_000;

/// Workers' cumulative counters, fed once a second at given rates (bytes a
/// second of transfer time: each second carries `MIN_BYTES` in `1/rate`).
struct Feed {
    watch: SpeedWatch,
    counters: BTreeMap<WorkerId, (u64, u64)>,
    now: Duration,
}

impl Feed {
    fn new() -> Feed {
        Feed { watch: SpeedWatch::new(20, WINDOW), counters: BTreeMap::new(), now: Duration::ZERO }
    }

    /// One second passes; each worker moved 4 MiB at its rate (0: idle).
    fn second(&mut self, rates: &[(u32, u64)]) {
        self.now += Duration::from_secs(1);
        for (w, rate) in rates {
            let c = self.counters.entry(WorkerId(*w)).or_default();
            if *rate > 0 {
                let bytes = 4 << 20;
                c.0 += bytes;
                c.1 += bytes * 1_000_000_000 / rate;
            }
            self.watch.report(WorkerId(*w), self.now, c.0, c.1);
        }
    }

    fn changes(&mut self, logged: &BTreeMap<WorkerId, u8>) -> Vec<(WorkerId, u8)> {
        self.watch.changes(self.now, logged)
    }
}

#[test]
fn a_link_slow_for_a_whole_window_changes_its_share_once() {
    let mut f = Feed::new();
    let mut logged = BTreeMap::new();
    for _ in 0..40 {
        f.second(&[(1, 800 * MB), (2, 800 * MB), (3, 800 * MB)]);
        assert!(f.changes(&logged).is_empty(), "all healthy");
    }
    assert_eq!(f.watch.measured(WorkerId(3), f.now), Some(800 * MB));
    // Worker 3's link drops to a quarter.
    let mut changed = Vec::new();
    for s in 0..80 {
        f.second(&[(1, 800 * MB), (2, 800 * MB), (3, 200 * MB)]);
        for (w, p) in f.changes(&logged) {
            changed.push((s, w, p));
            logged.insert(w, p);
        }
    }
    // The measured window fills with slow samples over 30 s, then the
    // deviation must last 30 s more: one change, to a quarter.
    assert_eq!(changed.len(), 1, "{changed:?}");
    let (s, w, p) = changed[0];
    assert_eq!((w, p), (WorkerId(3), 25));
    assert!((30..=62).contains(&s), "changed after {s} s");
    // It recovers: back to 100%, again after a window.
    let mut back = Vec::new();
    for s in 0..80 {
        f.second(&[(1, 800 * MB), (2, 800 * MB), (3, 800 * MB)]);
        for (w, p) in f.changes(&logged) {
            back.push((s, (w, p)));
            logged.remove(&w);
        }
    }
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0].1, (WorkerId(3), 100));
    assert!(back[0].0 >= 30, "{back:?}");
}

#[test]
fn blips_idle_workers_and_a_lone_worker_change_nothing() {
    let mut f = Feed::new();
    let logged = BTreeMap::new();
    for s in 0..200 {
        // A blip of 10 s every 60 s: less than half a window, never the median.
        let slow = s % 60 < 10;
        f.second(&[(1, 800 * MB), (2, if slow { 100 * MB } else { 800 * MB })]);
        assert!(f.changes(&logged).is_empty(), "second {s}");
    }
    let mut f = Feed::new();
    for s in 0..100 {
        // Worker 2 idle: not slow, just not measured.
        f.second(&[(1, 800 * MB), (2, 0)]);
        assert!(f.changes(&logged).is_empty(), "second {s}");
    }
    assert_eq!(f.watch.measured(WorkerId(2), f.now), None);
    let mut f = Feed::new();
    for _ in 0..100 {
        f.second(&[(1, 10 * MB)]);
        assert!(f.changes(&logged).is_empty(), "one worker has no one to be slower than");
    }
}

#[test]
fn within_the_threshold_of_the_fastest_is_full_speed_and_a_restart_starts_afresh() {
    let mut f = Feed::new();
    for _ in 0..100 {
        f.second(&[(1, 800 * MB), (2, 700 * MB)]);
        assert!(f.changes(&BTreeMap::new()).is_empty(), "12.5% slower is within 20%");
    }
    assert_eq!(f.watch.speeds(f.now), BTreeMap::from([(WorkerId(1), 100), (WorkerId(2), 100)]));
    // Worker 2 restarts: its counters begin again at zero.
    f.now += Duration::from_secs(1);
    f.watch.report(WorkerId(2), f.now, 0, 0);
    assert_eq!(f.watch.measured(WorkerId(2), f.now), None);
}

proptest! {
    /// Whatever the rates, a change is proposed for a worker only after
    /// its wanted speed has differed from the logged one at every check
    /// of the last window.
    #[test]
    fn no_change_before_a_deviation_lasted_a_window(
        plan in prop::collection::vec((0u64..4, 0u64..4, 1u64..20), 1..12),
    ) {
        let mut f = Feed::new();
        let mut logged: BTreeMap<WorkerId, u8> = BTreeMap::new();
        let mut differs_since: BTreeMap<WorkerId, Duration> = BTreeMap::new();
        for (a, b, secs) in plan {
            let rate = |x: u64| [0, 100 * MB, 400 * MB, 800 * MB][x as usize];
            for _ in 0..secs * 5 {
                f.second(&[(1, rate(a)), (2, rate(b)), (3, 800 * MB)]);
                let want = f.watch.speeds(f.now);
                for w in [1, 2, 3].map(WorkerId) {
                    let l = logged.get(&w).copied().unwrap_or(100);
                    match want.get(&w) {
                        Some(p) if (*p == 100) != (l == 100) || p.abs_diff(l) > 20 => {
                            differs_since.entry(w).or_insert(f.now);
                        }
                        _ => {
                            differs_since.remove(&w);
                        }
                    }
                }
                for (w, p) in f.changes(&logged) {
                    let since = differs_since.get(&w).copied();
                    prop_assert!(since.is_some_and(|s| s + WINDOW <= f.now), "{w} changed to {p} at {:?}, off since {since:?}", f.now);
                    if p == 100 { logged.remove(&w); } else { logged.insert(w, p); }
                    differs_since.remove(&w);
                }
            }
        }
    }
}
