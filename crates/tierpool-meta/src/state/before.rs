//! What inodes were before the ops changed them, for readers that see the
//! pool as it was at an earlier moment (transactions, see
//! `engine::transactions`).
//!
//! While watching is on, the first time an op is about to change, create
//! or remove an inode (or its inline bytes), the state notes the inode as
//! it was, with its inline bytes ([`Image`]); the engine takes the notes
//! after every op. A note says what just happened, not what the state is:
//! two states compare equal whatever their notes hold, and nothing of it
//! is stored. An op that fails leaves notes of inodes it did not change,
//! images equal to the live inodes: harmless to a reader of the past.
//! An inode the engine already keeps an image of that every open
//! transaction sees is not noted again until another transaction begins
//! (`noted_enough`, `note_again`).
//!
//! A view of the past is the live state seen through images: an inode the
//! view has an image of is that image (absent if the image says it did not
//! exist), every other inode is live. [`MetaState::stat_in`] resolves a
//! path in such a view.

use super::inode::{Body, Inode};
use super::resolve::path_error;
use super::MetaState;
use crate::path::normalize;
use crate::InodeInfo;
use bytes::Bytes;
use std::collections::{BTreeMap, HashSet};
use tierpool_types::{ChunkRef, Error, ErrorKind, InodeId, Result};

/// An inode as it was at some moment: absent, or its record and inline bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub(super) inode: Option<Inode>,
    pub(super) inline: Option<Bytes>,
}

/// A file as a view sees it: the size and chunk list a write is checked
/// against; beneath an attachment, the tag of the object below (which its
/// chunks that are below hold the bytes of) and whether the file has
/// changes not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileShape {
    pub size: u64,
    pub chunks: Vec<ChunkRef>,
    pub below: Option<(String, bool)>,
}

impl Image {
    /// The file this image is, if it is one.
    pub fn file(&self) -> Option<FileShape> {
        match &self.inode.as_ref()?.body {
            Body::File { size, chunks, .. } => Some(FileShape {
                size: *size,
                chunks: chunks.clone(),
                below: self.inode.as_ref()?.origin.as_ref().map(|o| (o.etag.clone(), o.dirty)),
            }),
            _ => None,
        }
    }

    /// The size of the region this image is, if it is one.
    pub fn region_size(&self) -> Option<u64> {
        match &self.inode.as_ref()?.body {
            Body::Region { size, .. } => Some(*size),
            _ => None,
        }
    }
}

/// The notes taken since the engine last took them, and those of an op
/// that may have to be undone (see `undo`).
#[derive(Clone, Debug, Default)]
pub(super) struct Before {
    on: bool,
    images: BTreeMap<InodeId, Image>,
    /// Inodes the engine keeps an image of already that every open
    /// transaction sees (one taken since the newest began): not noted
    /// again until another begins, as the engine would drop the note. A
    /// directory's image is all its entries: noted at every op, a large
    /// directory made each op cost its size while a transaction was open.
    enough: HashSet<InodeId>,
    pub(super) undo: Option<BTreeMap<InodeId, Image>>,
    /// What went in and out of the garbage sets while `undo` is armed, in order.
    pub(super) undo_garbage: Vec<super::undo::Pended>,
}

impl PartialEq for Before {
    fn eq(&self, _: &Before) -> bool {
        true
    }
}

impl Eq for Before {}

impl MetaState {
    /// Turns the notes of changed inodes on or off (off drops any taken).
    pub fn watch(&mut self, on: bool) {
        self.before.on = on;
        if !on {
            self.before.images.clear();
            self.before.enough.clear();
        }
    }

    /// The engine keeps, of each of `ids`, an image every open transaction
    /// sees: they are not noted again until [`note_again`](Self::note_again).
    pub fn noted_enough(&mut self, ids: impl IntoIterator<Item = InodeId>) {
        if self.before.on {
            self.before.enough.extend(ids);
        }
    }

    /// A transaction began: every inode is noted again at its next change.
    pub fn note_again(&mut self) {
        self.before.enough.clear();
    }

    /// The inodes the ops run since the last call changed, as they were
    /// before the first of those ops changed each.
    pub fn take_before(&mut self) -> BTreeMap<InodeId, Image> {
        std::mem::take(&mut self.before.images)
    }

    /// Notes inode `id` as it is now, unless noted already since the notes
    /// were last taken: call before any change of it or of its inline bytes.
    pub(super) fn keep_before(&mut self, id: InodeId) {
        self.note_inode(id);
        self.touch_owed(id);
        let note = self.before.on && !self.before.images.contains_key(&id) && !self.before.enough.contains(&id);
        let undo = self.before.undo.as_ref().is_some_and(|u| !u.contains_key(&id));
        if !note && !undo {
            return;
        }
        let image = self.image(id);
        if let (true, Some(u)) = (undo, self.before.undo.as_mut()) {
            u.insert(id, image.clone());
        }
        if note {
            self.before.images.insert(id, image);
        }
    }

    /// The inode `id` as it is now.
    pub fn image(&self, id: InodeId) -> Image {
        Image { inode: self.inodes.get(&id).cloned(), inline: self.inline.files.get(&id).cloned() }
    }

    /// The inode at `path` in a view of the past, where `past(id)` is the
    /// image of an inode changed since (`None`: unchanged, as it is live).
    /// Paths through `.snapshots` are not seen in views.
    pub fn stat_in<'a>(&'a self, path: &str, past: &dyn Fn(InodeId) -> Option<&'a Image>) -> Result<InodeInfo> {
        self.ensure_initialised()?;
        let id = self.lookup_in(&normalize(path)?, past)?;
        let (n, inline) =
            self.seen(id, past).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("inode {id} is gone")))?;
        Ok(self.info_of(id, n, Some(inline), true))
    }

    /// The inode at `comps` in a view of the past (see [`MetaState::stat_in`]).
    pub fn lookup_in<'a>(&'a self, comps: &[String], past: &dyn Fn(InodeId) -> Option<&'a Image>) -> Result<InodeId> {
        let mut id = InodeId::ROOT;
        for (i, c) in comps.iter().enumerate() {
            let (dir, _) = self.seen(id, past).ok_or_else(|| path_error(ErrorKind::NotFound, &comps[..=i]))?;
            let Body::Dir { children, .. } = &dir.body else {
                return Err(path_error(ErrorKind::NotADirectory, &comps[..i]));
            };
            id = *children.get(c).ok_or_else(|| path_error(ErrorKind::NotFound, &comps[..=i]))?;
        }
        Ok(id)
    }

    /// Every entry beneath inode `id` in a view of the past, as (directory,
    /// name, inode), in a fixed order.
    pub fn tree_in<'a>(
        &'a self,
        id: InodeId,
        past: &dyn Fn(InodeId) -> Option<&'a Image>,
    ) -> Vec<(InodeId, &'a str, InodeId)> {
        let (mut out, mut stack) = (Vec::new(), vec![id]);
        while let Some(dir) = stack.pop() {
            let Some((Inode { body: Body::Dir { children, .. }, .. }, _)) = self.seen(dir, past) else { continue };
            for (name, child) in children {
                out.push((dir, name.as_str(), *child));
                stack.push(*child);
            }
        }
        out
    }

    /// Inode `id` and its inline bytes in a view of the past.
    fn seen<'a>(
        &'a self,
        id: InodeId,
        past: &dyn Fn(InodeId) -> Option<&'a Image>,
    ) -> Option<(&'a Inode, Option<&'a Bytes>)> {
        match past(id) {
            Some(img) => img.inode.as_ref().map(|n| (n, img.inline.as_ref())),
            None => self.inodes.get(&id).map(|n| (n, self.inline.files.get(&id))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{MetaOp, MetaState};

    fn mkdir(s: &mut MetaState, path: &str) {
        s.execute(&MetaOp::Mkdir { path: path.into(), parents: false, mode: 0o755 }, 2).unwrap();
    }

    #[test]
    fn an_inode_noted_enough_is_not_imaged_again_until_a_transaction_begins() {
        let mut s = MetaState::new();
        s.execute(&MetaOp::Init { partitions: 4 }, 1).unwrap();
        mkdir(&mut s, "/d");
        let d = s.stat("/d").unwrap().id;
        s.watch(true);
        mkdir(&mut s, "/d/a");
        let first = s.take_before();
        assert!(first.contains_key(&d), "{first:?}");
        s.noted_enough(first.keys().copied());
        mkdir(&mut s, "/d/b");
        let b = s.stat("/d/b").unwrap().id;
        assert_eq!(s.take_before().keys().copied().collect::<Vec<_>>(), vec![b], "the new directory only");
        s.note_again();
        mkdir(&mut s, "/d/c");
        assert!(s.take_before().contains_key(&d), "noted again once a transaction began");
        s.noted_enough([d]);
        s.watch(false);
        s.watch(true);
        mkdir(&mut s, "/d/e");
        assert!(s.take_before().contains_key(&d), "noted afresh once watched again");
    }
}
