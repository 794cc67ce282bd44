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

/// One stored chunk object: chunk `index` of `inode` at `version`.
///
/// Ordering is by inode first, so all chunks of an inode form one range.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkKey {
    pub inode: InodeId,
    pub index: u64,
    pub version: u64,
}

impl fmt::Display for ChunkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@{}", self.inode.0, self.index, self.version)
    }
}

/// What a file's metadata records of one chunk: which stored version holds
/// it, how many bytes that object has, and their CRC-32C.
///
/// The object may be shorter than the chunk's share of the file: the bytes
/// after it read as zeros. Version 0 is a hole: nothing is stored, every byte
/// is zero (and `len` and `checksum` are 0).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    pub version: u64,
    pub len: u64,
    pub checksum: crate::Checksum,
}

impl ChunkRef {
    /// A chunk of zeros with nothing stored.
    pub const HOLE: ChunkRef = ChunkRef { version: 0, len: 0, checksum: 0 };

    pub fn is_hole(&self) -> bool {
        self.version == 0
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
