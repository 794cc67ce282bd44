//! Directory attributes this mount was just given: a namespace change it
//! makes (create, mkdir, unlink, rename, link...) comes back with its
//! directories as the change left them, and the kernel, which drops a
//! directory's attributes after each change in it, asks for them again
//! next. They are answered from here, without asking the coordinator.
//! Pure: no I/O, time passed in.
//!
//! Invariants: an entry is served at most once, and only within `TTL` of
//! being given (as long as the kernel itself keeps attributes: another
//! client's change is seen as late as it would be anyway); any other
//! change this mount makes to that inode drops its entry first.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tierpool_client::InodeInfo;

/// Entries beyond which expired ones are swept out.
const SWEEP_ABOVE: usize = 1024;

pub struct Fresh {
    ttl: Duration,
    entries: HashMap<u64, (InodeInfo, Instant)>,
}

impl Fresh {
    pub fn new(ttl: Duration) -> Fresh {
        Fresh { ttl, entries: HashMap::new() }
    }

    /// `info` as a change made by this mount left it, at `now`.
    pub fn put(&mut self, info: InodeInfo, now: Instant) {
        if self.entries.len() >= SWEEP_ABOVE {
            let ttl = self.ttl;
            self.entries.retain(|_, (_, at)| now.duration_since(*at) < ttl);
        }
        self.entries.insert(info.id.0, (info, now));
    }

    /// The attributes of `ino` given within `TTL` of `now`, once.
    pub fn take(&mut self, ino: u64, now: Instant) -> Option<InodeInfo> {
        let (info, at) = self.entries.remove(&ino)?;
        (now.duration_since(at) < self.ttl).then_some(info)
    }

    /// This mount changes `ino` otherwise: what was given is stale.
    pub fn forget(&mut self, ino: u64) {
        self.entries.remove(&ino);
    }

    /// A change whose effect on other inodes is not known here.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::InodeId;

    fn dir(id: u64, size: u64) -> InodeInfo {
        let mut s = tierpool_meta::MetaState::new();
        s.execute(&tierpool_meta::MetaOp::Init { partitions: 4 }, 1).unwrap();
        InodeInfo { id: InodeId(id), size, ..s.stat("/").unwrap() }
    }

    #[test]
    fn attributes_are_served_once_within_the_ttl() {
        let t0 = Instant::now();
        let mut f = Fresh::new(Duration::from_secs(1));
        f.put(dir(5, 1), t0);
        f.put(dir(5, 2), t0 + Duration::from_millis(10));
        assert_eq!(f.take(5, t0 + Duration::from_millis(900)).map(|i| i.size), Some(2), "the latest");
        assert_eq!(f.take(5, t0 + Duration::from_millis(901)), None, "once");
        f.put(dir(6, 1), t0);
        assert_eq!(f.take(6, t0 + Duration::from_secs(1)), None, "not past the ttl");
        f.put(dir(7, 1), t0);
        f.forget(7);
        assert_eq!(f.take(7, t0), None);
        f.put(dir(8, 1), t0);
        f.clear();
        assert_eq!(f.take(8, t0), None);
    }

    #[test]
    fn expired_entries_are_swept_out() {
        let t0 = Instant::now();
        let mut f = Fresh::new(Duration::from_secs(1));
        for id in 0..SWEEP_ABOVE as u64 {
            f.put(dir(id, 0), t0);
        }
        f.put(dir(99_999, 0), t0 + Duration::from_secs(2));
        assert_eq!(f.len(), 1);
    }
}
