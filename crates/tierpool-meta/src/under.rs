//! Under-stores as the metadata knows them: a directory of the pool
//! attached to a durable store below it ([`Attachment`]), and a file's
//! [`Origin`]: the under-store object it mirrors.
//!
//! A file with an origin has chunks the pool may not hold
//! ([`ChunkRef::BELOW`](tierpool_types::ChunkRef::BELOW)): their bytes are
//! the object's, loaded on first read. A file is *clean* when the object
//! below holds exactly its bytes (`origin` set, not `dirty`): only then may
//! the pool drop its copies. Any change of its bytes in the pool makes it
//! dirty until it is persisted again; a file made in the pool under an
//! attachment has no origin until it is first persisted.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the pool does with writes to an attached directory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WriteMode {
    /// A written file reaches the under-store before its close (or
    /// `sync`) returns; removals and renames reach it before they return.
    Through,
    /// Nothing is written below: files read from the under-store, changes
    /// stay in the pool.
    PoolOnly,
    /// A written file is acknowledged once the pool keeps it on its
    /// workers' disks; it reaches the under-store in the background (and
    /// on `sync`, or `fsync` on the mount). Removals, renames and new
    /// directories reach the store before they return, as with `Through`.
    Back,
}

impl WriteMode {
    pub const ALL: [WriteMode; 3] = [WriteMode::Through, WriteMode::PoolOnly, WriteMode::Back];

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Through => "through",
            WriteMode::PoolOnly => "pool-only",
            WriteMode::Back => "back",
        }
    }

    /// Whether names (new directories, removals, renames) change below as
    /// they change in the pool, so that a file's key follows its path.
    pub fn mirrors_names(self) -> bool {
        matches!(self, WriteMode::Through | WriteMode::Back)
    }

    pub fn parse(s: &str) -> Option<WriteMode> {
        WriteMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A directory of the pool that shows an under-store's tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `file:///dir`, `s3://bucket/prefix`.
    pub uri: String,
    pub mode: WriteMode,
    /// No entry beneath it may be created, changed or removed.
    pub readonly: bool,
    /// How to reach the store (endpoint, region, credentials).
    pub options: BTreeMap<String, String>,
}

/// The under-store object a file mirrors, as it was when the file last
/// matched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The attached directory the object is under.
    pub attach: tierpool_types::InodeId,
    /// The object's path relative to the attachment's root.
    pub key: String,
    pub size: u64,
    /// The object's modification time (ns since the epoch).
    pub mtime: u64,
    /// The object's version tag.
    pub etag: String,
    /// The file's bytes changed in the pool since they last matched the object.
    pub dirty: bool,
    /// The file's own write mode, if it has one; otherwise its
    /// attachment's applies (see [`Origin::mode_in`]).
    pub mode: Option<WriteMode>,
}

impl Origin {
    /// Whether the object's own description matches `(size, mtime, etag)`.
    pub fn same_object(&self, size: u64, mtime: u64, etag: &str) -> bool {
        self.size == size && self.mtime == mtime && self.etag == etag
    }

    /// The write mode the file follows beneath `attachment`: its own, or
    /// the attachment's.
    pub fn mode_in(&self, attachment: &Attachment) -> WriteMode {
        self.mode.unwrap_or(attachment.mode)
    }
}
