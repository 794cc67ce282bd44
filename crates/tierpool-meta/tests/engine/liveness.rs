//! A worker is declared dead only after its grace period, exactly once per
//! outage, and comes back at its next sign of life.

use crate::*;
use proptest::prelude::*;
use tierpool_meta::engine::liveness::{Liveness, Standing};
use tierpool_types::WorkerId;

#[test]
fn a_silent_worker_is_reported_dead_once_after_the_grace_period() {
    let mut l = Liveness::new(DEAD_AFTER);
    let w = WorkerId(1);
    assert_eq!(l.seen(w, secs(10)), Some(Standing::Up(w)));
    assert_eq!(l.seen(w, secs(11)), None, "already up");
    assert!(l.changes(secs(13)).is_empty(), "2 s of silence is within the grace period");
    assert!(l.is_alive(w, secs(13)));
    assert_eq!(l.changes(secs(14)), vec![Standing::Down(w)]);
    assert!(!l.is_alive(w, secs(14)));
    assert!(l.changes(secs(60)).is_empty(), "reported once");
    assert_eq!(l.seen(w, secs(61)), Some(Standing::Up(w)));
}

#[derive(Clone, Debug)]
enum Event {
    Beat(u32),
    Wait(u64),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![3 => (0u32..3).prop_map(Event::Beat), 2 => (0u64..4000).prop_map(Event::Wait)],
        1..80,
    )
}

proptest! {
    #[test]
    fn dead_only_after_the_grace_period_and_reported_once_per_outage(evs in events()) {
        let mut l = Liveness::new(DEAD_AFTER);
        let mut now = Duration::ZERO;
        let mut last: std::collections::BTreeMap<u32, Duration> = Default::default();
        let mut up: std::collections::BTreeSet<u32> = Default::default();
        for e in evs {
            match e {
                Event::Beat(w) => {
                    let r = l.seen(WorkerId(w), now);
                    prop_assert_eq!(r.is_some(), !up.contains(&w), "Up is reported iff it was not up");
                    up.insert(w);
                    last.insert(w, now);
                }
                Event::Wait(ms) => now += Duration::from_millis(ms),
            }
            for s in l.changes(now) {
                let Standing::Down(w) = s else { return Err(TestCaseError::fail("changes reports only Down")) };
                prop_assert!(now - last[&w.0] >= DEAD_AFTER, "{} declared dead {:?} after its last beat", w, now - last[&w.0]);
                prop_assert!(up.remove(&w.0), "reported dead twice");
            }
            for (w, t) in &last {
                prop_assert_eq!(l.is_alive(WorkerId(*w), now), now - *t < DEAD_AFTER);
            }
        }
    }
}
