//! `Mkdir`, `CommitFile` and `CommitRegion`: the ops that add entries to the namespace.
//!
//! New directories take ids from `next_inode`; a committed file brings its own
//! id, which must have been reserved by `AllocInodes` and be neither live nor
//! awaiting garbage collection. Both set the new inode's times and the times of
//! the directory that gains the entry to `now`.

use super::inode::{Body, Inode, MODE_MASK};
use super::resolve::path_error;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp};
use tierpool_types::{validate_chunk_size, Checksum, ChunkAttrs, Error, ErrorKind, InodeId, Result};

/// The file half of a `CommitFile` op.
pub(super) struct NewFile<'a> {
    pub(super) inode: InodeId,
    pub(super) size: u64,
    pub(super) chunk_size: u64,
    pub(super) checksums: &'a [Checksum],
    pub(super) attrs: ChunkAttrs,
    pub(super) mode: u32,
    /// A region (no checksums) rather than a file.
    pub(super) region: bool,
}

impl MetaState {
    pub(super) fn mkdir(&mut self, comps: &[String], parents: bool, mode: u32, now: Timestamp) -> Result<MetaReply> {
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
        if self.next_inode.checked_add(missing.len() as u64).is_none() {
            return Err(Error::invalid("inode ids are exhausted"));
        }
        self.touch(cur, now);
        for name in missing {
            let id = InodeId(self.next_inode);
            self.next_inode += 1;
            self.inodes.insert(id, Inode::dir(cur, name.clone(), mode, now));
            self.link(cur, name, id);
            cur = id;
        }
        Ok(MetaReply::Done)
    }

    pub(super) fn commit_file(
        &mut self,
        comps: &[String],
        file: &NewFile<'_>,
        overwrite: bool,
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
        self.check_reserved(file.inode)?;
        if comps.is_empty() {
            return Err(path_error(ErrorKind::IsADirectory, comps));
        }
        let parent = self.parent_dir(comps)?;
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
        // Validated: mutate.
        if let Some(old) = old {
            self.unlink(parent, name);
            self.drop_subtree(old);
        }
        let inode = Inode {
            parent,
            name: name.clone(),
            mode: file.mode & MODE_MASK,
            mtime: now,
            ctime: now,
            attrs: file.attrs,
            body: if file.region {
                Body::Region { size: file.size, chunk_size: file.chunk_size }
            } else {
                Body::File { size: file.size, chunk_size: file.chunk_size, checksums: file.checksums.to_vec() }
            },
        };
        self.inodes.insert(file.inode, inode);
        self.link(parent, name, file.inode);
        self.touch(parent, now);
        Ok(MetaReply::Info(self.info(file.inode)))
    }

    /// A committed file's id must have been handed out by `AllocInodes` and
    /// must not name a live inode or one awaiting garbage collection.
    fn check_reserved(&self, id: InodeId) -> Result<()> {
        if id.0 == 0 || id.0 >= self.next_inode {
            return Err(Error::invalid(format!("inode {id} was never reserved")));
        }
        if self.inodes.contains_key(&id) || self.pending_gc.contains(&id) {
            return Err(Error::invalid(format!("inode {id} is already in use")));
        }
        Ok(())
    }
}
