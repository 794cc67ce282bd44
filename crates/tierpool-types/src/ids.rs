//! Identifiers of inodes, workers and chunk versions, and per-chunk attributes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A file, directory or region. Never reused within a pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InodeId(pub u64);

impl InodeId {
    /// The root directory.
    pub const ROOT: InodeId = InodeId(1);
}

impl fmt::Display for InodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A worker of the pool, assigned by the coordinator at first registration and
/// kept by the worker in its state directory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkerId(pub u32);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w{}", self.0)
    }
}

/// One stored chunk object: chunk `index` of `inode` at `version`, in
/// partition `home` when its file's placement policy chose one (`None`:
/// the partition its inode and index hash to).
///
/// Ordering is by inode first, so all chunks of an inode form one range.
/// `home` is not part of a chunk's identity (no two stored objects differ
/// only by it) but it travels with the key: whoever routes or moves the
/// chunk must know its partition from the key alone.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkKey {
    pub inode: InodeId,
    pub index: u64,
    pub version: u64,
    #[serde(deserialize_with = "home")]
    pub home: Option<u32>,
}

/// A home partition that fits a chunk header ([`ChunkKey::MAX_HOME`]);
/// any other does not decode.
fn home<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<u32>::deserialize(d)? {
        Some(p) if p > ChunkKey::MAX_HOME => {
            Err(serde::de::Error::custom(format!("home partition {p} is above the largest, {}", ChunkKey::MAX_HOME)))
        }
        h => Ok(h),
    }
}

impl ChunkKey {
    /// A chunk in the partition its inode and index hash to.
    pub const fn hashed(inode: InodeId, index: u64, version: u64) -> ChunkKey {
        ChunkKey { inode, index, version, home: None }
    }

    /// The largest partition a key may name as its home (pools have at most
    /// 2^20 partitions; chunk file headers keep the home in 24 bits).
    pub const MAX_HOME: u32 = (1 << 24) - 2;
}

impl fmt::Display for ChunkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@{}", self.inode.0, self.index, self.version)?;
        match self.home {
            Some(p) => write!(f, " (placed in partition {p})"),
            None => Ok(()),
        }
    }
}

/// What a file's metadata records of one chunk: which stored version holds
/// it, how many bytes that object has, and their CRC-32C.
///
/// The object may be shorter than the chunk's share of the file: the bytes
/// after it read as zeros. Version 0 is a hole: nothing is stored, every byte
/// is zero (and `len` and `checksum` are 0). Version `u64::MAX` (never
/// handed out) is a chunk of a file attached from an under-store that the
/// pool does not hold: its bytes are the under-store object's (see
/// [`ChunkRef::BELOW`]). A version with [`ChunkRef::INLINE_BIT`] set is
/// chunk 0 of a small file whose bytes the metadata holds, not the workers
/// (see [`ChunkRef::inline`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    pub version: u64,
    pub len: u64,
    pub checksum: crate::Checksum,
    /// The partition the object was placed in (see [`ChunkKey::home`]).
    #[serde(deserialize_with = "home")]
    pub home: Option<u32>,
}

impl ChunkRef {
    /// A chunk of zeros with nothing stored.
    pub const HOLE: ChunkRef = ChunkRef { version: 0, len: 0, checksum: 0, home: None };

    /// The stored object of this version, as chunk `index` of `inode`.
    pub const fn key(&self, inode: InodeId, index: u64) -> ChunkKey {
        ChunkKey { inode, index, version: self.version, home: self.home }
    }

    /// A chunk whose bytes are in the under-store only (nothing stored in
    /// the pool; `len` and `checksum` are 0): read, it is loaded from there.
    pub const BELOW: ChunkRef = ChunkRef { version: u64::MAX, len: 0, checksum: 0, home: None };

    pub fn is_hole(&self) -> bool {
        self.version == 0
    }

    pub fn is_below(&self) -> bool {
        self.version == u64::MAX
    }

    /// Set in the version of a chunk held inline by the metadata. Versions
    /// handed out by the coordinator never reach it.
    pub const INLINE_BIT: u64 = 1 << 62;

    /// Chunk 0 of a file written whole in one commit, its `data` kept in
    /// the metadata beside the file (version `INLINE_BIT | 1`).
    pub fn inline(data: &[u8]) -> ChunkRef {
        ChunkRef { version: Self::INLINE_BIT | 1, len: data.len() as u64, checksum: crc32c::crc32c(data), home: None }
    }

    /// Whether the bytes of this chunk are held by the metadata.
    pub fn is_inline(&self) -> bool {
        !self.is_below() && self.version & Self::INLINE_BIT != 0
    }

    /// Whether an object of this version is stored on the workers.
    pub fn is_stored(&self) -> bool {
        !self.is_hole() && !self.is_below() && !self.is_inline()
    }
}

/// Eviction priority 1 (evicted first) ..= 5 (evicted last). Default 3.
/// Decoding checks the range too, so no other value crosses the wire.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Priority(u8);

impl TryFrom<u8> for Priority {
    type Error = crate::Error;
    fn try_from(p: u8) -> crate::Result<Priority> {
        Priority::new(p)
    }
}

impl From<Priority> for u8 {
    fn from(p: Priority) -> u8 {
        p.0
    }
}

impl Priority {
    pub const MIN: Priority = Priority(1);
    pub const MAX: Priority = Priority(5);

    pub fn new(p: u8) -> crate::Result<Priority> {
        if (1..=5).contains(&p) {
            Ok(Priority(p))
        } else {
            Err(crate::Error::invalid(format!("priority {p} is out of range 1..5")))
        }
    }

    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority(3)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Attributes that steer eviction of every chunk of an inode.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkAttrs {
    pub priority: Priority,
    pub pinned: bool,
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn a_home_above_the_largest_does_not_decode() {
        let key = |home| ChunkKey { inode: InodeId(1), index: 2, version: 3, home };
        for ok in [None, Some(0), Some(ChunkKey::MAX_HOME)] {
            let json = serde_json::to_string(&key(ok)).unwrap();
            assert_eq!(serde_json::from_str::<ChunkKey>(&json).unwrap(), key(ok));
        }
        let json = serde_json::to_string(&key(Some(ChunkKey::MAX_HOME + 1))).unwrap();
        assert!(serde_json::from_str::<ChunkKey>(&json).unwrap_err().to_string().contains("home partition"));
    }
}
