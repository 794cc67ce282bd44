//! Chunk versions read or written through the mount, shared by every open
//! file, least recently used evicted first, bounded in bytes.

use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// A chunk version: never overwritten, so a cached copy never goes stale.
pub type Key = tierpool_types::ChunkKey;

pub struct ChunkCache {
    capacity: u64,
    used: u64,
    chunks: HashMap<Key, Bytes>,
    order: VecDeque<Key>,
}

impl ChunkCache {
    pub fn new(capacity: u64) -> ChunkCache {
        ChunkCache { capacity, used: 0, chunks: HashMap::new(), order: VecDeque::new() }
    }

    pub fn get(&mut self, key: Key) -> Option<Bytes> {
        let b = self.chunks.get(&key)?.clone();
        if let Some(pos) = self.order.iter().position(|k| *k == key) {
            self.order.remove(pos);
        }
        self.order.push_back(key);
        Some(b)
    }

    pub fn contains(&self, key: Key) -> bool {
        self.chunks.contains_key(&key)
    }

    pub fn insert(&mut self, key: Key, data: Bytes) {
        if data.len() as u64 > self.capacity || self.chunks.contains_key(&key) {
            return;
        }
        while self.used + data.len() as u64 > self.capacity {
            let Some(old) = self.order.pop_front() else { break };
            if let Some(b) = self.chunks.remove(&old) {
                self.used -= b.len() as u64;
            }
        }
        self.used += data.len() as u64;
        self.chunks.insert(key, data);
        self.order.push_back(key);
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
}
