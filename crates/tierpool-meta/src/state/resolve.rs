//! Path resolution and the small namespace edits every op is built from.
//!
//! Resolution never mutates. Errors name the whole normalised path the user
//! gave, with one of the fixed reasons of [`path_error`]. The editing helpers
//! assume their arguments were validated: they are called only after an op has
//! passed every check, and a broken assumption there is a bug (they panic).

use super::inode::{Body, Inode};
use super::MetaState;
use crate::path::display;
use crate::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_types::{ChunkKey, Error, ErrorKind, InodeId};

/// The fixed reason of a namespace error kind, as messages show it.
fn reason(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "no such file or directory",
        ErrorKind::AlreadyExists => "file exists",
        ErrorKind::NotADirectory => "not a directory",
        ErrorKind::IsADirectory => "is a directory",
        ErrorKind::DirectoryNotEmpty => "directory not empty",
        _ => "invalid argument",
    }
}

/// `"{path}: {reason}"` with the fixed reason of a namespace error kind.
pub(super) fn path_error(kind: ErrorKind, comps: &[String]) -> Error {
    Error::new(kind, format!("{}: {}", display(comps), reason(kind)))
}

/// `"{name}: {reason}"` for an op that names a directory entry directly.
pub(super) fn entry_error(kind: ErrorKind, name: &str) -> Error {
    Error::new(kind, format!("{name}: {}", reason(kind)))
}

impl MetaState {
    /// The live inode `id`, or `NotFound` (it was removed, or never existed).
    pub(super) fn live(&self, id: InodeId) -> Result<&Inode, Error> {
        self.inodes.get(&id).ok_or_else(|| Error::inode_gone(id))
    }

    pub(super) fn node(&self, id: InodeId) -> &Inode {
        self.inodes.get(&id).unwrap_or_else(|| panic!("inode {id} is referenced but not live"))
    }

    pub(super) fn node_mut(&mut self, id: InodeId) -> &mut Inode {
        self.keep_before(id);
        self.inodes.get_mut(&id).unwrap_or_else(|| panic!("inode {id} is referenced but not live"))
    }

    pub(super) fn is_dir(&self, id: InodeId) -> bool {
        self.node(id).is_dir()
    }

    /// Entries of `id`, or `None` for a file.
    pub(super) fn children(&self, id: InodeId) -> Option<&BTreeMap<String, InodeId>> {
        self.node(id).children()
    }

    /// Resolves the first `upto` components of `comps`: `NotADirectory` when a
    /// file is met on the way, `NotFound` when an entry is missing.
    fn walk(&self, comps: &[String], upto: usize) -> Result<InodeId, Error> {
        let mut cur = InodeId::ROOT;
        for name in &comps[..upto] {
            let children = self.children(cur).ok_or_else(|| path_error(ErrorKind::NotADirectory, comps))?;
            cur = *children.get(name).ok_or_else(|| path_error(ErrorKind::NotFound, comps))?;
        }
        Ok(cur)
    }

    /// The inode at `comps`.
    pub(super) fn lookup(&self, comps: &[String]) -> Result<InodeId, Error> {
        self.walk(comps, comps.len())
    }

    /// The directory that holds, or would hold, the last component of a
    /// non-root path.
    pub(super) fn parent_dir(&self, comps: &[String]) -> Result<InodeId, Error> {
        let parent = self.walk(comps, comps.len() - 1)?;
        if self.is_dir(parent) {
            Ok(parent)
        } else {
            Err(path_error(ErrorKind::NotADirectory, comps))
        }
    }

    /// The entry `name` of directory `dir`, if any.
    pub(super) fn child(&self, dir: InodeId, name: &str) -> Option<InodeId> {
        self.children(dir).and_then(|c| c.get(name).copied())
    }

    /// Sets a directory's mtime and ctime: one of its entries changed.
    pub(super) fn touch(&mut self, dir: InodeId, now: Timestamp) {
        let n = self.node_mut(dir);
        n.mtime = now;
        n.ctime = now;
    }

    /// Adds entry `name -> id` to `dir`; a directory also points back at it
    /// (and counts as one more subdirectory of `dir`). Link counts of
    /// files are the caller's.
    pub(super) fn link(&mut self, dir: InodeId, name: &str, id: InodeId) {
        self.note_entry(dir, name);
        let children = self.node_mut(dir).children_mut().expect("link into a directory");
        let old = children.insert(name.to_owned(), id);
        debug_assert!(old.is_none(), "link over an existing entry {name}");
        if let Body::Dir { parent, name: own, .. } = &mut self.node_mut(id).body {
            *parent = dir;
            *own = name.to_owned();
            *self.subdirs.0.entry(dir).or_default() += 1;
        }
    }

    /// Removes entry `name` from `dir`, returning the inode it named.
    pub(super) fn unlink(&mut self, dir: InodeId, name: &str) -> InodeId {
        self.note_entry(dir, name);
        let children = self.node_mut(dir).children_mut().expect("unlink from a directory");
        let id = children.remove(name).expect("unlink of an existing entry");
        if self.is_dir(id) {
            if let Some(n) = self.subdirs.0.get_mut(&dir) {
                *n -= 1;
                if *n == 0 {
                    self.subdirs.0.remove(&dir);
                }
            }
        }
        id
    }

    /// Subdirectories of the live directory `dir`, counted (an entry naming
    /// no live inode, as a corrupt state could, counts as none).
    pub(super) fn count_subdirs(&self, dir: InodeId) -> u32 {
        let children = self.inodes.get(&dir).and_then(Inode::children).into_iter().flat_map(|c| c.values());
        children.filter(|c| self.inodes.get(c).is_some_and(Inode::is_dir)).count() as u32
    }

    /// Subdirectories of the live directory `dir`, as kept.
    pub(super) fn subdirs_of(&self, dir: InodeId) -> u32 {
        self.subdirs.0.get(&dir).copied().unwrap_or(0)
    }

    /// Counts the subdirectories of `dirs` again (inodes put back whole,
    /// or taken out: those are forgotten).
    pub(super) fn recount_subdirs(&mut self, dirs: impl IntoIterator<Item = InodeId>) {
        for d in dirs {
            match self.inodes.get(&d).is_some_and(Inode::is_dir) {
                true => match self.count_subdirs(d) {
                    0 => self.subdirs.0.remove(&d),
                    n => self.subdirs.0.insert(d, n),
                },
                false => self.subdirs.0.remove(&d),
            };
        }
    }

    /// `id` and every inode beneath it, parents before children.
    pub(super) fn subtree(&self, id: InodeId) -> Vec<InodeId> {
        let mut out = vec![id];
        let mut i = 0;
        while i < out.len() {
            if let Some(children) = self.children(out[i]) {
                out.extend(children.values().copied());
            }
            i += 1;
        }
        out
    }

    /// Whether directory `dir` is `ancestor` or lies beneath it.
    pub(super) fn is_within(&self, mut dir: InodeId, ancestor: InodeId) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            match self.node(dir).dir_parent() {
                Some(p) if p != dir => dir = p,
                _ => return false,
            }
        }
    }

    /// An entry naming `id` was just unlinked: a directory goes with
    /// everything beneath it; another inode loses one link and goes with
    /// its last. Gone files and regions are queued for garbage collection
    /// (but for the chunk versions snapshots keep). Returns how many inodes went.
    pub(super) fn release(&mut self, id: InodeId) -> u64 {
        let mut gone = 0;
        self.release_with(id, &BTreeSet::new(), &mut |_, _| gone += 1);
        gone
    }

    /// `release`, but the inodes in `spare` are taken out whole and handed
    /// back, not collected (their ids are about to be used again).
    pub(super) fn release_sparing(&mut self, id: InodeId, spare: &BTreeSet<InodeId>) -> BTreeMap<InodeId, Inode> {
        let mut spared = BTreeMap::new();
        self.release_with(id, spare, &mut |i, n| {
            if let Some(n) = n {
                spared.insert(i, n);
            }
        });
        spared
    }

    /// Calls `gone(id, Some(inode))` for each spared inode taken out,
    /// `gone(id, None)` for each other inode that went.
    fn release_with(&mut self, id: InodeId, spare: &BTreeSet<InodeId>, gone: &mut dyn FnMut(InodeId, Option<Inode>)) {
        let mut stack = vec![id];
        while let Some(i) = stack.pop() {
            if spare.contains(&i) {
                self.keep_before(i);
                if let Some(n) = self.inodes.remove(&i) {
                    self.subdirs.0.remove(&i);
                    self.inline.remove(i);
                    gone(i, Some(n));
                }
                continue;
            }
            let n = self.node_mut(i);
            if !n.is_dir() && n.links > 1 {
                n.links -= 1;
                continue;
            }
            let n = self.inodes.remove(&i).expect("released inodes are live");
            self.subdirs.0.remove(&i);
            self.inline.remove(i);
            self.attachments.remove(&i);
            gone(i, None);
            self.snapshots.restoring.remove(&i);
            if n.has_data() && self.snapshots.keeps_inode(i) {
                // Snapshots keep some versions: the others go one by one.
                match &n.body {
                    Body::File { chunks, .. } => {
                        for (x, r) in chunks.iter().enumerate().filter(|(_, r)| r.is_stored()) {
                            self.discard(r.key(i, x as u64));
                        }
                    }
                    Body::Region { size, chunk_size } => {
                        for x in 0..size.div_ceil((*chunk_size).max(1)) {
                            self.discard(ChunkKey::hashed(i, x, 1));
                        }
                    }
                    _ => {}
                }
            } else if n.has_data() {
                // An empty file stores nothing: no space comes back from it.
                let stores = match &n.body {
                    Body::File { chunks, .. } => chunks.iter().any(|c| c.is_stored()),
                    _ => true,
                };
                self.collect_inode(i, stores);
            }
            if let Body::Dir { children, .. } = n.body {
                for name in children.keys() {
                    self.note_entry(i, name);
                }
                stack.extend(children.into_values());
            }
        }
    }
}
