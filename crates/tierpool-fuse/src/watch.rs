//! Keeping the kernel's names and attributes for long: the mount follows
//! the coordinator's change feed and tells the kernel to drop what other
//! clients change (FUSE notifications), so the kernel may keep what it is
//! given for [`LONG`] instead of [`TTL`] and answer repeated lookups and
//! stats itself.
//!
//! Invariants:
//! - an answer is given for `LONG` only if it was fetched after the
//!   position the mount follows the feed from was taken, and the feed
//!   answered within [`HEALTHY`] (a poll waits at most [`POLL`]);
//!   otherwise for `TTL`, as without the feed. So every change made after
//!   such a fetch reaches the mount, which drops the kernel's copy: the
//!   kernel is late by the feed's delay, not by `LONG`.
//! - the kernel's own handling of a lookup or `getattr` holds no race with
//!   a notification: a lookup holds its directory's lock until the entry
//!   is in place, and an entry's notification takes that lock; attributes
//!   fetched before an inode's notification are ignored by the kernel (it
//!   counts attribute versions). It does not count them for the answers to
//!   changes (create, mkdir, link, setattr...), which a notification of a
//!   later change by another client may overtake: those are given for
//!   `TTL`, and so is what an open file answers with (its own view). Save
//!   one: the answer to a create that made a new file, which the kernel
//!   cannot hold yet, is given for `LONG`; a notification of a change to
//!   that file may reach the kernel before the process that made it gets
//!   the answer, and then finds nothing to drop, so the file is told of it
//!   again and again for as long as the kernel may keep the answer (see
//!   `repeats.rs`); a create during which another client's change (or lost
//!   changes) was heard of is answered for `TTL` instead (`Fresh::foreign`),
//!   so no change that may beat the answer goes untold. What remains: a
//!   process held up between the answer and its return from `open` for
//!   longer than 200 ms sees the change up to a second late (the repeats
//!   are a second apart then), and for longer than `LONG`, not at all.
//! - changes this mount made itself are known by the `ctime` they left
//!   (`Fresh::is_own`), and its removals (a name's, or a rename's over
//!   one) by the inode they released (`Fresh::own_news`; the pool's
//!   answer names it): the kernel already has them, and dropping them
//!   would only cost lookups. The feed may bring a change before its
//!   answer reaches the mount (the feed hears of it before it is durable),
//!   so an answer with changes is looked at once every change this mount
//!   began before it came has its answer back (`in_flight.rs`), and
//!   [`GATHER`] after it came at the earliest. A change whose answer is not
//!   back within [`OWN_WITHIN`] is not known as one's own: it is dropped,
//!   which is never wrong. So other clients' changes reach the kernel
//!   later by as long as this mount's changes under way take, at most
//!   `OWN_WITHIN` (a publish under way includes its last chunks' stores
//!   and, beneath an attachment that writes through, its write below).
//! - directories another client changed are no longer known whole
//!   (`known.rs`), and none is when changes were lost.
//! - when the feed says changes were lost (the coordinator restarted, or
//!   the mount fell too far behind), every inode and name the kernel was
//!   given (`Names`) is dropped before answers may be kept long again.
//!   Names missing from the pool (negative entries) and names of a hard
//!   link other than the last met are not known here: negative entries are
//!   given for `TTL` only, and the latter is a stated limit.
//!
//! Notifications are sent by a thread of their own, with no lock of this
//! mount held: the kernel may wait, to deliver one, for a request in the
//! same directory to finish, and that request may need the runtime the
//! feed is read on.

use crate::fresh::Fresh;
use crate::fs::TTL;
use crate::in_flight::{Changing, InFlight};
use crate::known::KnownDirs;
use crate::names::Names;
use crate::repeats::Repeats;
use fuser::{INodeNo, Notifier};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Weak;
use std::time::{Duration, Instant};
use tierpool_client::{ChangesAnswer, Client};
use tokio::runtime::Handle;

/// How long the kernel keeps names and attributes while the feed is followed.
pub(crate) const LONG: Duration = Duration::from_secs(30);
/// The feed counts as followed this long after its last answer.
const HEALTHY: Duration = Duration::from_secs(3);
/// How long one poll waits for a change.
const POLL: Duration = Duration::from_secs(1);
/// How long an answer with changes waits before it is looked at: the
/// answers of this mount's own changes come back meanwhile, and a busy
/// pool's changes come a batch per request rather than one request each
/// (the kernel learns of a change this much later at most).
const GATHER: Duration = Duration::from_millis(20);
/// How long an answer with changes waits at most for this mount's changes
/// under way when it came (`in_flight.rs`).
const OWN_WITHIN: Duration = Duration::from_secs(1);
/// How long a mount waits for the feed's position before it serves.
const START_WITHIN: Duration = Duration::from_secs(2);
/// The pause after a failed poll.
const RETRY: Duration = Duration::from_millis(500);

/// Whether answers may be kept long: see the module documentation.
pub(crate) struct Watch {
    base: Instant,
    /// When the feed last answered (ns since `base`; 0: not since it failed).
    heard: AtomicU64,
    /// When the position followed was taken (ns since `base`; MAX: none).
    from: AtomicU64,
    /// To the thread that tells the kernel, while the feed is followed.
    tell: Mutex<Option<std::sync::mpsc::Sender<Vec<Stale>>>>,
    /// Tells the kernel at once, from a request's own thread.
    notifier: Mutex<Option<Notifier>>,
    /// This mount's changes under way.
    changes: InFlight,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            base: Instant::now(),
            heard: AtomicU64::new(0),
            from: AtomicU64::new(u64::MAX),
            tell: Mutex::default(),
            notifier: Mutex::default(),
            changes: InFlight::default(),
        }
    }
}

impl Watch {
    /// Has the kernel drop entry `name` of `dir` and inode `ino`, which
    /// this mount answered for and which are not so in the pool (a file it
    /// answered the create of could not be made: `making.rs`). Without the
    /// feed, the kernel keeps them for `TTL` at most.
    pub(crate) fn drop_entry(&self, dir: u64, name: &str, ino: u64) {
        if let Some(tell) = self.tell.lock().as_ref() {
            let _ = tell.send(vec![Stale::Entry(dir, name.to_string()), Stale::Inode(ino)]);
        }
    }

    /// Has the kernel drop the attributes it holds of `ino` now, before
    /// the answer to the request under way: an open that found contents
    /// the kernel may not know yet (another client's publish, which the
    /// feed tells it of only a little later), whose size it must not read
    /// by. Its next look at them asks again.
    pub(crate) fn drop_attributes_now(&self, ino: u64) {
        if let Some(n) = self.notifier.lock().as_ref() {
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// A change of this mount begins whose answer is noted as its own
    /// (`Fresh::own`): keep the guard until then, so the feed's news of it
    /// wait for that.
    pub(crate) fn changing(&self) -> Changing<'_> {
        self.changes.begin()
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// How long the kernel may keep what a request that began at `began` fetched.
    pub(crate) fn ttl(&self, began: Instant) -> Duration {
        match self.following(began) {
            true => LONG,
            false => TTL,
        }
    }

    /// Whether every change made after `began` will reach this mount: the
    /// feed answers, and is followed from a position taken before `began`.
    pub(crate) fn following(&self, began: Instant) -> bool {
        let now = self.ns(Instant::now());
        let heard = self.heard.load(Ordering::Acquire);
        let fresh = heard != 0 && now.saturating_sub(heard) < HEALTHY.as_nanos() as u64;
        fresh && self.from.load(Ordering::Acquire) <= self.ns(began)
    }

    fn heard(&self, at: Instant) {
        self.heard.store(self.ns(at).max(1), Ordering::Release);
    }

    fn failed(&self) {
        self.heard.store(0, Ordering::Release);
    }

    fn position_taken(&self, at: Instant) {
        self.from.store(self.ns(at), Ordering::Release);
    }
}

/// What the poller needs of the file system, held weakly: it stops with the mount.
pub(crate) struct Parts {
    pub client: Client,
    pub rt: Handle,
    pub watch: Weak<Watch>,
    pub fresh: Weak<Mutex<Fresh>>,
    pub names: Weak<Mutex<Names>>,
    pub known: Weak<Mutex<KnownDirs>>,
}

/// The feed's position now, taken before the mount serves its first
/// request (so its first answers may be kept long); `None` if the
/// coordinator does not answer at once (the follower takes it later).
pub(crate) fn start(parts: &Parts) -> Option<(u64, u64)> {
    let asked = parts.client.changes(0, None, Duration::ZERO);
    let a = parts.rt.block_on(async { tokio::time::timeout(START_WITHIN, asked).await }).ok()?.ok()?;
    if let Some(w) = parts.watch.upgrade() {
        let now = Instant::now();
        w.position_taken(now);
        w.heard(now);
    }
    Some((a.feed, a.next))
}

/// Follows the feed from `at` (see [`start`]) until the mount goes,
/// telling the kernel through `notifier`.
pub(crate) fn follow(parts: Parts, notifier: Notifier, at: Option<(u64, u64)>) {
    let (tell, told) = std::sync::mpsc::channel::<Vec<Stale>>();
    if let Some(w) = parts.watch.upgrade() {
        *w.tell.lock() = Some(tell.clone());
        *w.notifier.lock() = Some(notifier.clone());
    }
    let made = parts.fresh.clone();
    let sender = std::thread::Builder::new().name("fuse-notify".into()).spawn(move || {
        // Files made here that the kernel may not have made yet: told again.
        let mut again = Repeats::default();
        loop {
            let batch = match again.next() {
                None => told.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(next) => told.recv_timeout(next.saturating_duration_since(Instant::now())),
            };
            let batch = match batch {
                Ok(b) => b,
                Err(RecvTimeoutError::Timeout) => Vec::new(),
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let now = Instant::now();
            for ino in again.take_due(now) {
                // Its attributes only: its pages were dropped the first time.
                let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
            }
            if batch.is_empty() {
                continue;
            }
            tracing::debug!("telling the kernel to drop {} inodes and names changed elsewhere", batch.len());
            for d in batch {
                // An entry or inode the kernel does not hold: nothing to drop.
                let _ = match d {
                    Stale::Inode(ino) => {
                        let until = made.upgrade().and_then(|f| f.lock().made_until(ino, now));
                        if let Some(until) = until {
                            // One per file: a later change starts its repeats afresh.
                            again.start(ino, now, until);
                        }
                        notifier.inval_inode(INodeNo(ino), 0, 0)
                    }
                    Stale::Entry(dir, name) => notifier.inval_entry(INodeNo(dir), OsStr::new(&name)),
                };
            }
        }
    });
    if let Err(e) = sender {
        cannot_follow(&e);
        return;
    }
    let rt = parts.rt.clone();
    rt.spawn(async move {
        let mut at = at;
        let mut failing = false;
        loop {
            let Some(watch) = parts.watch.upgrade() else { return };
            let (feed, since) = at.map_or((0, None), |(f, n)| (f, Some(n)));
            let answer = parts.client.changes(feed, since, POLL).await;
            let now = Instant::now();
            let a = match answer {
                Ok(a) => a,
                Err(e) => {
                    watch.failed();
                    if !failing {
                        cannot_follow(&e);
                    }
                    failing = true;
                    drop(watch);
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            if failing {
                tracing::info!("following the pool's changes again");
                failing = false;
            }
            // What this mount's changes under way may have brought.
            let mark = watch.changes.mark();
            let busy = !a.inodes.is_empty() || !a.entries.is_empty();
            if busy && since.is_some() && !a.lost {
                drop(watch);
                tokio::time::sleep(GATHER).await;
            }
            let Some(watch) = parts.watch.upgrade() else { return };
            let (Some(fresh), Some(names), Some(known)) =
                (parts.fresh.upgrade(), parts.names.upgrade(), parts.known.upgrade())
            else {
                return;
            };
            if since.is_none() || a.lost {
                // First: what is fetched from now on may be kept long;
                // what was fetched before is kept for `TTL` at most, or
                // is among the names dropped next.
                watch.position_taken(now);
                if a.lost {
                    tracing::info!("changes of the pool were lost: dropping every name and attribute the kernel holds");
                    known.lock().clear();
                    let _ = tell.send(drop_all(&fresh, &names));
                }
            } else {
                let drops = judge(&watch, &a, mark, &fresh, &known).await;
                if !drops.is_empty() {
                    let _ = tell.send(drops);
                }
            }
            at = Some((a.feed, a.next));
            watch.heard(now);
        }
    });
}

fn cannot_follow(e: &dyn std::fmt::Display) {
    tracing::warn!("cannot follow the pool's changes (names and attributes kept for {TTL:?}): {e}");
}

/// What the kernel is told to drop.
enum Stale {
    Inode(u64),
    Entry(u64, String),
}

/// What the kernel is to drop of what `a`, which came at `mark`, changed:
/// looked at once this mount's changes under way then have their answers back.
async fn judge(
    watch: &Watch,
    a: &ChangesAnswer,
    mark: u64,
    fresh: &Mutex<Fresh>,
    known: &Mutex<KnownDirs>,
) -> Vec<Stale> {
    if !watch.changes.answered(mark, OWN_WITHIN).await {
        tracing::debug!("a change of this mount still under way after {OWN_WITHIN:?}: news taken as another client's");
    }
    drop_changed(a, fresh, known)
}

/// What the kernel is to drop of what `a` changed: all but this mount's own changes.
fn drop_changed(a: &ChangesAnswer, fresh: &Mutex<Fresh>, known: &Mutex<KnownDirs>) -> Vec<Stale> {
    let mut fresh = fresh.lock();
    let foreign: HashSet<u64> =
        a.inodes.iter().filter(|(id, ctime)| !fresh.own_news(id.0, *ctime)).map(|(id, _)| id.0).collect();
    let foreign: Vec<u64> = foreign.into_iter().collect();
    fresh.changed(&foreign);
    let mut known = known.lock();
    for ino in &foreign {
        known.forget(*ino);
    }
    if !foreign.is_empty() {
        known.heard();
    }
    let mut drops: Vec<Stale> = foreign.into_iter().map(Stale::Inode).collect();
    // An entry this mount changed is known by the ctime its change left the directory with.
    for (dir, name, ctime) in &a.entries {
        if !fresh.is_own(dir.0, *ctime) {
            known.heard();
            known.forget(dir.0);
            drops.push(Stale::Entry(dir.0, name.clone()));
        }
    }
    drops
}

/// Every inode and name the kernel was given, to drop.
fn drop_all(fresh: &Mutex<Fresh>, names: &Mutex<Names>) -> Vec<Stale> {
    fresh.lock().lost();
    let known = names.lock().all();
    let mut drops = vec![Stale::Inode(INodeNo::ROOT.0)];
    for (ino, parent, name) in known {
        drops.extend([Stale::Inode(ino), Stale::Entry(parent, name)]);
    }
    drops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_long_only_while_the_feed_answers_and_if_fetched_after_its_position() {
        let ms = Duration::from_millis;
        let w = Watch { base: Instant::now() - Duration::from_secs(60), ..Watch::default() };
        let t0 = Instant::now();
        assert_eq!(w.ttl(t0), TTL, "not following yet");
        w.position_taken(t0);
        w.heard(t0);
        assert_eq!((w.ttl(t0), w.ttl(t0 + ms(5))), (LONG, LONG));
        assert_eq!(w.ttl(t0 - ms(1)), TTL, "fetched before the position");
        w.position_taken(t0 + ms(10));
        assert_eq!(w.ttl(t0 + ms(9)), TTL, "fetched before the new position");
        assert_eq!(w.ttl(t0 + ms(10)), LONG);
        w.failed();
        assert_eq!(w.ttl(t0 + ms(10)), TTL, "the feed failed");
        w.heard(Instant::now() - HEALTHY - ms(1));
        assert_eq!(w.ttl(t0 + ms(10)), TTL, "not heard from lately");
        w.heard(Instant::now());
        assert_eq!(w.ttl(t0 + ms(10)), LONG, "heard again, from the same position");
    }

    fn dropped(drops: &[Stale]) -> Vec<u64> {
        let mut inos: Vec<u64> =
            drops.iter().filter_map(|d| if let Stale::Inode(i) = d { Some(*i) } else { None }).collect();
        inos.sort();
        inos
    }

    #[tokio::test]
    async fn news_of_a_change_under_way_are_judged_once_its_answer_is_noted() {
        let (w, fresh, known) = (Watch::default(), Mutex::new(Fresh::new(TTL)), Mutex::new(KnownDirs::default()));
        let news = ChangesAnswer {
            feed: 1,
            next: 2,
            lost: false,
            inodes: vec![(tierpool_types::InodeId(5), 100), (tierpool_types::InodeId(6), 100)],
            entries: Vec::new(),
        };
        // A change of 5 is under way when its news come; its answer is
        // noted well past `GATHER`.
        let change = w.changing();
        let mark = w.changes.mark();
        let (drops, ()) = tokio::join!(judge(&w, &news, mark, &fresh, &known), async {
            tokio::time::sleep(GATHER * 5).await;
            fresh.lock().own_ctime(5, 100);
            drop(change);
        });
        assert_eq!(dropped(&drops), [6], "5 is this mount's own change");
        // A later change of 5 by another client, nothing under way here.
        let news = ChangesAnswer { inodes: vec![(tierpool_types::InodeId(5), 200)], ..news };
        let drops = judge(&w, &news, w.changes.mark(), &fresh, &known).await;
        assert_eq!(dropped(&drops), [5]);
    }
}
