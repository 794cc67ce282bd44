//! Inodes for unit tests.

use tierpool_meta::{InodeInfo, InodeKind};
use tierpool_types::{ChunkRef, InodeId};

/// File `id` of `size` bytes in chunks of `chunk_size`, stored as `chunks`
/// say; every other attribute a default.
pub(crate) fn file(id: InodeId, size: u64, chunk_size: u64, chunks: Vec<ChunkRef>) -> InodeInfo {
    InodeInfo {
        id,
        kind: InodeKind::File,
        size,
        chunk_size,
        mode: 0o644,
        uid: 0,
        gid: 0,
        nlink: 1,
        atime: 0,
        mtime: 0,
        ctime: 0,
        attrs: Default::default(),
        replicas: 1,
        placement: tierpool_types::Placement::Hash,
        chunks,
        target: String::new(),
        rdev: 0,
        origin: None,
        inline: None,
        restoring: None,
    }
}
