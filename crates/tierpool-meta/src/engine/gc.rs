//! When garbage is collected: removed files' inodes and replaced chunk
//! versions wait out a grace period (readers that resolved the old file
//! finish), are skipped while a session holds their inode, and are then
//! deleted from every worker in batches, one batch at a time.
//!
//! Invariants (property-tested):
//! - an item is put in a batch only once it has been pending for the
//!   grace period, counted from when this schedule first saw it (so after a
//!   coordinator restart everything pending waits a full period again, while
//!   clients renew their holds);
//! - an item whose inode is held when the batch is made is not in it;
//! - an item first seen at or after `keep_since` (when the oldest open
//!   transaction began: the item may be in its view) is not in it;
//! - at most one batch is in flight; a failed batch's items are due again.
//!
//! The schedule hears of new items from the state ([`PendedNews`]) rather
//! than walking the pending sets, and keeps them in the order it first saw
//! them: a tick costs the news and the items it looks at from the oldest
//! on (those collected since, held or taken, and one batch), not the whole
//! backlog, which the coordinator's lock would be held for.

use crate::PendedNews;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;
use tierpool_types::{ChunkKey, InodeId};

/// One round of deletions: every worker must delete these, then the
/// shell logs that they are gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub id: u64,
    /// Inodes whose chunks all go.
    pub inodes: Vec<InodeId>,
    /// Single chunk versions that go.
    pub keys: Vec<ChunkKey>,
}

#[derive(Debug)]
pub struct GcSchedule {
    grace: Duration,
    max_batch: usize,
    /// `None` until the first tick, which takes everything pending then.
    seen: Option<Seen>,
    in_flight: Option<u64>,
    next_id: u64,
}

#[derive(Debug, Default)]
struct Seen {
    inodes: Ages<InodeId>,
    keys: Ages<ChunkKey>,
}

impl GcSchedule {
    pub fn new(grace: Duration, max_batch: usize) -> GcSchedule {
        GcSchedule { grace, max_batch: max_batch.max(1), seen: None, in_flight: None, next_id: 1 }
    }

    /// The next batch, if none is in flight and something pending is due.
    /// `news` are the items put in the state's pending sets since the last
    /// call (ignored at the first, which takes the sets whole),
    /// `pending_*` the sets, `held` the inodes held now, `keep_since` when
    /// the oldest open transaction began.
    pub fn due(
        &mut self,
        news: PendedNews,
        pending_inodes: &BTreeSet<InodeId>,
        pending_keys: &BTreeSet<ChunkKey>,
        held: &BTreeSet<InodeId>,
        keep_since: Option<Duration>,
        now: Duration,
    ) -> Option<Batch> {
        let seen = match &mut self.seen {
            Some(seen) => {
                seen.inodes.saw(news.inodes.into_iter(), now);
                seen.keys.saw(news.keys.into_iter(), now);
                seen
            }
            None => self.seen.insert(Seen {
                inodes: Ages::of(pending_inodes.iter().copied(), now),
                keys: Ages::of(pending_keys.iter().copied(), now),
            }),
        };
        if self.in_flight.is_some() {
            return None;
        }
        let ripe = |since: Duration| now.saturating_sub(since) >= self.grace && keep_since.is_none_or(|k| since < k);
        let inodes = seen.inodes.take(self.max_batch, ripe, |i| pending_inodes.contains(i), |i| !held.contains(i));
        let room = self.max_batch - inodes.len();
        let keys = seen.keys.take(room, ripe, |k| pending_keys.contains(k), |k| !held.contains(&k.inode));
        if inodes.is_empty() && keys.is_empty() {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight = Some(id);
        Some(Batch { id, inodes, keys })
    }

    /// Batch `id` is over (carried out and logged, or failed: then its
    /// items, still pending in the state, are due again).
    pub fn finished(&mut self, id: u64) {
        if self.in_flight == Some(id) {
            self.in_flight = None;
        }
    }

    pub fn in_flight(&self) -> Option<u64> {
        self.in_flight
    }
}

/// Items in the order first seen, each with when: the times never fall
/// (a time earlier than the last is taken as the last), so the items
/// ripe at any moment are the oldest ones. Items that left the pending
/// set are dropped as a look meets them; an item heard of again (pending
/// again since) counts from then, its older place being stale.
#[derive(Debug)]
struct Ages<K> {
    items: VecDeque<(Duration, K)>,
    /// When each item in `items` was last heard of: its valid place.
    since: HashMap<K, Duration>,
}

impl<K> Default for Ages<K> {
    fn default() -> Self {
        Ages { items: VecDeque::new(), since: HashMap::new() }
    }
}

impl<K: Copy + Ord + Hash> Ages<K> {
    fn of(items: impl ExactSizeIterator<Item = K>, now: Duration) -> Ages<K> {
        let mut ages = Ages::default();
        ages.saw(items, now);
        ages
    }

    /// `news` were first seen `now`.
    fn saw(&mut self, news: impl ExactSizeIterator<Item = K>, now: Duration) {
        let now = self.items.back().map_or(now, |(last, _)| now.max(*last));
        self.since.reserve(news.len());
        self.items.reserve(news.len());
        for k in news {
            // Heard of twice at once (pending, collected and pending again): one place.
            if self.since.insert(k, now) != Some(now) {
                self.items.push_back((now, k));
            }
        }
    }

    /// Up to `max` items from the oldest on that are `ripe` by when first
    /// seen, still `pending` and `free`. Every item looked at that is no
    /// longer pending is dropped; the rest keep their order.
    fn take(
        &mut self,
        max: usize,
        ripe: impl Fn(Duration) -> bool,
        pending: impl Fn(&K) -> bool,
        free: impl Fn(&K) -> bool,
    ) -> Vec<K> {
        let mut taken = Vec::new();
        let mut kept = Vec::new();
        while taken.len() < max {
            let Some(&(since, k)) = self.items.front() else { break };
            if !ripe(since) {
                break;
            }
            self.items.pop_front();
            if self.since.get(&k) != Some(&since) {
                continue;
            }
            if !pending(&k) {
                self.since.remove(&k);
                continue;
            }
            if free(&k) {
                taken.push(k);
            }
            kept.push((since, k));
        }
        for item in kept.into_iter().rev() {
            self.items.push_front(item);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::Ages;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;

    proptest! {
        /// Each tick's news are the items that became pending since the
        /// last; what is taken is, of the items still pending, ripe and
        /// free, the oldest first (by when they last became pending, from
        /// the first tick they were heard of), up to the bound; nothing
        /// pending is ever forgotten.
        #[test]
        fn the_oldest_ripe_free_pending_items_are_taken(
            ticks in prop::collection::vec(
                (prop::collection::btree_set(0u8..40, 0..30), prop::collection::btree_set(0u8..40, 0..8), 0usize..6),
                1..20,
            ),
        ) {
            let grace = Duration::from_secs(2);
            let (mut ages, mut model) = (Ages::default(), BTreeMap::new());
            let mut pending = BTreeSet::new();
            for (t, (now_pending, held, max)) in ticks.iter().enumerate() {
                let now = Duration::from_secs(t as u64);
                // An item may be heard of twice at once (collected and pending again).
                let mut news: Vec<u8> = now_pending.difference(&pending).copied().collect();
                news.extend(news.clone().into_iter().take(t % 3));
                pending = now_pending.clone();
                ages.saw(news.clone().into_iter(), now);
                model.retain(|k, _| pending.contains(k));
                for k in news {
                    model.insert(k, now);
                }
                let ripe = |since: Duration| now.saturating_sub(since) >= grace;
                let taken = ages.take(*max, ripe, |k| pending.contains(k), |k| !held.contains(k));
                let mut want: Vec<(Duration, u8)> = model.iter()
                    .filter(|(k, since)| ripe(**since) && !held.contains(*k))
                    .map(|(k, since)| (*since, *k))
                    .collect();
                want.sort();
                // Items first seen at the same tick come in the order heard.
                let taken_set: BTreeSet<u8> = taken.iter().copied().collect();
                prop_assert_eq!(taken.len(), want.len().min(*max));
                prop_assert_eq!(taken_set.len(), taken.len());
                for k in &taken {
                    prop_assert!(model.contains_key(k) && ripe(model[k]) && !held.contains(k));
                }
                if let Some(newest) = taken.iter().map(|k| model[k]).max() {
                    prop_assert!(want.iter().filter(|(s, _)| *s < newest).all(|(_, k)| taken_set.contains(k)),
                        "an older ripe item was passed over");
                }
                let kept: BTreeSet<u8> = ages.items.iter().map(|(_, k)| *k).collect();
                prop_assert!(pending.is_subset(&kept), "a pending item was forgotten");
                prop_assert!(ages.items.iter().zip(ages.items.iter().skip(1)).all(|(a, b)| a.0 <= b.0));
            }
        }
    }
}
