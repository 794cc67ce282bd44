//! One inode as the state stores it, and its client view ([`InodeInfo`]).
//!
//! A directory keeps its entries sorted by name and a link to the directory
//! holding it (`parent`, `name`; the root points at itself with an empty
//! name), so it has exactly one name. Other inodes may have several names
//! (hard links): `links` counts the entries naming them. A file's `chunks`
//! has `ceil(size / chunk_size)` entries.

use super::MetaState;
use crate::{InodeInfo, InodeKind, Timestamp};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_types::{ChunkAttrs, ChunkRef, InodeId, Placement};

/// Permission bits of the root directory.
pub(super) const ROOT_MODE: u32 = 0o755;
/// Bits of `mode` that are kept: permissions, setuid, setgid, sticky.
pub(super) const MODE_MASK: u32 = 0o7777;
/// The set-group-id bit: on a directory, new entries take its group.
pub(super) const SET_GID: u32 = 0o2000;

/// Who owns an inode; an op runs on behalf of one (root, 0/0, by default).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub mode: u32,
    pub owner: Owner,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub attrs: ChunkAttrs,
    /// Entries naming this inode (always 1 for a directory).
    pub links: u32,
    /// Copies of each chunk kept (of a directory: what new entries in it
    /// inherit); 0: the pool's replication, whatever it is.
    pub replicas: u8,
    /// Where a writer puts its chunks (of a directory: what new entries inherit).
    pub placement: Placement,
    /// Of a file beneath an attachment: the under-store object it mirrors.
    pub origin: Option<crate::Origin>,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    File {
        size: u64,
        chunk_size: u64,
        chunks: Vec<ChunkRef>,
    },
    Dir {
        parent: InodeId,
        name: String,
        children: BTreeMap<String, InodeId>,
    },
    Region {
        size: u64,
        chunk_size: u64,
    },
    Symlink {
        target: String,
    },
    /// A named pipe, socket or device node (`kind` says which).
    Special {
        kind: InodeKind,
        rdev: u64,
    },
}

impl Inode {
    pub(super) fn root(now: Timestamp) -> Inode {
        Inode::new(
            ROOT_MODE,
            Owner::default(),
            now,
            Body::Dir { parent: InodeId::ROOT, name: String::new(), children: BTreeMap::new() },
        )
    }

    /// An inode with one name, all times `now` and default attributes.
    pub(super) fn new(mode: u32, owner: Owner, now: Timestamp, body: Body) -> Inode {
        Inode {
            mode: mode & MODE_MASK,
            owner,
            atime: now,
            mtime: now,
            ctime: now,
            attrs: ChunkAttrs::default(),
            links: 1,
            replicas: 0,
            placement: Placement::Hash,
            origin: None,
            body,
        }
    }

    pub(super) fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir { .. })
    }

    /// Whether the inode has chunks on the workers (a file or a region).
    pub(super) fn has_data(&self) -> bool {
        matches!(self.body, Body::File { .. } | Body::Region { .. })
    }

    pub(super) fn children(&self) -> Option<&BTreeMap<String, InodeId>> {
        match &self.body {
            Body::Dir { children, .. } => Some(children),
            _ => None,
        }
    }

    pub(super) fn children_mut(&mut self) -> Option<&mut BTreeMap<String, InodeId>> {
        match &mut self.body {
            Body::Dir { children, .. } => Some(children),
            _ => None,
        }
    }

    /// The directory holding a directory (itself for the root).
    pub(super) fn dir_parent(&self) -> Option<InodeId> {
        match &self.body {
            Body::Dir { parent, .. } => Some(*parent),
            _ => None,
        }
    }

    pub(super) fn kind(&self) -> InodeKind {
        match &self.body {
            Body::File { .. } => InodeKind::File,
            Body::Dir { .. } => InodeKind::Dir,
            Body::Region { .. } => InodeKind::Region,
            Body::Symlink { .. } => InodeKind::Symlink,
            Body::Special { kind, .. } => *kind,
        }
    }
}

impl MetaState {
    /// How `stat` shows a live inode, with the chunk list of a file.
    pub(super) fn info(&self, id: InodeId) -> InodeInfo {
        self.info_with(id, true)
    }

    /// How `stat` shows a live inode; a file's chunk list only `with_chunks`.
    pub(super) fn info_with(&self, id: InodeId, with_chunks: bool) -> InodeInfo {
        self.info_of(id, self.node(id), with_chunks.then(|| self.inline_of(id)), with_chunks)
    }

    /// How `stat` shows inode `id` as `n` (live or as it was before), its
    /// inline bytes being `inline` (only looked at `with_chunks`).
    pub(super) fn info_of(
        &self,
        id: InodeId,
        n: &Inode,
        inline: Option<Option<&Bytes>>,
        with_chunks: bool,
    ) -> InodeInfo {
        let mut info = InodeInfo {
            id,
            kind: n.kind(),
            size: 0,
            chunk_size: 0,
            mode: n.mode,
            uid: n.owner.uid,
            gid: n.owner.gid,
            nlink: n.links,
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            attrs: n.attrs,
            replicas: self.copies(id),
            placement: n.placement,
            chunks: Vec::new(),
            target: String::new(),
            rdev: 0,
            origin: n.origin.clone(),
            inline: None,
            restoring: None,
        };
        match &n.body {
            Body::File { size, chunk_size, chunks } => {
                (info.size, info.chunk_size) = (*size, *chunk_size);
                if with_chunks {
                    info.chunks = chunks.clone();
                    info.inline = inline.flatten().cloned();
                }
            }
            Body::Region { size, chunk_size } => {
                (info.size, info.chunk_size) = (*size, *chunk_size);
                info.restoring = self.snapshots.restoring.get(&id).map(|(_, name)| name.clone());
            }
            Body::Dir { children, .. } => {
                // A live directory's count is kept; of a directory as it was,
                // counted (a child may be gone since: not counted).
                let subdirs = match self.inodes.get(&id).is_some_and(|live| std::ptr::eq(live, n)) {
                    true => self.subdirs_of(id),
                    false => {
                        let dirs = children.values().filter(|c| self.inodes.get(c).is_some_and(Inode::is_dir));
                        u32::try_from(dirs.count()).unwrap_or(u32::MAX)
                    }
                };
                info.nlink = subdirs.saturating_add(2);
                info.size = children.len() as u64;
            }
            Body::Symlink { target } => {
                info.size = target.len() as u64;
                info.target = target.clone();
            }
            Body::Special { rdev, .. } => info.rdev = *rdev,
        }
        info
    }
}
