//! Operations, replies and the views of inodes handed to clients.
//! These are logged and sent on the wire: extend only by adding variants at
//! the end, never change a variant in place.

use crate::Timestamp;
use serde::{Deserialize, Serialize};
use tierpool_types::{Checksum, ChunkAttrs, InodeId, Priority, WorkerId};

/// A change to the metadata. Paths are as the user typed them; the state
/// machine normalises them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOp {
    /// First op of a pool: fixes the partition count. Fails if already initialised.
    Init { partitions: u32 },
    /// Create a directory; with `parents`, create missing ancestors and succeed if it exists.
    Mkdir { path: String, parents: bool, mode: u32 },
    /// Reserve `count` (>= 1) fresh inode ids for a writer. Reply: [`MetaReply::Inodes`].
    AllocInodes { count: u64 },
    /// Publish a file whose chunks (version 1 of each index) are already on the workers.
    /// `inode` must have been reserved and never used. With `overwrite`, an existing
    /// file at `path` is atomically replaced and its inode queued for garbage collection.
    /// Reply: [`MetaReply::Info`] of the new file.
    CommitFile {
        path: String,
        inode: InodeId,
        size: u64,
        chunk_size: u64,
        checksums: Vec<Checksum>,
        attrs: ChunkAttrs,
        mode: u32,
        overwrite: bool,
    },
    /// Remove a file, or a directory (empty, or any with `recursive`).
    /// Removed file inodes are queued for garbage collection. Reply: [`MetaReply::Removed`].
    Remove { path: String, recursive: bool },
    /// Atomic rename with POSIX rules (see `state.rs`).
    Rename { from: String, to: String },
    /// Change priority and/or pinning of a file, or of every file under a directory.
    /// Reply: [`MetaReply::Attrs`] listing each file inode and its new attributes.
    SetAttrs { path: String, priority: Option<Priority>, pinned: Option<bool> },
    /// A worker joins (id `None` or unknown) or comes back (known id: address and labels
    /// are updated, capacity is updated but the partition table is kept). A new worker
    /// triggers a rebalance of the partition table by capacity. Reply: [`MetaReply::Worker`].
    RegisterWorker {
        id: Option<WorkerId>,
        addr: String,
        host: String,
        rack: String,
        mem_capacity: u64,
        disk_capacity: u64,
    },
    /// The chunks of these inodes were deleted from every worker: forget them.
    GcDone { inodes: Vec<InodeId> },
    /// Publish a region of `size` bytes whose chunks (version 1 of each
    /// index, zero-filled or already written) exist on the workers: its space
    /// is taken. `inode` must have been reserved and never used; an existing
    /// entry at `path` is an error. Reply: [`MetaReply::Info`].
    CommitRegion { path: String, inode: InodeId, size: u64, chunk_size: u64, attrs: ChunkAttrs, mode: u32 },
    /// Change the permission bits (`chmod`; only the bits of `0o7777` are
    /// kept) and/or the modification time (`utimens`) of one inode; its
    /// `ctime` becomes `now`. Reply: [`MetaReply::Info`].
    SetMeta { path: String, mode: Option<u32>, mtime: Option<Timestamp> },
}

/// The result of a successful op.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaReply {
    Done,
    Inodes { first: InodeId, count: u64 },
    Info(InodeInfo),
    Removed { inodes: u64 },
    Attrs { changed: Vec<(InodeId, ChunkAttrs)> },
    Worker { id: WorkerId },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InodeKind {
    File,
    Dir,
    /// Memory allocated from the pool: written in place, page by page.
    Region,
}

/// What `stat` shows of an inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeInfo {
    pub id: InodeId,
    pub kind: InodeKind,
    /// Bytes for a file or region; number of entries for a directory.
    pub size: u64,
    /// 0 for directories.
    pub chunk_size: u64,
    /// Permission bits (e.g. 0o644).
    pub mode: u32,
    /// 1 for a file, 2 + number of subdirectories for a directory.
    pub nlink: u32,
    pub mtime: u64,
    pub ctime: u64,
    pub attrs: ChunkAttrs,
    /// One CRC-32C per chunk of a file (`ceil(size / chunk_size)` entries); empty for a
    /// directory and for a region (its chunks change in place; workers check them).
    pub checksums: Vec<Checksum>,
}

/// One directory entry as `ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub info: InodeInfo,
}

/// A worker as the coordinator remembers it across restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub id: WorkerId,
    pub addr: String,
    pub host: String,
    pub rack: String,
    pub mem_capacity: u64,
    pub disk_capacity: u64,
}
