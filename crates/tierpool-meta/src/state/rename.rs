//! `Rename` (by path) and `RenameAt` (by directory inodes): atomically moves
//! an entry, with POSIX rules.
//!
//! - the source must exist; renaming an entry onto itself, or onto another
//!   name of the same inode, succeeds and changes nothing;
//! - the root cannot be renamed and nothing can be renamed onto it;
//! - a directory cannot move into its own subtree;
//! - an existing target is replaced when it is a non-directory under a
//!   non-directory, or an empty directory under a directory (unless
//!   `noreplace`: then it is `AlreadyExists`); a non-empty directory target is
//!   `DirectoryNotEmpty`, a directory under a non-directory `IsADirectory`, a
//!   non-directory under a directory `NotADirectory`. A replaced inode loses a
//!   name (see `release`).
//!
//! Errors name the path, or the entry name, that caused them.

use super::resolve::entry_error;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp};
use tierpool_types::{Error, ErrorKind, InodeId, Result};

/// One side of a rename: the directory, the entry name, and how errors name it.
pub(super) struct Side<'a> {
    pub(super) dir: InodeId,
    pub(super) name: &'a str,
    pub(super) shown: String,
}

impl MetaState {
    pub(super) fn rename(&mut self, from: &[String], to: &[String], now: Timestamp) -> Result<MetaReply> {
        if from.is_empty() {
            return Err(Error::invalid("cannot rename the root directory"));
        }
        if to.is_empty() {
            return Err(Error::invalid("cannot rename onto the root directory"));
        }
        let id = self.lookup(from)?;
        if from == to {
            return Ok(self.not_moved(id));
        }
        if self.is_dir(id) && to.starts_with(from) {
            return Err(Error::invalid(format!(
                "{}: cannot move directory {} into itself",
                display(to),
                display(from)
            )));
        }
        let src = Side { dir: self.parent_dir(from)?, name: &from[from.len() - 1], shown: display(from) };
        let dst = Side { dir: self.parent_dir(to)?, name: &to[to.len() - 1], shown: display(to) };
        self.rename_entry(&src, &dst, false, now)
    }

    pub(super) fn rename_at(
        &mut self,
        (parent, name): (InodeId, &str),
        (new_parent, new_name): (InodeId, &str),
        noreplace: bool,
        now: Timestamp,
    ) -> Result<MetaReply> {
        crate::path::check_name(new_name)?;
        for (dir, n) in [(parent, name), (new_parent, new_name)] {
            if self.live(dir)?.children().is_none() {
                return Err(entry_error(ErrorKind::NotADirectory, n));
            }
        }
        let src = Side { dir: parent, name, shown: name.to_owned() };
        let dst = Side { dir: new_parent, name: new_name, shown: new_name.to_owned() };
        self.rename_entry(&src, &dst, noreplace, now)
    }

    /// Moves entry `src` to `dst`; both directories are live.
    fn rename_entry(&mut self, src: &Side<'_>, dst: &Side<'_>, noreplace: bool, now: Timestamp) -> Result<MetaReply> {
        let id = self.child(src.dir, src.name).ok_or_else(|| entry_error(ErrorKind::NotFound, &src.shown))?;
        let target = self.child(dst.dir, dst.name);
        if target == Some(id) {
            return Ok(self.not_moved(id));
        }
        let src_is_dir = self.is_dir(id);
        if src_is_dir && self.is_within(dst.dir, id) {
            return Err(Error::invalid(format!("{}: cannot move directory {} into itself", dst.shown, src.shown)));
        }
        self.check_move(id, src.dir, dst.dir, &src.shown)?;
        let replaced = match target {
            None => None,
            Some(_) if noreplace => return Err(entry_error(ErrorKind::AlreadyExists, &dst.shown)),
            Some(t) => Some(self.check_replace(src_is_dir, t, &dst.shown)?),
        };
        // Validated: mutate.
        self.unlink(src.dir, src.name);
        self.touch(src.dir, now);
        let mut gone = None;
        if let Some(old) = replaced {
            self.unlink(dst.dir, dst.name);
            if self.release(old) > 0 {
                gone = Some(old);
            }
            self.keep_before(old);
            if let Some(n) = self.inodes.get_mut(&old) {
                n.ctime = now;
            }
        }
        self.link(dst.dir, dst.name, id);
        self.touch(dst.dir, now);
        self.node_mut(id).ctime = now;
        self.rekey(dst.dir, dst.name, id);
        Ok(MetaReply::Renamed { moved: id, ctime: now, gone })
    }

    /// The answer of a rename of `id` onto a name it already has.
    fn not_moved(&self, id: InodeId) -> MetaReply {
        MetaReply::Renamed { moved: id, ctime: self.node(id).ctime, gone: None }
    }

    /// Whether the source (a directory or not) may replace the existing `dst`,
    /// shown as `shown`; returns `dst` when it may.
    fn check_replace(&self, src_is_dir: bool, dst: InodeId, shown: &str) -> Result<InodeId> {
        let kind = match (src_is_dir, self.children(dst)) {
            (false, None) => return Ok(dst),
            (true, Some(c)) if c.is_empty() => return Ok(dst),
            (true, Some(_)) => ErrorKind::DirectoryNotEmpty,
            (false, Some(_)) => ErrorKind::IsADirectory,
            (true, None) => ErrorKind::NotADirectory,
        };
        Err(entry_error(kind, shown))
    }
}
