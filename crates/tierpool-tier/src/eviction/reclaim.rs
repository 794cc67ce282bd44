//! Reclaimable chunks of one tier, in the order they are dropped: a pure
//! index, no I/O, no clock.
//!
//! A chunk is reclaimable once the coordinator has said its version was
//! replaced or its file removed: it stays readable until it is deleted, but
//! its space may be taken back whenever a change needs room. Drop order is
//! mark order (smallest `seq` first, supplied by the owner's counter): every
//! mark waits the same grace period before its chunk is deleted, so the
//! oldest mark is the one whose readers most likely finished.
//!
//! Invariants:
//! - `order` and `entries` hold exactly the same keys, with the same `seq`;
//! - `total` is the sum of the sizes in `entries`.

use std::collections::{BTreeSet, HashMap};
use tierpool_types::ChunkKey;

/// What the queue keeps of one reclaimable chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Marked {
    /// The owner's counter when the chunk was marked: drop order.
    pub seq: u64,
    pub size: u64,
}

/// Reclaimable chunks of one tier, first to drop first.
#[derive(Debug, Default)]
pub struct ReclaimQueue {
    order: BTreeSet<(u64, ChunkKey)>,
    entries: HashMap<ChunkKey, Marked>,
    total: u64,
}

impl ReclaimQueue {
    pub fn new() -> ReclaimQueue {
        ReclaimQueue::default()
    }

    /// Adds a chunk, or replaces its place and size if present.
    pub fn insert(&mut self, key: ChunkKey, marked: Marked) {
        self.remove(key);
        self.order.insert((marked.seq, key));
        self.entries.insert(key, marked);
        self.total += marked.size;
    }

    /// Removes a chunk; returns what was kept of it if it was present.
    pub fn remove(&mut self, key: ChunkKey) -> Option<Marked> {
        let m = self.entries.remove(&key)?;
        self.order.remove(&(m.seq, key));
        self.total -= m.size;
        Some(m)
    }

    pub fn get(&self, key: ChunkKey) -> Option<Marked> {
        self.entries.get(&key).copied()
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

    /// Sum of the sizes of every chunk in the queue.
    pub fn total_size(&self) -> u64 {
        self.total
    }

    /// Every chunk with its size, first to drop first.
    pub fn iter(&self) -> impl Iterator<Item = (ChunkKey, u64)> + '_ {
        self.order.iter().map(|(_, k)| (*k, self.entries[k].size))
    }

    /// The shortest prefix of drop order whose removal, added to `free`,
    /// makes room for `need` bytes; `None` when dropping every chunk is not
    /// enough. `exclude` (the chunk being written) is never chosen.
    pub fn plan(&self, need: u64, free: u64, exclude: Option<ChunkKey>) -> Option<Vec<ChunkKey>> {
        let mut room = free;
        let mut out = Vec::new();
        for (key, size) in self.iter() {
            if room >= need {
                break;
            }
            if Some(key) != exclude {
                room = room.saturating_add(size);
                out.push(key);
            }
        }
        (room >= need).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::InodeId;

    fn key(i: u64) -> ChunkKey {
        ChunkKey::hashed(InodeId(i), 0, 1)
    }

    #[test]
    fn drops_oldest_marks_first_and_only_as_many_as_needed() {
        let mut q = ReclaimQueue::new();
        q.insert(key(1), Marked { seq: 5, size: 10 });
        q.insert(key(2), Marked { seq: 2, size: 20 });
        q.insert(key(3), Marked { seq: 9, size: 30 });
        assert_eq!(q.iter().collect::<Vec<_>>(), [(key(2), 20), (key(1), 10), (key(3), 30)]);
        assert_eq!(q.total_size(), 60);
        assert_eq!(q.plan(5, 5, None), Some(vec![]));
        assert_eq!(q.plan(25, 0, None), Some(vec![key(2), key(1)]));
        assert_eq!(q.plan(25, 0, Some(key(1))), Some(vec![key(2), key(3)]));
        assert_eq!(q.plan(61, 0, None), None);
        assert_eq!(q.plan(61, 1, None), Some(vec![key(2), key(1), key(3)]));
    }

    #[test]
    fn reinsert_moves_and_resizes() {
        let mut q = ReclaimQueue::new();
        q.insert(key(1), Marked { seq: 1, size: 10 });
        q.insert(key(2), Marked { seq: 2, size: 10 });
        q.insert(key(1), Marked { seq: 3, size: 4 });
        assert_eq!(q.iter().collect::<Vec<_>>(), [(key(2), 10), (key(1), 4)]);
        assert_eq!((q.total_size(), q.len()), (14, 2));
        assert_eq!(q.remove(key(2)), Some(Marked { seq: 2, size: 10 }));
        assert_eq!(q.remove(key(2)), None);
        assert_eq!((q.total_size(), q.len()), (4, 1));
    }
}
