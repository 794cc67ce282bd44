//! Chunk versions read or written through the mount, shared by every open
//! file, least recently used evicted first, bounded in bytes.
//!
//! Invariant: `used` is the sum of the lengths of the chunks held, and at
//! most `capacity` once an insert returns. A lookup and an insert take
//! constant time however many chunks are held (a tree of small files
//! holds tens of thousands of them).

use bytes::Bytes;
use lru::LruCache;

/// A chunk version: never overwritten, so a cached copy never goes stale.
pub type Key = tierpool_types::ChunkKey;

pub struct ChunkCache {
    capacity: u64,
    used: u64,
    chunks: LruCache<Key, Bytes>,
}

impl ChunkCache {
    pub fn new(capacity: u64) -> ChunkCache {
        ChunkCache { capacity, used: 0, chunks: LruCache::unbounded() }
    }

    /// The chunk, now the most recently used.
    pub fn get(&mut self, key: Key) -> Option<Bytes> {
        self.chunks.get(&key).cloned()
    }

    pub fn contains(&self, key: Key) -> bool {
        self.chunks.contains(&key)
    }

    /// Keeps `data` as the most recently used chunk, evicting the least
    /// recently used ones to make room; a chunk held already, or larger
    /// than the whole cache, is left as it is.
    pub fn insert(&mut self, key: Key, data: Bytes) {
        if data.len() as u64 > self.capacity || self.chunks.contains(&key) {
            return;
        }
        while self.used + data.len() as u64 > self.capacity {
            let Some((_, old)) = self.chunks.pop_lru() else { break };
            self.used -= old.len() as u64;
        }
        self.used += data.len() as u64;
        self.chunks.put(key, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_within_capacity() {
        let k = |index| Key::hashed(tierpool_types::InodeId(1), index, 1);
        let mut c = ChunkCache::new(10);
        c.insert(k(0), Bytes::from(vec![0; 4]));
        c.insert(k(1), Bytes::from(vec![1; 4]));
        c.get(k(0));
        c.insert(k(2), Bytes::from(vec![2; 4]));
        assert!(c.contains(k(0)) && !c.contains(k(1)) && c.contains(k(2)));
        c.insert(k(3), Bytes::from(vec![3; 11]));
        assert!(!c.contains(k(3)), "larger than the whole cache");
        assert!(c.used <= 10);
    }

    /// What the cache held when it scanned a queue of keys on every
    /// lookup: the model of the one above.
    #[derive(Default)]
    struct Model {
        capacity: u64,
        chunks: std::collections::HashMap<Key, Bytes>,
        order: std::collections::VecDeque<Key>,
    }

    impl Model {
        fn get(&mut self, key: Key) -> Option<Bytes> {
            let b = self.chunks.get(&key)?.clone();
            self.order.retain(|k| *k != key);
            self.order.push_back(key);
            Some(b)
        }

        fn insert(&mut self, key: Key, data: Bytes) {
            if data.len() as u64 > self.capacity || self.chunks.contains_key(&key) {
                return;
            }
            while self.chunks.values().map(|b| b.len() as u64).sum::<u64>() + data.len() as u64 > self.capacity {
                let Some(old) = self.order.pop_front() else { break };
                self.chunks.remove(&old);
            }
            self.chunks.insert(key, data);
            self.order.push_back(key);
        }
    }

    proptest::proptest! {
        /// Any sequence of inserts and lookups leaves the cache holding the
        /// model's chunks, byte for byte, within its capacity.
        #[test]
        fn holds_what_the_model_holds(
            capacity in 0u64..64,
            ops in proptest::collection::vec((proptest::bool::ANY, 0u64..12, 0usize..24), 0..200),
        ) {
            let k = |index| Key::hashed(tierpool_types::InodeId(1), index, 1);
            let (mut c, mut m) = (ChunkCache::new(capacity), Model { capacity, ..Model::default() });
            for (insert, index, len) in ops {
                if insert {
                    let data = Bytes::from(vec![index as u8; len]);
                    c.insert(k(index), data.clone());
                    m.insert(k(index), data);
                } else {
                    proptest::prop_assert_eq!(c.get(k(index)), m.get(k(index)));
                }
                proptest::prop_assert!(c.used <= capacity);
                proptest::prop_assert_eq!(c.used, m.chunks.values().map(|b| b.len() as u64).sum::<u64>());
                for i in 0..12 {
                    proptest::prop_assert_eq!(c.contains(k(i)), m.chunks.contains_key(&k(i)));
                }
            }
        }
    }
}
