//! Files owed to their under-stores: the live files whose origin has
//! changes not below (`Origin::dirty`), kept as a set so that the pool's
//! upkeep learns what the write-back owes in proportion to that, not to
//! every file attached (an attachment may hold millions, all clean).
//!
//! Derived, like `subdirs`: never stored, never compared, rebuilt when a
//! state is loaded. Every inode an op is about to change passes the hook
//! `keep_before`, which notes it as touched; after each op the touched
//! inodes are looked at again (`settle_owed`), so nothing that makes a file
//! dirty or clean, removes it or puts it back escapes the set.
//!
//! Invariant (checked by `check_invariants`): every live file with a dirty
//! origin is in the set or touched since the last settling, and every
//! inode in the set and not touched is such a file.

use super::inode::Body;
use super::MetaState;
use crate::{Attachment, WriteMode};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, Default)]
pub(super) struct Owed {
    files: BTreeSet<InodeId>,
    touched: Vec<InodeId>,
}

impl PartialEq for Owed {
    fn eq(&self, _: &Owed) -> bool {
        true
    }
}

impl Eq for Owed {}

/// What one attachment's files owe its under-store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwedFigures {
    /// Files with changes not below, and their bytes.
    pub dirty_files: u64,
    pub dirty_bytes: u64,
    /// Of those, the ones in write-back mode (their own or the
    /// attachment's): what the background write-back owes.
    pub write_back_files: u64,
    pub write_back_bytes: u64,
}

impl MetaState {
    /// Whether live inode `id` is a file with changes not below, and its size.
    fn owing(&self, id: InodeId) -> Option<u64> {
        let n = self.inodes.get(&id)?;
        match (&n.body, &n.origin) {
            (Body::File { size, .. }, Some(o)) if o.dirty => Some(*size),
            _ => None,
        }
    }

    /// Inode `id` is about to change.
    pub(super) fn touch_owed(&mut self, id: InodeId) {
        self.owed.touched.push(id);
    }

    /// Looks again at the inodes touched since the last call.
    pub(super) fn settle_owed(&mut self) {
        for id in std::mem::take(&mut self.owed.touched) {
            match self.owing(id) {
                Some(_) => self.owed.files.insert(id),
                None => self.owed.files.remove(&id),
            };
        }
    }

    /// Builds the set from every inode (a state just loaded).
    pub(super) fn rebuild_owed(&mut self) {
        let files = self.inodes.keys().copied().filter(|id| self.owing(*id).is_some()).collect();
        self.owed = Owed { files, touched: Vec::new() };
    }

    /// Every attachment, by path, with what its files owe its under-store
    /// (a file counts with the attachment its origin names): a walk of the
    /// owed files only (and of those touched since the last settling).
    pub fn owed_figures(&self) -> Vec<(String, Attachment, OwedFigures)> {
        let mut by: BTreeMap<InodeId, OwedFigures> =
            self.attachments.keys().map(|a| (*a, Default::default())).collect();
        let touched: BTreeSet<InodeId> = self.owed.touched.iter().copied().collect();
        for id in self.owed.files.union(&touched) {
            let (Some(size), Some(o)) = (self.owing(*id), self.inodes[id].origin.as_ref()) else { continue };
            let (Some(f), Some(a)) = (by.get_mut(&o.attach), self.attachments.get(&o.attach)) else { continue };
            f.dirty_files += 1;
            f.dirty_bytes += size;
            if o.mode_in(a) == WriteMode::Back {
                f.write_back_files += 1;
                f.write_back_bytes += size;
            }
        }
        (by.into_iter()).map(|(a, f)| (self.dir_path(a), self.attachments[&a].clone(), f)).collect()
    }

    pub(super) fn check_owed(&self) -> Result<()> {
        let touched: BTreeSet<InodeId> = self.owed.touched.iter().copied().collect();
        for id in self.inodes.keys() {
            if self.owing(*id).is_some() && !self.owed.files.contains(id) && !touched.contains(id) {
                return super::check::fail(format!("file {id} has changes not below but is not among the owed"));
            }
        }
        for id in self.owed.files.difference(&touched) {
            if self.owing(*id).is_none() {
                return super::check::fail(format!("inode {id} is among the owed but owes nothing"));
            }
        }
        Ok(())
    }
}
