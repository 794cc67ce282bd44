//! Chunks read through the mount, shared by every open file, least recently
//! used evicted first, bounded in bytes.

use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// `(pool inode id, chunk index)`.
pub type Key = (u64, u64);

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
        let mut c = ChunkCache::new(10);
        c.insert((1, 0), Bytes::from(vec![0; 4]));
        c.insert((1, 1), Bytes::from(vec![1; 4]));
        c.get((1, 0));
        c.insert((1, 2), Bytes::from(vec![2; 4]));
        assert!(c.contains((1, 0)) && !c.contains((1, 1)) && c.contains((1, 2)));
        c.insert((1, 3), Bytes::from(vec![3; 11]));
        assert!(!c.contains((1, 3)), "larger than the whole cache");
        assert!(c.used <= 10);
    }
}
