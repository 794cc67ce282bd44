//! Which MEM chunks leave first: a pure index, no I/O, no clock.
//!
//! Eviction order is the order of [`Rank`]: unpinned before pinned, then lower
//! priority before higher, then least recently used (smallest `last_use`). The
//! caller supplies `last_use` from its own monotonic counter, so every rank is
//! unique and the order is total and deterministic.
//!
//! Invariants:
//! - `order` and `entries` hold exactly the same keys, with the same rank;
//! - `total` is the sum of the sizes in `entries`.
//!
//! The index knows chunk sizes only to answer [`EvictionIndex::plan`]; it never
//! holds data. Not thread-safe by itself: its owner locks it.
//!
//! The index holds the live MEM chunks. Reclaimable chunks (whose versions the
//! coordinator has given up) are kept apart, per tier, in a [`ReclaimQueue`]
//! (`reclaim`); [`plan_mem`] (`plan`) combines the three into what a change
//! must drop and demote to make room, so every choice of a victim is made
//! here, purely.

use std::collections::{BTreeSet, HashMap};
use tierpool_types::{ChunkAttrs, ChunkKey, Priority};

mod plan;
mod reclaim;

pub use plan::{plan_mem, MemRequest, MemRoom};
pub use reclaim::{Marked, ReclaimQueue};

/// Position of a chunk in eviction order: smaller ranks are evicted first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank {
    pub pinned: bool,
    pub priority: Priority,
    /// Value of the owner's use counter at the last get or put of the chunk.
    pub last_use: u64,
}

impl Rank {
    pub fn new(attrs: ChunkAttrs, last_use: u64) -> Rank {
        Rank { pinned: attrs.pinned, priority: attrs.priority, last_use }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    rank: Rank,
    size: u64,
}

/// The chunks that may be evicted, ordered by [`Rank`].
#[derive(Debug, Default)]
pub struct EvictionIndex {
    order: BTreeSet<(Rank, ChunkKey)>,
    entries: HashMap<ChunkKey, Entry>,
    total: u64,
}

impl EvictionIndex {
    pub fn new() -> EvictionIndex {
        EvictionIndex::default()
    }

    /// Adds a chunk, or replaces its rank and size if present.
    pub fn insert(&mut self, key: ChunkKey, rank: Rank, size: u64) {
        self.remove(key);
        self.order.insert((rank, key));
        self.entries.insert(key, Entry { rank, size });
        self.total += size;
    }

    /// Removes a chunk; returns its rank if it was present.
    pub fn remove(&mut self, key: ChunkKey) -> Option<Rank> {
        let e = self.entries.remove(&key)?;
        self.order.remove(&(e.rank, key));
        self.total -= e.size;
        Some(e.rank)
    }

    /// Marks a use of the chunk: it moves behind every chunk of its class.
    pub fn touch(&mut self, key: ChunkKey, last_use: u64) {
        if let Some(e) = self.entries.get(&key) {
            let rank = Rank { last_use, ..e.rank };
            let size = e.size;
            self.insert(key, rank, size);
        }
    }

    /// Changes the pinned flag and priority of a chunk, keeping its last use.
    pub fn set_attrs(&mut self, key: ChunkKey, attrs: ChunkAttrs) {
        if let Some(e) = self.entries.get(&key) {
            let rank = Rank::new(attrs, e.rank.last_use);
            let size = e.size;
            self.insert(key, rank, size);
        }
    }

    pub fn rank(&self, key: ChunkKey) -> Option<Rank> {
        self.entries.get(&key).map(|e| e.rank)
    }

    pub fn size_of(&self, key: ChunkKey) -> Option<u64> {
        self.entries.get(&key).map(|e| e.size)
    }

    pub fn contains(&self, key: ChunkKey) -> bool {
        self.entries.contains_key(&key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sum of the sizes of every chunk in the index.
    pub fn total_size(&self) -> u64 {
        self.total
    }

    /// Every chunk with its size, first victim first.
    pub fn victims(&self) -> impl Iterator<Item = (ChunkKey, u64)> + '_ {
        self.order.iter().map(|(_, k)| (*k, self.entries[k].size))
    }

    /// The shortest prefix of eviction order whose removal, added to `free`,
    /// makes room for `need` bytes; `None` when even the whole allowed prefix
    /// is not enough. `exclude` is skipped (the chunk being replaced); only
    /// chunks ranked strictly below `before` are allowed when it is given.
    pub fn plan(&self, need: u64, free: u64, exclude: Option<ChunkKey>, before: Option<Rank>) -> Option<Vec<ChunkKey>> {
        let mut room = free;
        let mut out = Vec::new();
        for (rank, key) in &self.order {
            if room >= need {
                break;
            }
            if before.is_some_and(|b| *rank >= b) {
                break;
            }
            if Some(*key) == exclude {
                continue;
            }
            room += self.entries[key].size;
            out.push(*key);
        }
        (room >= need).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tierpool_types::InodeId;

    fn key(i: u64) -> ChunkKey {
        ChunkKey::hashed(InodeId(i % 3), i, 0)
    }

    fn attrs(priority: u8, pinned: bool) -> ChunkAttrs {
        ChunkAttrs { priority: Priority::new(priority).unwrap(), pinned }
    }

    #[test]
    fn orders_unpinned_then_priority_then_lru() {
        let mut ix = EvictionIndex::new();
        ix.insert(key(1), Rank::new(attrs(1, true), 1), 10);
        ix.insert(key(2), Rank::new(attrs(5, false), 2), 10);
        ix.insert(key(3), Rank::new(attrs(3, false), 3), 10);
        ix.insert(key(4), Rank::new(attrs(3, false), 4), 10);
        ix.touch(key(3), 5);
        let order: Vec<_> = ix.victims().map(|(k, _)| k.index).collect();
        assert_eq!(order, vec![4, 3, 2, 1]);
        assert_eq!(ix.total_size(), 40);
    }

    #[test]
    fn plan_stops_at_the_bound_and_skips_the_excluded_chunk() {
        let mut ix = EvictionIndex::new();
        ix.insert(key(1), Rank::new(attrs(1, false), 1), 10);
        ix.insert(key(2), Rank::new(attrs(2, false), 2), 10);
        ix.insert(key(3), Rank::new(attrs(4, false), 3), 10);
        assert_eq!(ix.plan(5, 5, None, None), Some(vec![]));
        assert_eq!(ix.plan(15, 0, Some(key(1)), None), Some(vec![key(2), key(3)]));
        let bound = Rank::new(attrs(3, false), 0);
        assert_eq!(ix.plan(20, 0, None, Some(bound)), Some(vec![key(1), key(2)]));
        assert_eq!(ix.plan(21, 0, None, Some(bound)), None);
    }

    /// The naive model: a vector scanned linearly.
    #[derive(Default)]
    struct Naive(Vec<(ChunkKey, Rank, u64)>);

    impl Naive {
        fn remove(&mut self, k: ChunkKey) {
            self.0.retain(|e| e.0 != k);
        }
        fn sorted(&self) -> Vec<(ChunkKey, Rank, u64)> {
            let mut rest = self.0.clone();
            let mut out = Vec::new();
            while !rest.is_empty() {
                let mut best = 0;
                for (i, e) in rest.iter().enumerate() {
                    if (e.1, e.0) < (rest[best].1, rest[best].0) {
                        best = i;
                    }
                }
                out.push(rest.remove(best));
            }
            out
        }
        fn plan(&self, need: u64, free: u64, exclude: Option<ChunkKey>, before: Option<Rank>) -> Option<Vec<ChunkKey>> {
            let mut room = free;
            let mut out = Vec::new();
            for (k, r, s) in self.sorted() {
                if room >= need || before.is_some_and(|b| r >= b) {
                    break;
                }
                if Some(k) != exclude {
                    room += s;
                    out.push(k);
                }
            }
            (room >= need).then_some(out)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u8, bool, u64),
        Remove(u64),
        Touch(u64),
        SetAttrs(u64, u8, bool),
        Plan(u64, u64, Option<u64>, Option<(u8, bool)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let k = 0u64..12;
        prop_oneof![
            (k.clone(), 1u8..=5, any::<bool>(), 0u64..100).prop_map(|(k, p, pin, s)| Op::Insert(k, p, pin, s)),
            k.clone().prop_map(Op::Remove),
            k.clone().prop_map(Op::Touch),
            (k.clone(), 1u8..=5, any::<bool>()).prop_map(|(k, p, pin)| Op::SetAttrs(k, p, pin)),
            (0u64..400, 0u64..50, proptest::option::of(k), proptest::option::of((1u8..=5, any::<bool>())))
                .prop_map(|(n, f, x, b)| Op::Plan(n, f, x, b)),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_linear_scan(ops in proptest::collection::vec(op(), 1..80)) {
            let mut ix = EvictionIndex::new();
            let mut naive = Naive::default();
            let mut clock = 0u64;
            for op in ops {
                clock += 1;
                match op {
                    Op::Insert(k, p, pin, s) => {
                        let r = Rank::new(attrs(p, pin), clock);
                        ix.insert(key(k), r, s);
                        naive.remove(key(k));
                        naive.0.push((key(k), r, s));
                    }
                    Op::Remove(k) => {
                        let had = naive.0.iter().any(|e| e.0 == key(k));
                        prop_assert_eq!(ix.remove(key(k)).is_some(), had);
                        naive.remove(key(k));
                    }
                    Op::Touch(k) => {
                        ix.touch(key(k), clock);
                        naive.0.iter_mut().filter(|e| e.0 == key(k)).for_each(|e| e.1.last_use = clock);
                    }
                    Op::SetAttrs(k, p, pin) => {
                        ix.set_attrs(key(k), attrs(p, pin));
                        for e in naive.0.iter_mut().filter(|e| e.0 == key(k)) {
                            e.1 = Rank::new(attrs(p, pin), e.1.last_use);
                        }
                    }
                    Op::Plan(need, free, x, b) => {
                        let before = b.map(|(p, pin)| Rank::new(attrs(p, pin), clock / 2));
                        let x = x.map(key);
                        prop_assert_eq!(ix.plan(need, free, x, before), naive.plan(need, free, x, before));
                    }
                }
                let want: Vec<_> = naive.sorted().into_iter().map(|(k, _, s)| (k, s)).collect();
                let got: Vec<_> = ix.victims().collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(ix.total_size(), naive.0.iter().map(|e| e.2).sum::<u64>());
                prop_assert_eq!(ix.len(), naive.0.len());
            }
        }
    }
}
