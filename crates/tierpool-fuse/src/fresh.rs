//! Attributes this mount was just given, to answer the kernel's next
//! request for them without asking the coordinator. Pure: no I/O, time
//! passed in.
//!
//! - Directories: a namespace change this mount makes (create, mkdir,
//!   unlink, rename, link...) comes back with its directories as the change
//!   left them, and the kernel, which drops a directory's attributes after
//!   each change in it, asks for them again next.
//! - Files: a file's attributes as its publish left them (at a flush or
//!   the last close here), for the kernel's re-read once the file is
//!   closed (a write drops what the kernel held); the caller serves them
//!   only while the file is not open here (its own view answers then).
//!
//! Invariants: an entry is served at most once, within the time it was
//! given for and for what is left of it: `TTL`, or for a file's publish as
//! long as the kernel may keep attributes it fetches (`LONG` while the
//! feed is followed, `watch.rs`), so another client's change is seen as
//! late as it would be had the kernel kept the attributes (the feed's
//! changes drop entries as they drop the kernel's: `changed`). Any other
//! change this mount makes to that inode drops its entry before and after
//! it. Changes run on several threads, so an answer is kept only if no
//! other change was noted since its change began (`epoch`): answers that
//! crossed are dropped, never kept out of order. At most [`KEPT_MAX`]
//! entries are kept (past half of it, the older ones go: what is not kept
//! is asked of the coordinator, which is never wrong).
//!
//! Files this mount opens are fetched from the coordinator then (an open
//! reads what was published before it: close-to-open), and the kernel asks
//! for their attributes again after each read (it drops the access time).
//! Those are answered from the open file while this mount noted no change
//! at all since the open's fetch began, within `TTL` of it and for what is
//! left of `TTL` (so again no staler than the kernel's own keeping): any
//! change here (a name made or removed, an attribute set) ends that.
//! The attributes a directory listing was read with (readdirplus) are
//! handed to the kernel on the same terms ([`Fresh::left`]).
//!
//! Files made here and answered for long are remembered for that long
//! ([`Fresh::made_long`]): the kernel makes the inode only once the answer
//! reaches the process that created it, and a notification that comes
//! first finds nothing to drop, so `watch.rs` tells it again. A create is
//! answered for long only if no other client's change (nor lost changes)
//! was noted while it ran (`foreign`), and only while fewer than
//! [`KEPT_MAX`] such files are remembered: an entry here is never dropped
//! before its time, so every change that may have beaten its answer to
//! the kernel is told again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use tierpool_client::InodeInfo;

/// Entries beyond which expired ones are swept out.
const SWEEP_ABOVE: usize = 1024;
/// Own changes remembered at most, in two halves: once the newer half is
/// full the older one is forgotten (their notifications are then only
/// passed on to the kernel, which is never wrong), so the last
/// `OWN_MAX / 2` are always remembered.
const OWN_MAX: usize = 65_536;
/// Entries kept at most (past half of it, the older ones go down to
/// half), and files made here remembered at most (beyond, creates are
/// answered for `TTL`).
const KEPT_MAX: usize = 65_536;

pub struct Fresh {
    ttl: Duration,
    /// Attributes, when given and for how long.
    entries: HashMap<u64, (InodeInfo, Instant, Duration)>,
    /// Files opened: when their attributes were fetched, and the epoch
    /// the fetch began at.
    opened: HashMap<u64, (Instant, u64)>,
    /// Bumped by every change noted here.
    epoch: u64,
    /// Inodes with the `ctime` this mount's changes left them with (for
    /// telling its own changes in the pool's feed, `watch.rs`).
    own: HashSet<(u64, u64)>,
    /// The half before `own` (see `OWN_MAX`).
    own_before: HashSet<(u64, u64)>,
    /// Inodes this mount's removals released, until the feed's news of
    /// them (which carry no `ctime`: they are gone).
    gone: HashSet<u64>,
    /// Files made here whose answer the kernel may keep long: until when;
    /// and in the order they were made (so nearly in that of their ends),
    /// to let them go when they end.
    made: HashMap<u64, Instant>,
    made_order: VecDeque<(Instant, u64)>,
    /// Entries, and files opened, beyond which expired ones are swept out next.
    sweep_at: usize,
    opened_sweep_at: usize,
    /// Bumped by every change of another client noted here, and when
    /// changes were lost.
    foreign: u64,
}

impl Fresh {
    pub fn new(ttl: Duration) -> Fresh {
        Fresh {
            ttl,
            entries: HashMap::new(),
            opened: HashMap::new(),
            epoch: 0,
            own: HashSet::new(),
            own_before: HashSet::new(),
            gone: HashSet::new(),
            made: HashMap::new(),
            made_order: VecDeque::new(),
            sweep_at: SWEEP_ABOVE,
            opened_sweep_at: SWEEP_ABOVE,
            foreign: 0,
        }
    }

    /// To pass to [`Fresh::put`] with the answer of a change starting now.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// `infos` as a change made by this mount left them, at `now`; the
    /// change began at `epoch`. If another was noted since, they may be
    /// older than what it left: they are dropped instead.
    pub fn put(&mut self, epoch: u64, infos: impl IntoIterator<Item = InodeInfo>, now: Instant) {
        self.put_for(epoch, infos, now, self.ttl);
    }

    /// [`Fresh::put`], to be given within `ttl` (at least `TTL`: the
    /// kernel may keep what it fetches that long).
    pub fn put_for(&mut self, epoch: u64, infos: impl IntoIterator<Item = InodeInfo>, now: Instant, ttl: Duration) {
        let crossed = epoch != self.epoch;
        self.epoch += 1;
        if self.entries.len() >= self.sweep_at {
            self.entries.retain(|_, (_, at, ttl)| now.duration_since(*at) < *ttl);
            let n = self.entries.len();
            if n > KEPT_MAX / 2 {
                // The newer half stays.
                let mut at: Vec<Instant> = self.entries.values().map(|(_, at, _)| *at).collect();
                let (_, oldest_kept, _) = at.select_nth_unstable(n - KEPT_MAX / 2);
                let oldest_kept = *oldest_kept;
                self.entries.retain(|_, (_, at, _)| *at >= oldest_kept);
            }
            // At most half the bound is left: swept again once twice as
            // many, so a put costs O(1) on average.
            self.sweep_at = (2 * self.entries.len()).clamp(SWEEP_ABOVE, KEPT_MAX);
        }
        for info in infos {
            self.own(&info);
            match crossed {
                true => self.entries.remove(&info.id.0),
                false => self.entries.insert(info.id.0, (info, now, ttl.max(self.ttl))),
            };
        }
    }

    /// The attributes of `ino` given within their time of `now`, once,
    /// with what is left of that time.
    pub fn take(&mut self, ino: u64, now: Instant) -> Option<(InodeInfo, Duration)> {
        let (info, at, ttl) = self.entries.remove(&ino)?;
        let left = ttl.checked_sub(now.duration_since(at)).filter(|d| !d.is_zero())?;
        Some((info, left))
    }

    /// To pass to [`Fresh::made_long`]: taken before a create begins.
    pub fn foreign(&self) -> u64 {
        self.foreign
    }

    /// Whether the file `ino`, made here by a create that began at
    /// `foreign`, may be answered at `now` for `ttl`: only if no other
    /// client's change (nor lost changes) was noted since, and there is
    /// room to remember it until then; if so, it is remembered.
    pub fn made_long(&mut self, ino: u64, foreign: u64, now: Instant, ttl: Duration) -> bool {
        if foreign != self.foreign {
            return false;
        }
        while let Some(&(until, first)) = self.made_order.front() {
            if until > now {
                break;
            }
            self.made_order.pop_front();
            if self.made.get(&first) == Some(&until) {
                self.made.remove(&first);
            }
        }
        if self.made.len() >= KEPT_MAX {
            return false;
        }
        self.made.insert(ino, now + ttl);
        self.made_order.push_back((now + ttl, ino));
        true
    }

    /// Until when the kernel may keep the answer that made `ino` here, if
    /// that is after `now`.
    pub fn made_until(&self, ino: u64, now: Instant) -> Option<Instant> {
        self.made.get(&ino).copied().filter(|until| *until > now)
    }

    /// The file `ino` was opened with attributes fetched at `now`, by a
    /// request that began at `epoch`.
    pub fn opened(&mut self, epoch: u64, ino: u64, now: Instant) {
        if self.opened.len() >= self.opened_sweep_at {
            let ttl = self.ttl;
            self.opened.retain(|_, (at, _)| now.duration_since(*at) < ttl);
            // Swept again once twice as many: O(1) on average.
            self.opened_sweep_at = (2 * self.opened.len()).max(SWEEP_ABOVE);
        }
        match epoch == self.epoch {
            true => self.opened.insert(ino, (now, epoch)),
            false => self.opened.remove(&ino),
        };
    }

    /// What is left of `TTL` for the attributes the open of `ino` fetched,
    /// if no change was noted here since that fetch began.
    pub fn opened_left(&self, ino: u64, now: Instant) -> Option<Duration> {
        let (at, epoch) = self.opened.get(&ino)?;
        Some(self.left(*epoch, *at, now)).filter(|d| !d.is_zero())
    }

    /// What is left of `TTL` for attributes read at `at` by a request that
    /// began at `epoch`: nothing if a change was noted here since.
    pub fn left(&self, epoch: u64, at: Instant, now: Instant) -> Duration {
        match epoch == self.epoch {
            true => self.ttl.saturating_sub(now.duration_since(at)),
            false => Duration::ZERO,
        }
    }

    /// `info` is as a change this mount made left it (the change's own answer).
    pub fn own(&mut self, info: &InodeInfo) {
        self.own_ctime(info.id.0, info.ctime);
    }

    /// A change this mount made left `ino` with `ctime`.
    pub fn own_ctime(&mut self, ino: u64, ctime: u64) {
        if self.own.len() >= OWN_MAX / 2 {
            self.own_before = std::mem::take(&mut self.own);
        }
        self.own.insert((ino, ctime));
    }

    /// Whether `ino` with `ctime` is as one of this mount's changes left it.
    pub fn is_own(&self, ino: u64, ctime: u64) -> bool {
        ctime != 0 && (self.own.contains(&(ino, ctime)) || self.own_before.contains(&(ino, ctime)))
    }

    /// A removal this mount made released `ino`.
    pub fn own_gone(&mut self, ino: u64) {
        if self.gone.len() >= OWN_MAX {
            self.gone.clear();
        }
        self.gone.insert(ino);
    }

    /// Whether the feed's news that `ino` was left with `ctime` (0: it
    /// went) are of this mount's own change. The news of a removal are
    /// known once: an id a snapshot's restore brings back may go again,
    /// by another client's hand.
    pub fn own_news(&mut self, ino: u64, ctime: u64) -> bool {
        match ctime {
            0 => self.gone.remove(&ino),
            _ => self.is_own(ino, ctime),
        }
    }

    /// Other clients changed `inos`: what was given of them is stale, and
    /// attributes read before may be.
    pub fn changed(&mut self, inos: &[u64]) {
        if inos.is_empty() {
            return;
        }
        self.epoch += 1;
        self.foreign += 1;
        for ino in inos {
            self.entries.remove(ino);
        }
    }

    /// What was given of `ino` is stale (a change kept by its open file:
    /// no answer in flight can be older than that file's view).
    pub fn given_stale(&mut self, ino: u64) {
        self.entries.remove(&ino);
    }

    /// This mount changes `ino` otherwise (call before and after): what
    /// was given is stale.
    pub fn forget(&mut self, ino: u64) {
        self.epoch += 1;
        self.entries.remove(&ino);
    }

    /// A change whose effect on other inodes is not known here (call
    /// before and after).
    pub fn clear(&mut self) {
        self.epoch += 1;
        self.entries.clear();
    }

    /// Changes of other clients were lost: any inode may have changed.
    pub fn lost(&mut self) {
        self.clear();
        self.gone.clear(); // their news may be among those lost
        self.foreign += 1;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len() + self.opened.len()
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

    fn put(f: &mut Fresh, info: InodeInfo, now: Instant) {
        let e = f.epoch();
        f.put(e, [info], now);
    }

    #[test]
    fn attributes_are_served_once_within_the_ttl_for_what_is_left_of_it() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = Fresh::new(Duration::from_secs(1));
        put(&mut f, dir(5, 1), t0);
        put(&mut f, dir(5, 2), t0 + ms(10));
        assert_eq!(f.take(5, t0 + ms(900)).map(|(i, left)| (i.size, left)), Some((2, ms(110))), "the latest");
        assert_eq!(f.take(5, t0 + ms(901)), None, "once");
        put(&mut f, dir(6, 1), t0);
        assert_eq!(f.take(6, t0 + Duration::from_secs(1)), None, "not past the ttl");
        put(&mut f, dir(7, 1), t0);
        f.forget(7);
        assert_eq!(f.take(7, t0), None);
        put(&mut f, dir(8, 1), t0);
        f.clear();
        assert_eq!(f.take(8, t0), None);
    }

    #[test]
    fn answers_of_changes_that_crossed_another_are_dropped() {
        let t0 = Instant::now();
        let mut f = Fresh::new(Duration::from_secs(1));
        // A create in 5 begins; a chmod of 5 is noted (before and after
        // its own request) while it runs: the create's answer may predate it.
        let create = f.epoch();
        f.forget(5);
        f.forget(5);
        f.put(create, [dir(5, 1)], t0);
        assert_eq!(f.take(5, t0), None);
        // Two creates in 6 at once: the later answer may be the older.
        put(&mut f, dir(6, 1), t0);
        let (a, b) = (f.epoch(), f.epoch());
        f.put(a, [dir(6, 3)], t0);
        f.put(b, [dir(6, 2)], t0);
        assert_eq!(f.take(6, t0), None, "dropped, not kept out of order");
        // One at a time: kept.
        let c = f.epoch();
        f.put(c, [dir(6, 4), dir(7, 1)], t0);
        assert_eq!(f.take(6, t0).map(|(i, _)| i.size), Some(4));
        assert_eq!(f.take(7, t0).map(|(i, _)| i.size), Some(1));
    }

    #[test]
    fn an_open_files_attributes_serve_while_nothing_changed_here_since_its_fetch_began() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = Fresh::new(Duration::from_secs(1));
        let e = f.epoch();
        f.opened(e, 5, t0);
        assert_eq!(f.opened_left(5, t0 + ms(300)), Some(ms(700)), "what is left of the ttl");
        assert_eq!(f.opened_left(5, t0 + ms(300)), Some(ms(700)), "not only once");
        assert_eq!(f.opened_left(5, t0 + Duration::from_secs(1)), None, "not past the ttl");
        assert_eq!(f.opened_left(6, t0), None, "not opened");
        // Any change noted here ends it: of this file, of another inode, of a directory.
        for change in [
            |f: &mut Fresh| f.forget(5),
            |f: &mut Fresh| f.forget(9),
            |f: &mut Fresh| f.clear(),
            |f: &mut Fresh| put(f, dir(1, 1), Instant::now()),
        ] {
            let e = f.epoch();
            f.opened(e, 5, t0);
            assert!(f.opened_left(5, t0).is_some());
            change(&mut f);
            assert_eq!(f.opened_left(5, t0), None);
        }
        // A fetch that crossed a change is not kept, and drops what an earlier open left.
        let late = f.epoch();
        f.forget(8);
        f.opened(late, 7, t0);
        assert_eq!(f.opened_left(7, t0), None);
        let e = f.epoch();
        f.opened(e, 7, t0);
        assert!(f.opened_left(7, t0).is_some());
        f.opened(late, 7, t0);
        assert_eq!(f.opened_left(7, t0), None, "dropped by the crossed fetch");
    }

    #[test]
    fn what_is_left_of_the_ttl_for_attributes_read_at_an_epoch() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = Fresh::new(Duration::from_secs(1));
        let e = f.epoch();
        assert_eq!(f.left(e, t0, t0 + ms(250)), ms(750));
        assert_eq!(f.left(e, t0, t0 + ms(1500)), Duration::ZERO, "past the ttl");
        f.forget(3);
        assert_eq!(f.left(e, t0, t0), Duration::ZERO, "a change was noted since");
        assert_eq!(f.left(f.epoch(), t0, t0), ms(1000));
    }

    #[test]
    fn own_changes_are_known_by_the_ctime_they_left_and_other_clients_changes_drop_what_was_given() {
        let t0 = Instant::now();
        let mut f = Fresh::new(Duration::from_secs(1));
        let at = |id, ctime| InodeInfo { ctime, ..dir(id, 0) };
        put(&mut f, at(5, 100), t0);
        f.own(&at(6, 200));
        assert!(f.is_own(5, 100) && f.is_own(6, 200), "what a change here left");
        assert!(!f.is_own(5, 101), "a later change, by anyone");
        assert!(!f.is_own(7, 100), "never changed here");
        assert!(
            !f.is_own(8, 0) && {
                f.own(&at(8, 0));
                !f.is_own(8, 0)
            },
            "a removed inode is no one's"
        );
        f.own(&at(6, 300));
        assert!(f.is_own(6, 200) && f.is_own(6, 300), "each change here");
        // A removal here is known by the inode it released, once.
        assert!(!f.own_news(9, 0), "never removed here");
        f.own_gone(9);
        assert!(f.own_news(9, 0) && !f.own_news(9, 0), "its news, then the id's next removal");
        assert!(f.own_news(6, 300) && !f.own_news(6, 301), "news of inodes still there go by their ctime");
        f.own_gone(10);
        f.lost();
        assert!(!f.own_news(10, 0), "changes lost: the news may have been among them");
        // Past the bound, the latest half stays known.
        let first = 1_000;
        for i in first..first + OWN_MAX as u64 {
            f.own_ctime(i, 1);
        }
        let mut latest = first + OWN_MAX as u64 / 2..first + OWN_MAX as u64;
        assert!(latest.all(|i| f.is_own(i, 1)), "the latest half");
        assert!(!f.is_own(6, 300) && !f.is_own(first, 1), "the oldest forgotten");
        assert!(f.own.len() + f.own_before.len() <= OWN_MAX);
        // Another client changes 5: the attributes given are dropped, and
        // a request that began before is told so by the epoch.
        let e = f.epoch();
        f.changed(&[]);
        assert_eq!(f.epoch(), e, "nothing changed: nothing dropped");
        f.changed(&[5]);
        assert_ne!(f.epoch(), e);
        assert_eq!(f.take(5, t0), None);
    }

    #[test]
    fn attributes_put_for_longer_are_served_once_within_that_time() {
        let t0 = Instant::now();
        let (ms, s) = (Duration::from_millis, Duration::from_secs);
        let mut f = Fresh::new(s(1));
        let e = f.epoch();
        f.put_for(e, [dir(5, 1)], t0, s(30));
        assert_eq!(f.take(5, t0 + s(20)).map(|(i, left)| (i.size, left)), Some((1, s(10))));
        assert_eq!(f.take(5, t0 + s(20)), None, "once");
        let e = f.epoch();
        f.put_for(e, [dir(6, 1)], t0, ms(10));
        assert_eq!(f.take(6, t0 + ms(500)).map(|(_, left)| left), Some(ms(500)), "never less than the ttl");
        let e = f.epoch();
        f.put_for(e, [dir(7, 1)], t0, s(30));
        f.changed(&[7]);
        assert_eq!(f.take(7, t0), None, "another client changed it");
        // Crossed another change: dropped, as with `put`.
        let e = f.epoch();
        f.forget(8);
        f.put_for(e, [dir(8, 1)], t0, s(30));
        assert_eq!(f.take(8, t0), None);
    }

    #[test]
    fn long_entries_are_kept_until_their_time_and_never_beyond_a_bound() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut f = Fresh::new(s(1));
        for id in 0..2 * SWEEP_ABOVE as u64 {
            let e = f.epoch();
            f.put_for(e, [dir(id, 0)], t0, s(30));
        }
        assert_eq!(f.len(), 2 * SWEEP_ABOVE, "not yet expired: kept");
        let e = f.epoch();
        f.put_for(e, [dir(1 << 40, 0)], t0 + s(31), s(30));
        assert!(f.len() <= SWEEP_ABOVE, "expired ones swept out: {}", f.len());
        let base = dir(0, 0);
        for id in 0..(4 * KEPT_MAX) as u64 {
            let e = f.epoch();
            let info = InodeInfo { id: InodeId(id), ..base.clone() };
            f.put_for(e, [info], t0 + s(31) + Duration::from_nanos(id), s(30));
            assert!(f.len() <= KEPT_MAX, "{} entries kept", f.len());
        }
        assert!(f.take(4 * KEPT_MAX as u64 - 1, t0 + s(32)).is_some(), "the newest are kept");
    }

    #[test]
    fn files_made_for_long_are_known_until_then_and_only_if_nothing_foreign_came_meanwhile() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut f = Fresh::new(s(1));
        assert!(f.made_long(5, f.foreign(), t0, s(30)));
        assert_eq!(f.made_until(5, t0 + s(29)), Some(t0 + s(30)));
        assert_eq!(f.made_until(5, t0 + s(30)), None, "past it");
        assert_eq!(f.made_until(6, t0), None, "not made here");
        // Another client's change, or lost changes, while a create ran.
        for foreign in [|f: &mut Fresh| f.changed(&[77]), |f: &mut Fresh| f.lost()] {
            let began = f.foreign();
            foreign(&mut f);
            assert!(!f.made_long(8, began, t0, s(30)));
            assert_eq!(f.made_until(8, t0), None);
        }
        f.changed(&[]);
        let began = f.foreign();
        f.forget(9);
        f.clear();
        assert!(f.made_long(9, began, t0, s(30)), "this mount's own changes are not foreign");
    }

    #[test]
    fn files_made_are_never_forgotten_before_their_time_and_bounded() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut f = Fresh::new(s(1));
        for ino in 0..KEPT_MAX as u64 {
            assert!(f.made_long(ino, f.foreign(), t0, s(30)));
        }
        assert!(!f.made_long(1 << 40, f.foreign(), t0 + s(1), s(30)), "full: answered for the ttl instead");
        assert_eq!(f.made_until(0, t0 + s(1)), Some(t0 + s(30)), "the first still known");
        assert!(f.made_long(1 << 40, f.foreign(), t0 + s(31), s(30)), "room again once they expired");
        assert_eq!((f.made.len(), f.made_order.len()), (1, 1), "the expired ones let go");
    }

    #[test]
    fn expired_entries_are_swept_out() {
        let t0 = Instant::now();
        let mut f = Fresh::new(Duration::from_secs(1));
        for id in 0..SWEEP_ABOVE as u64 {
            put(&mut f, dir(id, 0), t0);
        }
        put(&mut f, dir(99_999, 0), t0 + Duration::from_secs(2));
        assert_eq!(f.len(), 1);
        let e = f.epoch();
        for id in 0..SWEEP_ABOVE as u64 {
            f.opened(e, id, t0);
        }
        f.opened(e, 99_999, t0 + Duration::from_secs(2));
        assert_eq!(f.len(), 2);
    }
}
