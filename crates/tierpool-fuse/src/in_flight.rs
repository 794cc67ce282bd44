//! This mount's changes under way, so that the feed's news of a change
//! are judged only once the change's answer is back (`watch.rs`): the feed
//! hears of a change before it is durable, so its news may come before
//! its answer, and until then the mount cannot know it as its own.
//!
//! Invariants:
//! - a change is counted from before its request is sent until after what
//!   its answer left is noted as the mount's own (`Fresh::own`): the
//!   [`Changing`] guard is taken first and dropped last;
//! - news that reached the mount at [`InFlight::mark`] can only be of
//!   changes begun before it: [`InFlight::answered`] waits for those alone,
//!   so a steady stream of later changes never holds it up.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::Notify;

/// The changes under way, by the order they began in. Pure.
#[derive(Default)]
struct Running {
    next: u64,
    running: BTreeSet<u64>,
}

impl Running {
    fn begin(&mut self) -> u64 {
        let n = self.next;
        self.next += 1;
        self.running.insert(n);
        n
    }

    fn end(&mut self, n: u64) {
        self.running.remove(&n);
    }

    /// Whether every change begun before `mark` has ended.
    fn settled(&self, mark: u64) -> bool {
        self.running.first().is_none_or(|first| *first >= mark)
    }
}

#[derive(Default)]
pub(crate) struct InFlight {
    running: Mutex<Running>,
    ended: Notify,
}

/// One change under way; it ends when dropped.
pub(crate) struct Changing<'a> {
    of: &'a InFlight,
    n: u64,
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.of.running.lock().end(self.n);
        self.of.ended.notify_waiters();
    }
}

impl InFlight {
    /// A change begins: keep the guard until its answer is noted.
    pub(crate) fn begin(&self) -> Changing<'_> {
        Changing { of: self, n: self.running.lock().begin() }
    }

    /// Where the changes begun so far end: taken when news arrives.
    pub(crate) fn mark(&self) -> u64 {
        self.running.lock().next
    }

    /// Waits until every change begun before `mark` has ended, at most
    /// `within`; whether they all did.
    pub(crate) async fn answered(&self, mark: u64, within: Duration) -> bool {
        let all = async {
            loop {
                // Registered before the look, so an end in between wakes it.
                let ended = self.ended.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                if self.running.lock().settled(mark) {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(within, all).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a model: a list of which changes began and ended.
        #[test]
        fn settled_means_every_change_begun_before_the_mark_ended(steps in prop::collection::vec((any::<bool>(), 0usize..8), 0..64)) {
            let mut r = Running::default();
            let mut began: Vec<(u64, bool)> = Vec::new(); // (n, ended)
            for (begin, pick) in steps {
                if begin || began.is_empty() {
                    began.push((r.begin(), false));
                } else {
                    let i = pick % began.len();
                    r.end(began[i].0);
                    began[i].1 = true;
                }
                for mark in 0..=r.next {
                    let model = began.iter().all(|(n, ended)| *ended || *n >= mark);
                    prop_assert_eq!(r.settled(mark), model);
                }
            }
        }
    }

    #[tokio::test]
    async fn answered_waits_for_the_changes_begun_before_the_mark_only() {
        let f = InFlight::default();
        let ms = Duration::from_millis;
        assert!(f.answered(f.mark(), ms(0)).await, "nothing under way");
        let first = f.begin();
        let mark = f.mark();
        let later = f.begin();
        assert!(!f.answered(mark, ms(30)).await, "the first is under way");
        let (waited, ()) = tokio::join!(f.answered(mark, Duration::from_secs(10)), async {
            tokio::time::sleep(ms(20)).await;
            drop(first);
        });
        assert!(waited, "ended once the first did");
        assert!(f.answered(mark, ms(0)).await, "a later change does not count");
        drop(later);
    }
}
