//! `SetAttrs`: priority and pinning of a file, or of a whole directory tree;
//! `SetMeta`: permission bits and modification time of one inode;
//! `SetInode`: owner, permission bits and times of one inode by id.
//!
//! On a directory the new attributes apply to it and to every inode beneath
//! it (subdirectories included, so `stat` of any directory in the tree agrees
//! with its files). Every touched inode gets `ctime = now`. The reply lists each
//! touched file with its attributes, sorted by inode id, so the shell can push
//! them to the workers holding the chunks.

use super::inode::MODE_MASK;
use super::MetaState;
use crate::{MetaReply, Timestamp};
use tierpool_types::{InodeId, Priority, Result};

impl MetaState {
    pub(super) fn set_attrs(
        &mut self,
        comps: &[String],
        priority: Option<Priority>,
        pinned: Option<bool>,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let id = self.lookup(comps)?;
        Ok(self.set_attrs_of(id, priority, pinned, now))
    }

    /// Sets the attributes of live inode `id` and of everything beneath it.
    pub(super) fn set_attrs_of(
        &mut self,
        id: InodeId,
        priority: Option<Priority>,
        pinned: Option<bool>,
        now: Timestamp,
    ) -> MetaReply {
        let mut changed = Vec::new();
        for i in self.subtree(id) {
            let n = self.node_mut(i);
            if let Some(p) = priority {
                n.attrs.priority = p;
            }
            if let Some(p) = pinned {
                n.attrs.pinned = p;
            }
            n.ctime = now;
            if n.has_data() {
                changed.push((i, n.attrs));
            }
        }
        changed.sort_by_key(|(i, _)| *i);
        MetaReply::Attrs { changed }
    }

    pub(super) fn set_meta(
        &mut self,
        comps: &[String],
        mode: Option<u32>,
        mtime: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let id = self.lookup(comps)?;
        let n = self.node_mut(id);
        if let Some(m) = mode {
            n.mode = m & MODE_MASK;
        }
        if let Some(t) = mtime {
            n.mtime = t;
        }
        n.ctime = now;
        Ok(MetaReply::Info(self.info(id)))
    }

    pub(super) fn set_inode(&mut self, id: InodeId, change: &InodeChange, now: Timestamp) -> Result<MetaReply> {
        self.live(id)?;
        let n = self.node_mut(id);
        if let Some(m) = change.mode {
            n.mode = m & MODE_MASK;
        }
        if let Some(u) = change.uid {
            n.owner.uid = u;
        }
        if let Some(g) = change.gid {
            n.owner.gid = g;
        }
        if let Some(t) = change.atime {
            n.atime = t;
        }
        if let Some(t) = change.mtime {
            n.mtime = t;
        }
        n.ctime = now;
        Ok(MetaReply::Info(self.info(id)))
    }
}

/// The fields of a `SetInode` op.
pub(super) struct InodeChange {
    pub(super) mode: Option<u32>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) atime: Option<Timestamp>,
    pub(super) mtime: Option<Timestamp>,
}
