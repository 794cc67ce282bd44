//! Under-stores: `Attach`, `Detach`, `AdoptFile`, `Persisted`,
//! `LoadChunks`, `Unload`, and the rules other ops follow beneath an
//! attachment.
//!
//! Invariants kept (checked in `check.rs`):
//! - an attachment is a live directory, neither inside nor above another;
//! - a file with a chunk below has an origin, whose attachment exists;
//! - an origin's file is clean only while its bytes are the object's:
//!   `UpdateFile` marks it dirty, `Persisted` (naming the exact chunks
//!   written below and the key they were written to) and `AdoptFile` (of
//!   a clean file) make it clean;
//! - nothing beneath a read-only attachment is created, changed, renamed or
//!   removed (`ReadOnly`), and no rename crosses an attachment's boundary;
//! - within a `through` or `back` attachment a rename moves the objects
//!   below (the client does it first), so the keys of the files it moves
//!   follow; in a `pool-only` one the files keep reading the objects they
//!   came from.

use super::inode::{Body, Inode, Owner};
use super::resolve::{entry_error, path_error};
use super::MetaState;
use crate::path::{check_name, display};
use crate::{Attachment, MetaReply, Origin, Timestamp};
use tierpool_types::{validate_chunk_size, ChunkRef, Error, ErrorKind, InodeId, Result};

/// An under-store object as its store describes it.
pub(super) struct Object<'a> {
    pub(super) size: u64,
    pub(super) mtime: u64,
    pub(super) etag: &'a str,
}

impl MetaState {
    /// The attached directory holding directory `dir` (itself or an ancestor).
    pub(super) fn attachment_of(&self, dir: InodeId) -> Option<InodeId> {
        if self.attachments.is_empty() {
            return None;
        }
        let mut d = dir;
        loop {
            if self.attachments.contains_key(&d) {
                return Some(d);
            }
            match self.inodes.get(&d).and_then(|n| n.dir_parent()) {
                Some(p) if p != d => d = p,
                _ => return None,
            }
        }
    }

    /// The path of entry `name` of directory `dir` relative to the attached
    /// directory `att` above it.
    pub(super) fn key_in(&self, att: InodeId, dir: InodeId, name: &str) -> String {
        let mut parts = vec![name.to_string()];
        let mut d = dir;
        while d != att {
            let Body::Dir { parent, name, .. } = &self.node(d).body else { break };
            parts.push(name.clone());
            d = *parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// `ReadOnly` if directory `dir` is beneath a read-only attachment.
    pub(super) fn check_writable(&self, dir: InodeId, shown: &str) -> Result<()> {
        match self.attachment_of(dir).map(|a| &self.attachments[&a]) {
            Some(a) if a.readonly => Err(Error::new(
                ErrorKind::ReadOnly,
                format!("{shown}: is in the under-store {} attached read-only", a.uri),
            )),
            _ => Ok(()),
        }
    }

    /// Checks a move of entry `id` from directory `from` into directory `to`.
    pub(super) fn check_move(&self, id: InodeId, from: InodeId, to: InodeId, shown: &str) -> Result<()> {
        if self.attachments.is_empty() {
            return Ok(());
        }
        self.check_writable(from, shown)?;
        self.check_writable(to, shown)?;
        let (a, b) = (self.attachment_of(from), self.attachment_of(to));
        if a != b {
            return Err(Error::invalid(format!(
                "{shown}: cannot move across the boundary of an attached under-store; copy it instead"
            )));
        }
        if b.is_some() && self.subtree(id).iter().any(|i| self.attachments.contains_key(i)) {
            return Err(Error::invalid(format!("{shown}: an attached directory cannot move into another")));
        }
        Ok(())
    }

    /// After entry `name` of `dir` (inode `id`) moved within an attachment
    /// that mirrors names: the files it holds mirror objects under their new keys.
    pub(super) fn rekey(&mut self, dir: InodeId, name: &str, id: InodeId) {
        let Some(att) = self.attachment_of(dir) else { return };
        if !self.attachments[&att].mode.mirrors_names() {
            return;
        }
        let mut stack = vec![(self.key_in(att, dir, name), id)];
        while let Some((key, i)) = stack.pop() {
            if let Some(children) = self.children(i) {
                stack.extend(children.iter().map(|(n, c)| (format!("{key}/{n}"), *c)));
            } else if let Some(o) = self.node_mut(i).origin.as_mut() {
                o.key = key;
            }
        }
    }

    pub(super) fn attach(&mut self, comps: &[String], attachment: &Attachment) -> Result<MetaReply> {
        if comps.is_empty() {
            return Err(Error::invalid("an under-store cannot be attached at the root directory"));
        }
        if attachment.uri.is_empty() {
            return Err(Error::invalid(format!("{}: an attachment needs the under-store's URI", display(comps))));
        }
        let id = self.lookup(comps)?;
        let children = self.children(id).ok_or_else(|| path_error(ErrorKind::NotADirectory, comps))?;
        if let Some(a) = self.attachment_of(id) {
            let what =
                if a == id { "has an under-store attached already" } else { "is inside an attached under-store" };
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{}: {what}", display(comps))));
        }
        if !children.is_empty() {
            return Err(Error::new(
                ErrorKind::DirectoryNotEmpty,
                format!("{}: an under-store is attached at an empty directory", display(comps)),
            ));
        }
        self.attachments.insert(id, attachment.clone());
        Ok(MetaReply::Done)
    }

    pub(super) fn detach(&mut self, comps: &[String], now: Timestamp) -> Result<MetaReply> {
        let id = self.lookup(comps)?;
        if !self.attachments.contains_key(&id) {
            return Err(Error::invalid(format!("{}: no under-store is attached here", display(comps))));
        }
        let names: Vec<String> = self.children(id).into_iter().flatten().map(|(n, _)| n.clone()).collect();
        let mut inodes = 0;
        for name in names {
            let child = self.unlink(id, &name);
            inodes += self.release(child);
        }
        self.touch(id, now);
        self.attachments.remove(&id);
        Ok(MetaReply::Removed { inodes, gone: None })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn adopt_file(
        &mut self,
        parent: InodeId,
        name: &str,
        obj: &Object<'_>,
        chunk_size: u64,
        mode: u32,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        check_name(name)?;
        validate_chunk_size(chunk_size).map_err(|e| e.context(name))?;
        if self.live(parent)?.children().is_none() {
            return Err(entry_error(ErrorKind::NotADirectory, name));
        }
        let att = (self.attachment_of(parent))
            .ok_or_else(|| Error::invalid(format!("{name}: is not beneath an attached under-store")))?;
        let origin = Origin {
            attach: att,
            key: self.key_in(att, parent, name),
            size: obj.size,
            mtime: obj.mtime,
            etag: obj.etag.to_string(),
            dirty: false,
            mode: None,
        };
        let Some(id) = self.child(parent, name) else {
            if self.next_inode == u64::MAX {
                return Err(Error::invalid("inode ids are exhausted"));
            }
            let id = InodeId(self.next_inode);
            self.next_inode += 1;
            let chunks = vec![ChunkRef::BELOW; obj.size.div_ceil(chunk_size) as usize];
            let mut inode = Inode::new(mode, owner, now, Body::File { size: obj.size, chunk_size, chunks });
            inode.mtime = obj.mtime;
            inode.origin = Some(origin);
            self.add_entry(parent, name, id, inode, now);
            return Ok(MetaReply::Info(self.info(id)));
        };
        let n = self.node(id);
        let Body::File { chunk_size: cs, .. } = &n.body else {
            return Err(entry_error(ErrorKind::AlreadyExists, name));
        };
        let cs = *cs;
        match &n.origin {
            Some(o) if o.dirty => {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("{name}: changed in the pool and in the under-store; the pool's changes are not below yet"),
                ))
            }
            None => {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("{name}: made in the pool and not yet written to the under-store, which has another"),
                ))
            }
            Some(o) if o.same_object(obj.size, obj.mtime, obj.etag) => return Ok(MetaReply::Info(self.info(id))),
            Some(_) => {}
        }
        // A clean file whose object changed below: it mirrors the new one.
        let chunks = vec![ChunkRef::BELOW; obj.size.div_ceil(cs) as usize];
        self.drop_stored(id, chunks);
        let n = self.node_mut(id);
        if let Body::File { size, .. } = &mut n.body {
            *size = obj.size;
        }
        n.mtime = obj.mtime;
        n.ctime = now;
        // It keeps its own write mode.
        let mode = n.origin.as_ref().and_then(|o| o.mode);
        n.origin = Some(Origin { mode, ..origin });
        Ok(MetaReply::Info(self.info(id)))
    }

    pub(super) fn adopt_dir(
        &mut self,
        parent: InodeId,
        name: &str,
        mode: u32,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        check_name(name)?;
        if self.live(parent)?.children().is_none() {
            return Err(entry_error(ErrorKind::NotADirectory, name));
        }
        if self.attachment_of(parent).is_none() {
            return Err(Error::invalid(format!("{name}: is not beneath an attached under-store")));
        }
        if let Some(id) = self.child(parent, name) {
            return match self.is_dir(id) {
                true => Ok(MetaReply::Info(self.info(id))),
                false => Err(entry_error(ErrorKind::AlreadyExists, name)),
            };
        }
        if self.next_inode == u64::MAX {
            return Err(Error::invalid("inode ids are exhausted"));
        }
        let id = InodeId(self.next_inode);
        self.next_inode += 1;
        let dir = Body::Dir { parent, name: String::new(), children: Default::default() };
        self.add_entry(parent, name, id, Inode::new(mode, owner, now, dir), now);
        Ok(MetaReply::Info(self.info(id)))
    }

    pub(super) fn disown(&mut self, parent: InodeId, name: &str, now: Timestamp) -> Result<MetaReply> {
        if self.live(parent)?.children().is_none() {
            return Err(entry_error(ErrorKind::NotADirectory, name));
        }
        if self.attachment_of(parent).is_none() {
            return Err(Error::invalid(format!("{name}: is not beneath an attached under-store")));
        }
        let id = self.child(parent, name).ok_or_else(|| entry_error(ErrorKind::NotFound, name))?;
        let n = self.node(id);
        match (&n.body, &n.origin) {
            (Body::Dir { children, .. }, _) if !children.is_empty() => {
                return Err(entry_error(ErrorKind::DirectoryNotEmpty, name))
            }
            (Body::Dir { .. }, _) | (Body::File { .. }, Some(Origin { dirty: false, .. })) => {}
            (Body::File { .. }, _) => {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("{name}: has changes not yet in the under-store, which no longer has it"),
                ))
            }
            _ => return Err(Error::invalid(format!("{name}: is not a file or directory of the under-store"))),
        }
        let id = self.unlink(parent, name);
        self.touch(parent, now);
        let inodes = self.release(id);
        Ok(MetaReply::Removed { inodes, gone: (inodes > 0).then_some(id) })
    }

    /// Replaces the chunk list of file `id` by `chunks`; the versions stored
    /// before that it no longer names are queued for collection.
    fn drop_stored(&mut self, id: InodeId, chunks: Vec<ChunkRef>) {
        let Body::File { chunks: now, .. } = &mut self.node_mut(id).body else { unreachable!("a file") };
        let old = std::mem::replace(now, chunks);
        for (i, r) in old.iter().enumerate().filter(|(_, r)| r.is_stored()) {
            self.discard(r.key(id, i as u64));
        }
        self.settle_inline(id);
    }

    pub(super) fn persisted(
        &mut self,
        id: InodeId,
        written: &[ChunkRef],
        obj: &Object<'_>,
        key: Option<&str>,
    ) -> Result<MetaReply> {
        let n = self.live(id)?;
        let Body::File { size, chunks, .. } = &n.body else {
            return Err(Error::invalid(format!("inode {id} is not a file: only files are persisted")));
        };
        let origin = n.origin.as_ref().ok_or_else(|| {
            Error::invalid(format!("inode {id} has no under-store object: adopt it or write it with its key"))
        })?;
        if *size != obj.size || chunks.as_slice() != written {
            return Err(Error::new(ErrorKind::Stale, format!("inode {id} changed while it was written below")));
        }
        if key.is_some_and(|k| k != origin.key) {
            return Err(Error::new(ErrorKind::Stale, format!("inode {id} was renamed while it was written below")));
        }
        let origin =
            Origin { size: obj.size, mtime: obj.mtime, etag: obj.etag.to_string(), dirty: false, ..origin.clone() };
        self.node_mut(id).origin = Some(origin);
        Ok(MetaReply::Info(self.info(id)))
    }

    /// Gives the file `id` made in the pool beneath attachment `att` the
    /// origin `key` (dirty: nothing is below yet), so it can be persisted.
    pub(super) fn note_origin(&mut self, id: InodeId, att: InodeId, key: String) {
        let o = Origin { attach: att, key, size: 0, mtime: 0, etag: String::new(), dirty: true, mode: None };
        self.node_mut(id).origin = Some(o);
    }

    pub(super) fn load_chunks(&mut self, id: InodeId, loaded: &[(u64, ChunkRef)]) -> Result<MetaReply> {
        let n = self.live(id)?;
        let Body::File { size, chunk_size, chunks } = &n.body else {
            return Err(Error::invalid(format!("inode {id} is not a file: only files load from below")));
        };
        for (i, r) in loaded {
            let share = size.saturating_sub(i * chunk_size).min(*chunk_size);
            if !r.is_stored() || r.len > share || *i >= chunks.len() as u64 {
                return Err(Error::invalid(format!("inode {id}: chunk {i} version {} does not fit", r.version)));
            }
            if self.retired.contains(&r.version) {
                return Err(super::create::retired_error(r.version));
            }
        }
        self.check_homes(loaded.iter().map(|(_, r)| r.home))?;
        for (i, r) in loaded {
            let Body::File { chunks, .. } = &mut self.node_mut(id).body else { unreachable!("checked") };
            let slot = &mut chunks[*i as usize];
            if slot.is_below() {
                *slot = *r;
            } else if slot.version != r.version {
                self.discard(r.key(id, *i));
            }
        }
        Ok(MetaReply::Info(self.info(id)))
    }

    pub(super) fn unload(&mut self, id: InodeId) -> Result<MetaReply> {
        let n = self.live(id)?;
        let Body::File { chunks, .. } = &n.body else {
            return Err(Error::invalid(format!("inode {id} is not a file: only files are unloaded")));
        };
        match &n.origin {
            Some(o) if !o.dirty => {}
            _ => {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("inode {id} has changes not yet in the under-store: its copies cannot be dropped"),
                ))
            }
        }
        let below = chunks.iter().map(|r| if r.is_hole() { *r } else { ChunkRef::BELOW }).collect();
        self.drop_stored(id, below);
        Ok(MetaReply::Info(self.info(id)))
    }
}
