//! Where chunk bytes live: the [`ChunkStore`] trait and its MEM and DISK
//! implementations.
//!
//! A store keeps chunks and counts their bytes; it enforces no budget and
//! chooses no victims (that is the tier manager's job). Every implementation
//! passes the one conformance suite in `conformance.rs`.
//!
//! Invariant of every store: `used()` is the sum of the data lengths of the
//! chunks it holds and `len()` their number.

use bytes::Bytes;
use std::ops::RangeInclusive;
use tierpool_types::{Checksum, ChunkKey, InodeId, Result};

#[cfg(test)]
mod conformance;
pub mod disk;
pub mod disk_io;
mod disk_scan;
pub mod format;
mod layout;
pub mod mem;

pub use disk::{DiskStore, ReadTicket, Staged};
pub use mem::MemStore;

/// What a store knows about a chunk without reading it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ChunkMeta {
    pub len: u64,
    pub checksum: Checksum,
}

/// A place that holds chunks by key.
pub trait ChunkStore {
    /// Stores a chunk, replacing any chunk with the same key.
    /// `checksum` is trusted to be the CRC-32C of `data`.
    fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum) -> Result<()>;
    /// The chunk's bytes; `NotFound` naming the key if absent.
    fn get(&self, key: ChunkKey) -> Result<Bytes>;
    fn meta(&self, key: ChunkKey) -> Option<ChunkMeta>;
    /// Removes a chunk; `false` if it was absent.
    fn delete(&mut self, key: ChunkKey) -> Result<bool>;
    /// Keys of every chunk of `inode`, in key order.
    fn keys_of(&self, inode: InodeId) -> Vec<ChunkKey>;
    /// Bytes of chunk data held.
    fn used(&self) -> u64;
    /// Number of chunks held.
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every chunk of `inode`; returns how many were removed.
    fn delete_inode(&mut self, inode: InodeId) -> Result<u64> {
        let mut n = 0;
        for key in self.keys_of(inode) {
            n += u64::from(self.delete(key)?);
        }
        Ok(n)
    }
}

/// All keys of one inode, as a range of the `ChunkKey` order.
pub fn inode_range(inode: InodeId) -> RangeInclusive<ChunkKey> {
    ChunkKey::hashed(inode, 0, 0)..=ChunkKey::hashed(inode, u64::MAX, u64::MAX)
}

/// The error for an absent chunk.
pub fn not_found(key: ChunkKey) -> tierpool_types::Error {
    tierpool_types::Error::new(tierpool_types::ErrorKind::NotFound, format!("chunk {key} not found on this worker"))
}
