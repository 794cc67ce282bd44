//! The MEM store: chunks as reference-counted `Bytes` in an ordered map.
//!
//! A get returns a clone of the stored `Bytes` (no copy). Invariant: `used` is
//! the sum of the lengths of the stored chunks.

use super::{inode_range, not_found, ChunkMeta, ChunkStore};
use bytes::Bytes;
use std::collections::BTreeMap;
use tierpool_types::{Checksum, ChunkKey, InodeId, Result};

#[derive(Debug, Default)]
pub struct MemStore {
    chunks: BTreeMap<ChunkKey, (Bytes, Checksum)>,
    used: u64,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Removes a chunk and returns it.
    pub fn take(&mut self, key: ChunkKey) -> Option<(Bytes, Checksum)> {
        let (data, sum) = self.chunks.remove(&key)?;
        self.used -= data.len() as u64;
        Some((data, sum))
    }

    /// The chunk's bytes and checksum, if present.
    pub fn peek(&self, key: ChunkKey) -> Option<(Bytes, Checksum)> {
        self.chunks.get(&key).cloned()
    }

    pub fn contains(&self, key: ChunkKey) -> bool {
        self.chunks.contains_key(&key)
    }
}

impl ChunkStore for MemStore {
    fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum) -> Result<()> {
        self.take(key);
        self.used += data.len() as u64;
        self.chunks.insert(key, (data, checksum));
        Ok(())
    }

    fn get(&self, key: ChunkKey) -> Result<Bytes> {
        self.chunks.get(&key).map(|(d, _)| d.clone()).ok_or_else(|| not_found(key))
    }

    fn meta(&self, key: ChunkKey) -> Option<ChunkMeta> {
        self.chunks.get(&key).map(|(d, c)| ChunkMeta { len: d.len() as u64, checksum: *c })
    }

    fn delete(&mut self, key: ChunkKey) -> Result<bool> {
        Ok(self.take(key).is_some())
    }

    fn keys_of(&self, inode: InodeId) -> Vec<ChunkKey> {
        self.chunks.range(inode_range(inode)).map(|(k, _)| *k).collect()
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn len(&self) -> u64 {
        self.chunks.len() as u64
    }
}
