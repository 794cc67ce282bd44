//! The MEM store: chunks as reference-counted `Bytes` in an ordered map.
//!
//! A get returns a clone of the stored `Bytes` (no copy). A chunk changed in
//! place ([`MemStore::write_at`]) has its checksum recomputed only when it is
//! next asked for (on demotion, typically), so small writes into a large chunk
//! cost no more than their bytes. Invariant: `used` is the sum of the lengths
//! of the stored chunks.

use super::{inode_range, not_found, ChunkMeta, ChunkStore};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use tierpool_types::{Checksum, ChunkKey, InodeId, Result};

#[derive(Debug, Default)]
pub struct MemStore {
    /// The checksum is `None` after an in-place write, until asked for.
    chunks: BTreeMap<ChunkKey, (Bytes, Option<Checksum>)>,
    used: u64,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Removes a chunk and returns it.
    pub fn take(&mut self, key: ChunkKey) -> Option<Bytes> {
        let (data, _) = self.chunks.remove(&key)?;
        self.used -= data.len() as u64;
        Some(data)
    }

    /// The chunk's bytes and checksum, if present.
    pub fn peek(&mut self, key: ChunkKey) -> Option<(Bytes, Checksum)> {
        let (data, sum) = self.chunks.get_mut(&key)?;
        let sum = *sum.get_or_insert_with(|| crc32c::crc32c(data));
        Some((data.clone(), sum))
    }

    /// The chunk's bytes, if present, and its checksum unless it changed
    /// in place since the checksum was last computed (never computed here).
    pub fn data(&self, key: ChunkKey) -> Option<(Bytes, Option<Checksum>)> {
        self.chunks.get(&key).map(|(d, sum)| (d.clone(), *sum))
    }

    /// Overwrites byte ranges `(offset, bytes)` of a chunk in place (without a
    /// copy unless a reader still holds the old bytes, or they are in a
    /// buffer a server lent, as a chunk written whole is: the first write
    /// copies those). `false` if absent.
    ///
    /// # Panics
    /// If a range reaches past the chunk's end.
    pub fn write_at(&mut self, key: ChunkKey, ranges: &[(u64, &[u8])]) -> bool {
        let Some((data, sum)) = self.chunks.get_mut(&key) else { return false };
        let mut m = std::mem::take(data).try_into_mut().unwrap_or_else(|b| BytesMut::from(&b[..]));
        for (off, bytes) in ranges {
            let off = *off as usize;
            m[off..off + bytes.len()].copy_from_slice(bytes);
        }
        *data = m.freeze();
        *sum = None;
        true
    }

    /// The chunk's length, if present (no checksum needed).
    pub fn meta_len(&self, key: ChunkKey) -> Option<u64> {
        self.chunks.get(&key).map(|(d, _)| d.len() as u64)
    }

    /// Up to `limit` keys after `after` (from the first without it), in key
    /// order, with their lengths.
    pub fn keys_after(&self, after: Option<ChunkKey>, limit: usize) -> Vec<(ChunkKey, u64)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, Excluded);
        self.chunks.range((from, Unbounded)).take(limit).map(|(k, (d, _))| (*k, d.len() as u64)).collect()
    }

    pub fn contains(&self, key: ChunkKey) -> bool {
        self.chunks.contains_key(&key)
    }
}

impl ChunkStore for MemStore {
    fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum) -> Result<()> {
        self.take(key);
        self.used += data.len() as u64;
        self.chunks.insert(key, (data, Some(checksum)));
        Ok(())
    }

    fn get(&self, key: ChunkKey) -> Result<Bytes> {
        self.chunks.get(&key).map(|(d, _)| d.clone()).ok_or_else(|| not_found(key))
    }

    fn meta(&self, key: ChunkKey) -> Option<ChunkMeta> {
        self.chunks
            .get(&key)
            .map(|(d, c)| ChunkMeta { len: d.len() as u64, checksum: c.unwrap_or_else(|| crc32c::crc32c(d)) })
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
