//! Holds: the inodes a client session has open, so that their chunks
//! outlive their names. A session renews its whole set well within the
//! hold period; a set not renewed in time lapses (the client is gone).
//!
//! Invariant: [`Leases::held`] at `now` contains every inode of every
//! session renewed less than one hold period before `now`, and only those.

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

    /// Session `session` holds exactly `inodes` from `now` (an empty set drops it).
    pub fn hold(&mut self, session: u64, inodes: Vec<InodeId>, now: Duration) {
        if inodes.is_empty() {
            self.sessions.remove(&session);
        } else {
            self.sessions.insert(session, (now, inodes));
        }
    }

    /// Inodes held at `now`; lapsed sessions are forgotten.
    pub fn held(&mut self, now: Duration) -> BTreeSet<InodeId> {
        let period = self.period;
        self.sessions.retain(|_, (renewed, _)| now.saturating_sub(*renewed) < period);
        self.sessions.values().flat_map(|(_, i)| i.iter().copied()).collect()
    }

    /// Whether a session other than `session` holds `inode` at `now`.
    pub fn held_elsewhere(&mut self, session: u64, inode: InodeId, now: Duration) -> bool {
        self.held(now);
        self.sessions.iter().any(|(s, (_, inodes))| *s != session && inodes.contains(&inode))
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }
}
