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
use crate::path::normalize;
use crate::{Attachment, InodeInfo, Origin, WriteMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// Whether inode `id` is a live file with changes not below: its size
    /// and origin (`None` also for an inode no longer live).
    fn owing(&self, id: InodeId) -> Option<(u64, &Origin)> {
        let n = self.inodes.get(&id)?;
        match (&n.body, &n.origin) {
            (Body::File { size, .. }, Some(o)) if o.dirty => Some((*size, o)),
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
            let Some((size, o)) = self.owing(*id) else { continue };
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

    /// The files at `path` or beneath it that owe their under-store, each
    /// with a path naming it there and as `stat` shows it, in inode order
    /// after `after`, at most `limit` (and whether more may follow): what a
    /// `sync` or a write-back round writes, found among the owed files,
    /// not by a walk of every file. A file is named by its key beneath
    /// its attachment (keys follow names where the attachment mirrors
    /// them); one that key does not name (a rename where names are not
    /// mirrored) by a walk beneath `path`, once per call.
    pub fn owed_under(
        &self,
        path: &str,
        after: Option<InodeId>,
        limit: usize,
    ) -> Result<(Vec<(String, InodeInfo)>, bool)> {
        self.ensure_initialised()?;
        let comps = normalize(path)?;
        let top = self.lookup(&comps)?;
        let top_path = format!("/{}", comps.join("/"));
        let beneath = |p: &str| comps.is_empty() || p == top_path || p.starts_with(&format!("{top_path}/"));
        let touched: BTreeSet<InodeId> = self.owed.touched.iter().copied().collect();
        let from = after.map_or(InodeId(0), |a| InodeId(a.0 + 1));
        let mut walked: Option<HashMap<InodeId, String>> = None;
        let mut out = Vec::new();
        // The owed files in order (a page costs its own length), with the
        // touched ones merged in (none, once every op has settled).
        let candidates: Box<dyn Iterator<Item = InodeId>> = match touched.is_empty() {
            true => Box::new(self.owed.files.range(from..).copied()),
            false => Box::new(
                (self.owed.files.range(from..).chain(touched.range(from..)).copied())
                    .collect::<BTreeSet<_>>()
                    .into_iter(),
            ),
        };
        for id in candidates {
            if out.len() == limit {
                return Ok((out, true));
            }
            let Some((_, o)) = self.owing(id) else { continue };
            let keyed = join(&self.dir_path(o.attach), &o.key);
            let named = normalize(&keyed).ok().and_then(|c| self.lookup(&c).ok()) == Some(id);
            let p = match named {
                true => keyed,
                false => match walked.get_or_insert_with(|| self.file_paths(top, &top_path)).get(&id) {
                    Some(p) => p.clone(),
                    None => continue,
                },
            };
            if beneath(&p) {
                out.push((p, self.info(id)));
            }
        }
        Ok((out, false))
    }

    /// A path of each file at `top` (named `top_path`) or beneath it.
    fn file_paths(&self, top: InodeId, top_path: &str) -> HashMap<InodeId, String> {
        let mut out = HashMap::new();
        let mut stack = vec![(top, top_path.to_string())];
        while let Some((id, p)) = stack.pop() {
            match self.children(id) {
                Some(children) => stack.extend(children.iter().map(|(n, c)| (*c, join(&p, n)))),
                None => {
                    out.entry(id).or_insert(p);
                }
            }
        }
        out
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

/// `name` beneath the directory of path `dir`.
fn join(dir: &str, name: &str) -> String {
    match dir {
        "/" => format!("/{name}"),
        _ => format!("{dir}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetaOp;

    #[test]
    fn an_inode_touched_and_gone_before_the_settling_is_passed_over() {
        let mut s = MetaState::new();
        s.execute(&MetaOp::Init { partitions: 1 }, 1).unwrap();
        // As if an op had changed, then removed, an inode not yet settled.
        s.touch_owed(InodeId(999));
        assert!(s.owed_figures().is_empty());
        assert_eq!(s.owed_under("/", None, 10).unwrap(), (vec![], false));
        s.check_invariants().unwrap();
        s.settle_owed();
        assert!(s.owed.files.is_empty() && s.owed.touched.is_empty());
    }
}
