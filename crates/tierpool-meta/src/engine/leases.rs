//! Holds: the inodes a client session has open, so that their chunks
//! outlive their names. A session renews its whole set well within the
//! hold period; a set not renewed in time lapses (the client is gone).
//!
//! Invariant: [`Leases::held`] at `now` contains every inode of every
//! session renewed less than one hold period before `now`, and only those;
//! [`Leases::holds`] answers for one inode what `held` would, without
//! gathering the set (each session's inodes are kept sorted).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tierpool_types::InodeId;

#[derive(Debug)]
pub struct Leases {
    period: Duration,
    sessions: HashMap<u64, (Duration, Vec<InodeId>)>,
}

impl Leases {
    pub fn new(period: Duration) -> Leases {
        Leases { period, sessions: HashMap::new() }
    }

    /// Session `session` holds exactly `inodes` from `now` (an empty set
    /// drops it); sessions lapsed by then are forgotten.
    pub fn hold(&mut self, session: u64, mut inodes: Vec<InodeId>, now: Duration) {
        self.lapse(now);
        if inodes.is_empty() {
            self.sessions.remove(&session);
        } else {
            inodes.sort_unstable();
            inodes.dedup();
            self.sessions.insert(session, (now, inodes));
        }
    }

    /// Forgets the sessions lapsed at `now`.
    fn lapse(&mut self, now: Duration) {
        let period = self.period;
        self.sessions.retain(|_, (renewed, _)| now.saturating_sub(*renewed) < period);
    }

    /// Inodes held at `now`; lapsed sessions are forgotten.
    pub fn held(&mut self, now: Duration) -> BTreeSet<InodeId> {
        self.lapse(now);
        self.sessions.values().flat_map(|(_, i)| i.iter().copied()).collect()
    }

    /// Whether any session holds `inode` at `now` (what every op that
    /// makes garbage asks of each inode it frees): lapsed sessions are
    /// passed over, not forgotten, so asking of many inodes stays a search
    /// per session.
    pub fn holds(&self, inode: InodeId, now: Duration) -> bool {
        self.live(now).any(|(_, inodes)| inodes.binary_search(&inode).is_ok())
    }

    /// Whether a session other than `session` holds `inode` at `now`.
    pub fn held_elsewhere(&self, session: u64, inode: InodeId, now: Duration) -> bool {
        self.live(now).any(|(s, inodes)| s != session && inodes.binary_search(&inode).is_ok())
    }

    /// The sessions not lapsed at `now`, with their sorted inodes.
    fn live(&self, now: Duration) -> impl Iterator<Item = (u64, &[InodeId])> {
        let period = self.period;
        (self.sessions.iter())
            .filter(move |(_, (renewed, _))| now.saturating_sub(*renewed) < period)
            .map(|(s, (_, inodes))| (*s, inodes.as_slice()))
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Step {
        Hold { session: u64, inodes: Vec<u64> },
        Wait(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..4u64, prop::collection::vec(0..12u64, 0..6))
                .prop_map(|(session, inodes)| Step::Hold { session, inodes }),
            (0..6u64).prop_map(Step::Wait),
        ]
    }

    proptest! {
        /// `held`, `holds` and `held_elsewhere` against a model: the
        /// latest set of each session, renewed less than a period ago.
        #[test]
        fn holds_answer_as_the_held_set(steps in prop::collection::vec(step(), 1..40)) {
            let period = Duration::from_secs(4);
            let mut leases = Leases::new(period);
            let mut model: BTreeMap<u64, (Duration, Vec<u64>)> = BTreeMap::new();
            let mut now = Duration::ZERO;
            for s in steps {
                match s {
                    Step::Hold { session, inodes } => {
                        leases.hold(session, inodes.iter().map(|i| InodeId(*i)).collect(), now);
                        match inodes.is_empty() {
                            true => model.remove(&session),
                            false => model.insert(session, (now, inodes)),
                        };
                    }
                    Step::Wait(secs) => now += Duration::from_secs(secs),
                }
                let live = |s: &u64| model.get(s).filter(|(at, _)| now - *at < period);
                let want: BTreeSet<InodeId> =
                    model.keys().filter_map(live).flat_map(|(_, i)| i.iter().map(|i| InodeId(*i))).collect();
                for i in 0..12 {
                    let inode = InodeId(i);
                    prop_assert_eq!(leases.holds(inode, now), want.contains(&inode));
                    for session in 0..4 {
                        let elsewhere = model.keys().filter(|s| **s != session).filter_map(live)
                            .any(|(_, is)| is.contains(&i));
                        prop_assert_eq!(leases.held_elsewhere(session, inode, now), elsewhere);
                    }
                }
                prop_assert_eq!(leases.held(now), want);
            }
        }
    }
}
