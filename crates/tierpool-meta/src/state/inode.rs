//! One inode as the state stores it, and its client view ([`InodeInfo`]).
//!
//! A directory keeps its entries sorted by name; an inode keeps a link to the
//! directory holding it (`parent`, `name`), the root pointing at itself with an
//! empty name. A file's `checksums` has `ceil(size / chunk_size)` entries.

use super::MetaState;
use crate::{InodeInfo, InodeKind, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_types::{Checksum, ChunkAttrs, InodeId};

/// Permission bits of the root directory.
pub(super) const ROOT_MODE: u32 = 0o755;
/// Bits of `mode` that are kept: permissions, setuid, setgid, sticky.
pub(super) const MODE_MASK: u32 = 0o7777;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Inode {
    pub(super) parent: InodeId,
    pub(super) name: String,
    pub(super) mode: u32,
    pub(super) mtime: Timestamp,
    pub(super) ctime: Timestamp,
    pub(super) attrs: ChunkAttrs,
    pub(super) body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Body {
    File { size: u64, chunk_size: u64, checksums: Vec<Checksum> },
    Dir { children: BTreeMap<String, InodeId> },
    Region { size: u64, chunk_size: u64 },
}

impl Inode {
    pub(super) fn root(now: Timestamp) -> Inode {
        Inode::dir(InodeId::ROOT, String::new(), ROOT_MODE, now)
    }

    pub(super) fn dir(parent: InodeId, name: String, mode: u32, now: Timestamp) -> Inode {
        Inode {
            parent,
            name,
            mode: mode & MODE_MASK,
            mtime: now,
            ctime: now,
            attrs: ChunkAttrs::default(),
            body: Body::Dir { children: BTreeMap::new() },
        }
    }

    pub(super) fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir { .. })
    }

    pub(super) fn children(&self) -> Option<&BTreeMap<String, InodeId>> {
        match &self.body {
            Body::Dir { children } => Some(children),
            Body::File { .. } | Body::Region { .. } => None,
        }
    }

    pub(super) fn children_mut(&mut self) -> Option<&mut BTreeMap<String, InodeId>> {
        match &mut self.body {
            Body::Dir { children } => Some(children),
            Body::File { .. } | Body::Region { .. } => None,
        }
    }
}

impl MetaState {
    /// How `stat` shows a live inode.
    pub(super) fn info(&self, id: InodeId) -> InodeInfo {
        let n = self.node(id);
        let (kind, size, chunk_size, nlink, checksums) = match &n.body {
            Body::File { size, chunk_size, checksums } => (InodeKind::File, *size, *chunk_size, 1, checksums.clone()),
            Body::Region { size, chunk_size } => (InodeKind::Region, *size, *chunk_size, 1, Vec::new()),
            Body::Dir { children } => {
                let subdirs = children.values().filter(|c| self.is_dir(**c)).count();
                let nlink = u32::try_from(subdirs).unwrap_or(u32::MAX).saturating_add(2);
                (InodeKind::Dir, children.len() as u64, 0, nlink, Vec::new())
            }
        };
        InodeInfo {
            id,
            kind,
            size,
            chunk_size,
            mode: n.mode,
            nlink,
            mtime: n.mtime,
            ctime: n.ctime,
            attrs: n.attrs,
            checksums,
        }
    }
}
