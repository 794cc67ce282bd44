//! `Rename`: atomically moves an entry, with POSIX rules.
//!
//! - the source must exist; renaming a path onto itself succeeds and changes nothing;
//! - the root cannot be renamed and nothing can be renamed onto it;
//! - a directory cannot move into its own subtree;
//! - an existing target is replaced when it is a file under a file, or an empty
//!   directory under a directory; a non-empty directory target is
//!   `DirectoryNotEmpty`, a directory under a file `IsADirectory`, a file under a
//!   directory `NotADirectory`. A replaced file goes to `pending_gc`.
//!
//! Errors name the path that caused them.

use super::resolve::path_error;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp};
use tierpool_types::{Error, ErrorKind, InodeId, Result};

impl MetaState {
    pub(super) fn rename(&mut self, from: &[String], to: &[String], now: Timestamp) -> Result<MetaReply> {
        if from.is_empty() {
            return Err(Error::invalid("cannot rename the root directory"));
        }
        if to.is_empty() {
            return Err(Error::invalid("cannot rename onto the root directory"));
        }
        let src = self.lookup(from)?;
        if from == to {
            return Ok(MetaReply::Done);
        }
        let src_is_dir = self.is_dir(src);
        if src_is_dir && to.starts_with(from) {
            return Err(Error::invalid(format!(
                "{}: cannot move directory {} into itself",
                display(to),
                display(from)
            )));
        }
        let dst_parent = self.parent_dir(to)?;
        let name = &to[to.len() - 1];
        let replaced = match self.child(dst_parent, name) {
            None => None,
            Some(dst) => Some(self.check_replace(src_is_dir, dst, to)?),
        };
        // Validated: mutate.
        let src_parent = self.node(src).parent;
        self.unlink(src_parent, &from[from.len() - 1]);
        self.touch(src_parent, now);
        if let Some(old) = replaced {
            self.unlink(dst_parent, name);
            self.drop_subtree(old);
        }
        self.link(dst_parent, name, src);
        self.touch(dst_parent, now);
        self.node_mut(src).ctime = now;
        Ok(MetaReply::Done)
    }

    /// Whether the source (a directory or not) may replace the existing `dst`
    /// at path `to`; returns `dst` when it may.
    fn check_replace(&self, src_is_dir: bool, dst: InodeId, to: &[String]) -> Result<InodeId> {
        let kind = match (src_is_dir, self.children(dst)) {
            (false, None) => return Ok(dst),
            (true, Some(c)) if c.is_empty() => return Ok(dst),
            (true, Some(_)) => ErrorKind::DirectoryNotEmpty,
            (false, Some(_)) => ErrorKind::IsADirectory,
            (true, None) => ErrorKind::NotADirectory,
        };
        Err(path_error(kind, to))
    }
}
