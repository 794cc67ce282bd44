//! Which workers are alive: a worker is alive while its last sign of life
//! (registration or heartbeat) is younger than the grace period.
//!
//! Invariant: a worker is reported dead only once its grace period has
//! passed since its last sign of life, and each change of a worker's
//! standing (alive -> dead, dead -> alive) is reported exactly once, by
//! [`Liveness::changes`].

use std::collections::BTreeMap;
use std::time::Duration;
use tierpool_types::WorkerId;

/// A worker's change of standing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Seen again after being reported dead, or seen for the first time.
    Up(WorkerId),
    /// No sign of life for the grace period.
    Down(WorkerId),
}

#[derive(Debug)]
pub struct Liveness {
    grace: Duration,
    /// Last sign of life, and whether the worker was last reported alive.
    seen: BTreeMap<WorkerId, (Duration, bool)>,
}

impl Liveness {
    pub fn new(grace: Duration) -> Liveness {
        Liveness { grace, seen: BTreeMap::new() }
    }

    /// A sign of life of `id` at `now`. Returns `Up` if it was not counted
    /// alive before (first contact since the coordinator started, or back
    /// after being reported dead).
    pub fn seen(&mut self, id: WorkerId, now: Duration) -> Option<Standing> {
        let e = self.seen.entry(id).or_insert((now, false));
        e.0 = e.0.max(now);
        if e.1 {
            return None;
        }
        e.1 = true;
        Some(Standing::Up(id))
    }

    pub fn is_alive(&self, id: WorkerId, now: Duration) -> bool {
        self.seen.get(&id).is_some_and(|(last, _)| now.saturating_sub(*last) < self.grace)
    }

    /// Workers whose grace period ran out since the last call: reported once.
    pub fn changes(&mut self, now: Duration) -> Vec<Standing> {
        let mut out = Vec::new();
        for (id, (last, up)) in &mut self.seen {
            if *up && now.saturating_sub(*last) >= self.grace {
                *up = false;
                out.push(Standing::Down(*id));
            }
        }
        out
    }

    /// Forgets a worker (it left the pool).
    pub fn forget(&mut self, id: WorkerId) {
        self.seen.remove(&id);
    }
}
