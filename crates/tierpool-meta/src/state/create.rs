//! The ops that add entries to the namespace: `Mkdir`, `CommitFile`,
//! `CommitRegion` (by path) and `MakeAt`, `MakeFileAt`, `LinkAt` (by
//! directory inode).
//!
//! New directories, empty files, symlinks and special files take ids from
//! `next_inode`; a committed file or region, or a file of `MakeFileAt`,
//! brings its own id, which must
//! have been reserved by `AllocInodes` and be neither live nor awaiting garbage
//! collection. All set the new inode's times and the times of the directory
//! that gains the entry to `now`. A new inode belongs to the op's owner,
//! except that in a set-group-id directory it takes the directory's group
//! (and a new directory inherits the bit), as BSD and Linux do.

use super::inode::{Body, Inode, Owner, MODE_MASK, SET_GID};
use super::resolve::{entry_error, path_error};
use super::MetaState;
use crate::path::{check_name, display};
use crate::{InodeKind, MetaReply, NewNode, Timestamp};
use std::collections::BTreeMap;
use tierpool_types::{validate_chunk_size, Checksum, ChunkAttrs, ChunkRef, Error, ErrorKind, InodeId, Result};

/// The file half of a `CommitFile` op.
pub(super) struct NewFile<'a> {
    pub(super) inode: InodeId,
    pub(super) size: u64,
    pub(super) chunk_size: u64,
    pub(super) checksums: &'a [Checksum],
    /// Empty, or the home partition of each chunk.
    pub(super) homes: &'a [Option<u32>],
    pub(super) attrs: ChunkAttrs,
    pub(super) mode: u32,
    /// A region (no checksums) rather than a file.
    pub(super) region: bool,
}

impl MetaState {
    pub(super) fn mkdir(
        &mut self,
        comps: &[String],
        parents: bool,
        mode: u32,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        // Walk down the existing part of the path.
        let mut cur = InodeId::ROOT;
        let mut depth = 0;
        while depth < comps.len() {
            let children = self.children(cur).ok_or_else(|| path_error(ErrorKind::NotADirectory, comps))?;
            match children.get(&comps[depth]) {
                Some(c) => cur = *c,
                None => break,
            }
            depth += 1;
        }
        if depth == comps.len() {
            return if parents && self.is_dir(cur) {
                Ok(MetaReply::Done)
            } else {
                Err(path_error(ErrorKind::AlreadyExists, comps))
            };
        }
        let missing = &comps[depth..];
        if !parents && missing.len() > 1 {
            return Err(path_error(ErrorKind::NotFound, comps));
        }
        self.check_writable(cur, &display(comps))?;
        if self.next_inode.checked_add(missing.len() as u64).is_none() {
            return Err(Error::invalid("inode ids are exhausted"));
        }
        for name in missing {
            let id = InodeId(self.next_inode);
            self.next_inode += 1;
            self.add_entry(cur, name, id, Inode::new(mode, owner, now, empty_dir()), now);
            cur = id;
        }
        Ok(MetaReply::Done)
    }

    pub(super) fn commit_file(
        &mut self,
        comps: &[String],
        file: &NewFile<'_>,
        overwrite: bool,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        validate_chunk_size(file.chunk_size).map_err(|e| e.context(display(comps)))?;
        let chunks = if file.region { 0 } else { file.size.div_ceil(file.chunk_size) };
        if file.checksums.len() as u64 != chunks {
            return Err(Error::invalid(format!(
                "{}: {} checksums given for {chunks} chunks",
                display(comps),
                file.checksums.len()
            )));
        }
        if !file.homes.is_empty() && file.homes.len() != file.checksums.len() {
            return Err(Error::invalid(format!(
                "{}: {} home partitions given for {chunks} chunks",
                display(comps),
                file.homes.len()
            )));
        }
        self.check_homes(file.homes.iter().copied()).map_err(|e| e.context(display(comps)))?;
        self.check_reserved(file.inode)?;
        if comps.is_empty() {
            return Err(path_error(ErrorKind::IsADirectory, comps));
        }
        let parent = self.parent_dir(comps)?;
        self.check_writable(parent, &display(comps))?;
        let name = &comps[comps.len() - 1];
        let old = self.child(parent, name);
        if let Some(old) = old {
            if self.is_dir(old) {
                return Err(path_error(ErrorKind::IsADirectory, comps));
            }
            if !overwrite {
                return Err(path_error(ErrorKind::AlreadyExists, comps));
            }
        }
        // Validated: mutate. A file replaced beneath an attachment hands
        // its own write mode to the new one.
        let kept_mode = old.and_then(|o| self.node(o).origin.as_ref().and_then(|g| g.mode));
        if let Some(old) = old {
            self.unlink(parent, name);
            self.release(old);
        }
        let body = if file.region {
            Body::Region { size: file.size, chunk_size: file.chunk_size }
        } else {
            let refs = (file.checksums.iter().enumerate())
                .map(|(i, c)| {
                    let len = (file.size - i as u64 * file.chunk_size).min(file.chunk_size);
                    ChunkRef { version: 1, len, checksum: *c, home: file.homes.get(i).copied().flatten() }
                })
                .collect();
            Body::File { size: file.size, chunk_size: file.chunk_size, chunks: refs }
        };
        let mut inode = Inode::new(file.mode, owner, now, body);
        inode.attrs = file.attrs;
        self.add_entry(parent, name, file.inode, inode, now);
        if let Some(o) = self.node_mut(file.inode).origin.as_mut() {
            o.mode = kept_mode;
        }
        Ok(MetaReply::Info(self.info(file.inode)))
    }

    pub(super) fn make_at(
        &mut self,
        parent: InodeId,
        name: &str,
        node: &NewNode,
        mode: u32,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        check_name(name)?;
        self.free_entry(parent, name)?;
        let body = match node {
            NewNode::File { chunk_size } => {
                validate_chunk_size(*chunk_size).map_err(|e| e.context(name))?;
                Body::File { size: 0, chunk_size: *chunk_size, chunks: Vec::new() }
            }
            NewNode::Dir => empty_dir(),
            NewNode::Symlink { target } => {
                if target.is_empty() || target.len() > 4095 || target.contains('\0') {
                    return Err(Error::invalid(format!("{name}: a symlink target must have 1 to 4095 bytes, no NUL")));
                }
                Body::Symlink { target: target.clone() }
            }
            NewNode::Special { kind, rdev } => {
                if !kind.is_special() {
                    return Err(Error::invalid(format!("{name}: {kind:?} is not a special file kind")));
                }
                let rdev = if matches!(kind, InodeKind::CharDevice | InodeKind::BlockDevice) { *rdev } else { 0 };
                Body::Special { kind: *kind, rdev }
            }
        };
        if self.next_inode == u64::MAX {
            return Err(Error::invalid("inode ids are exhausted"));
        }
        let id = InodeId(self.next_inode);
        self.next_inode += 1;
        self.add_entry(parent, name, id, Inode::new(mode, owner, now, body), now);
        Ok(MetaReply::Info(self.info(id)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn make_file_at(
        &mut self,
        parent: InodeId,
        name: &str,
        id: InodeId,
        chunk_size: u64,
        mode: u32,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        check_name(name)?;
        validate_chunk_size(chunk_size).map_err(|e| e.context(name))?;
        self.check_reserved(id)?;
        self.free_entry(parent, name)?;
        let body = Body::File { size: 0, chunk_size, chunks: Vec::new() };
        self.add_entry(parent, name, id, Inode::new(mode, owner, now, body), now);
        Ok(MetaReply::Info(self.info(id)))
    }

    pub(super) fn link_at(&mut self, id: InodeId, parent: InodeId, name: &str, now: Timestamp) -> Result<MetaReply> {
        check_name(name)?;
        let n = self.live(id)?;
        if n.is_dir() {
            return Err(Error::new(ErrorKind::IsADirectory, format!("inode {id}: a directory cannot be linked")));
        }
        if n.links == u32::MAX {
            return Err(Error::invalid(format!("inode {id} has too many links")));
        }
        if n.origin.is_some() {
            return Err(Error::invalid(format!("{name}: a file of an attached under-store has one name only")));
        }
        self.free_entry(parent, name)?;
        // Validated: mutate.
        self.link(parent, name, id);
        self.touch(parent, now);
        let n = self.node_mut(id);
        n.links += 1;
        n.ctime = now;
        Ok(MetaReply::Info(self.info(id)))
    }

    /// Checks that `parent` is a live directory without an entry `name`.
    fn free_entry(&self, parent: InodeId, name: &str) -> Result<()> {
        let dir = self.live(parent)?;
        let children = dir.children().ok_or_else(|| entry_error(ErrorKind::NotADirectory, name))?;
        if children.contains_key(name) {
            return Err(entry_error(ErrorKind::AlreadyExists, name));
        }
        self.check_writable(parent, name)
    }

    /// Adds the new `inode` as entry `name` of `parent`, applying the
    /// directory's set-group-id rule, and touches the directory.
    pub(super) fn add_entry(&mut self, parent: InodeId, name: &str, id: InodeId, mut inode: Inode, now: Timestamp) {
        let dir = self.node(parent);
        if dir.mode & SET_GID != 0 {
            inode.owner.gid = dir.owner.gid;
            if inode.is_dir() {
                inode.mode |= SET_GID;
            }
        }
        inode.mode &= MODE_MASK;
        if inode.replicas == 0 {
            inode.replicas = dir.replicas;
        }
        inode.placement = dir.placement;
        let file = matches!(inode.body, Body::File { .. }) && inode.origin.is_none();
        self.keep_before(id);
        self.inodes.insert(id, inode);
        self.link(parent, name, id);
        self.touch(parent, now);
        if let Some(att) = self.attachment_of(parent).filter(|_| file) {
            let key = self.key_in(att, parent, name);
            self.note_origin(id, att, key);
        }
    }

    /// A committed file's id must have been handed out by `AllocInodes` and
    /// must not name a live inode, one awaiting garbage collection or a
    /// removed file whose chunks snapshots keep.
    pub(super) fn check_reserved(&self, id: InodeId) -> Result<()> {
        if id.0 == 0 || id.0 >= self.next_inode {
            return Err(Error::invalid(format!("inode {id} was never reserved")));
        }
        if self.inodes.contains_key(&id) || self.pending_gc.contains(&id) || self.snapshots.keeps_inode(id) {
            return Err(Error::invalid(format!("inode {id} is already in use")));
        }
        if self.retired.contains(&id.0) {
            return Err(retired_error(id.0));
        }
        Ok(())
    }
}

/// Why a writer whose reserved id was retired cannot publish.
pub(super) fn retired_error(id: u64) -> Error {
    Error::new(
        ErrorKind::Stale,
        format!("id {id} was given up: its writer stopped renewing its lease and what it stored was deleted; write it again"),
    )
}

fn empty_dir() -> Body {
    // `parent` and `name` are set when the directory is linked.
    Body::Dir { parent: InodeId::ROOT, name: String::new(), children: BTreeMap::new() }
}
