//! `Remove`: unlinks a file or a directory tree.
//!
//! The root cannot be removed. Removed file inodes go to `pending_gc` (their
//! chunks are still on the workers); directories hold no chunks and just go.

use super::resolve::path_error;
use super::MetaState;
use crate::{MetaReply, Timestamp};
use tierpool_types::{Error, ErrorKind, Result};

impl MetaState {
    pub(super) fn remove(&mut self, comps: &[String], recursive: bool, now: Timestamp) -> Result<MetaReply> {
        if comps.is_empty() {
            return Err(Error::invalid("cannot remove the root directory"));
        }
        let id = self.lookup(comps)?;
        if !recursive && self.children(id).is_some_and(|c| !c.is_empty()) {
            return Err(path_error(ErrorKind::DirectoryNotEmpty, comps));
        }
        let parent = self.node(id).parent;
        self.unlink(parent, &comps[comps.len() - 1]);
        self.touch(parent, now);
        let inodes = self.drop_subtree(id);
        Ok(MetaReply::Removed { inodes })
    }
}
