//! `Remove` (by path) and `RemoveAt` (by directory inode): unlinks a name.
//!
//! The root cannot be removed. An inode whose last name goes is forgotten;
//! files and regions go to `pending_gc` (their chunks are still on the
//! workers); other kinds hold no chunks and just go.

use super::resolve::{entry_error, path_error};
use super::MetaState;
use crate::{MetaReply, Timestamp};
use tierpool_types::{Error, ErrorKind, InodeId, Result};

impl MetaState {
    pub(super) fn remove(&mut self, comps: &[String], recursive: bool, now: Timestamp) -> Result<MetaReply> {
        if comps.is_empty() {
            return Err(Error::invalid("cannot remove the root directory"));
        }
        let id = self.lookup(comps)?;
        if !recursive && self.children(id).is_some_and(|c| !c.is_empty()) {
            return Err(path_error(ErrorKind::DirectoryNotEmpty, comps));
        }
        let parent = self.parent_dir(comps)?;
        self.check_writable(parent, &crate::path::display(comps))?;
        if self.attachments.contains_key(&id) {
            return Err(Error::invalid(format!(
                "{}: an under-store is attached here: detach it",
                crate::path::display(comps)
            )));
        }
        Ok(self.remove_entry(parent, &comps[comps.len() - 1], now))
    }

    /// `rmdir` with `dir`, `unlink` without.
    pub(super) fn remove_at(&mut self, parent: InodeId, name: &str, dir: bool, now: Timestamp) -> Result<MetaReply> {
        let children = self.live(parent)?.children().ok_or_else(|| entry_error(ErrorKind::NotADirectory, name))?;
        let id = *children.get(name).ok_or_else(|| entry_error(ErrorKind::NotFound, name))?;
        match (dir, self.children(id)) {
            (true, None) => return Err(entry_error(ErrorKind::NotADirectory, name)),
            (false, Some(_)) => return Err(entry_error(ErrorKind::IsADirectory, name)),
            (true, Some(c)) if !c.is_empty() => return Err(entry_error(ErrorKind::DirectoryNotEmpty, name)),
            _ => {}
        }
        self.check_writable(parent, name)?;
        if self.attachments.contains_key(&id) {
            return Err(Error::invalid(format!("{name}: an under-store is attached here: detach it")));
        }
        Ok(self.remove_entry(parent, name, now))
    }

    /// Unlinks a validated entry; a surviving inode's `ctime` becomes `now`.
    fn remove_entry(&mut self, parent: InodeId, name: &str, now: Timestamp) -> MetaReply {
        let id = self.unlink(parent, name);
        self.touch(parent, now);
        let inodes = self.release(id);
        self.keep_before(id);
        if let Some(n) = self.inodes.get_mut(&id) {
            n.ctime = now;
        }
        MetaReply::Removed { inodes, gone: (inodes > 0).then_some(id) }
    }
}
