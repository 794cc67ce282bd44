//! Small files held inline: `CommitInline` publishes a file written whole
//! in one commit with its bytes, which the state keeps beside the file as
//! chunk 0 (a version with [`ChunkRef::INLINE_BIT`]); nothing of it is on
//! the workers. A reader gets them with the file's chunk list, so a small
//! file is written and read in one round trip to the coordinator.
//! `UpdateInline` gives an existing file such contents (a mount publishing
//! a small file it wrote whole), at a fresh version each time.
//!
//! Invariants: `inline` holds an entry for exactly the live files whose
//! chunk 0 is inline, with that chunk's length and CRC; `bytes` is the sum
//! of the entries' lengths. An op that gives chunk 0 another version, or
//! cuts it away, drops the entry ([`MetaState::settle_inline`]); so does
//! the file's removal. Writers change such a file as any other: a rewrite
//! of chunk 0 goes to the workers, and the file stops being inline (the
//! mount publishes it inline again while it stays small).

use super::create::NewFile;
use super::inode::{Body, Owner};
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp};
use bytes::Bytes;
use std::collections::BTreeMap;
use tierpool_types::{ChunkAttrs, ChunkRef, Error, InodeId, Result};

/// The largest file the state takes inline, whatever the coordinator
/// admits (it admits less, see its `--inline-max`).
pub const INLINE_MAX: u64 = 64 << 10;

/// The bytes of the files held inline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Inline {
    pub(super) files: BTreeMap<InodeId, Bytes>,
    /// The sum of their lengths.
    pub(super) bytes: u64,
}

impl Inline {
    pub(super) fn of(files: BTreeMap<InodeId, Bytes>) -> Inline {
        let bytes = files.values().map(|d| d.len() as u64).sum();
        Inline { files, bytes }
    }

    pub(super) fn insert(&mut self, id: InodeId, data: Bytes) {
        self.bytes += data.len() as u64;
        if let Some(old) = self.files.insert(id, data) {
            self.bytes -= old.len() as u64;
        }
    }

    pub(super) fn remove(&mut self, id: InodeId) {
        if let Some(old) = self.files.remove(&id) {
            self.bytes -= old.len() as u64;
        }
    }
}

/// The file half of a `CommitInline` op.
pub(super) struct NewInline<'a> {
    pub(super) inode: InodeId,
    pub(super) data: &'a Bytes,
    pub(super) chunk_size: u64,
    pub(super) attrs: ChunkAttrs,
    pub(super) mode: u32,
}

impl MetaState {
    pub(super) fn commit_inline(
        &mut self,
        comps: &[String],
        file: &NewInline<'_>,
        overwrite: bool,
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let len = file.data.len() as u64;
        if len > INLINE_MAX || len > file.chunk_size {
            return Err(Error::invalid(format!(
                "{}: {len} bytes are too many to keep inline (at most {} here)",
                display(comps),
                INLINE_MAX.min(file.chunk_size)
            )));
        }
        let r = ChunkRef::inline(file.data);
        let checksums = if len == 0 { Vec::new() } else { vec![r.checksum] };
        let new = NewFile {
            inode: file.inode,
            size: len,
            chunk_size: file.chunk_size,
            checksums: &checksums,
            homes: &[],
            attrs: file.attrs,
            mode: file.mode,
            region: false,
        };
        self.commit_file(comps, &new, overwrite, owner, now)?;
        if len > 0 {
            let Body::File { chunks, .. } = &mut self.node_mut(file.inode).body else { unreachable!("just made") };
            chunks[0] = r;
            self.inline.insert(file.inode, file.data.clone());
        }
        Ok(MetaReply::Info(self.info(file.inode)))
    }

    /// `UpdateInline`: the whole contents of file `id` become `data`, held
    /// here as chunk 0 at version `INLINE_BIT | version`.
    pub(super) fn update_inline(
        &mut self,
        id: InodeId,
        version: u64,
        data: &Bytes,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let n = self.live(id)?;
        if let Some(o) = &n.origin {
            let e = format!("inode {id}: is the under-store key {}, whose bytes are not kept inline", o.key);
            return Err(Error::invalid(e));
        }
        let len = data.len() as u64;
        let chunk_size = match &n.body {
            Body::File { chunk_size, .. } => *chunk_size,
            _ => u64::MAX, // refused by the update's check below
        };
        if len > INLINE_MAX || len > chunk_size {
            return Err(Error::invalid(format!(
                "inode {id}: {len} bytes are too many to keep inline (at most {} here)",
                INLINE_MAX.min(chunk_size)
            )));
        }
        // Version 1 is `CommitInline`'s; ids handed out start above it.
        if version <= 1 || version & !(ChunkRef::INLINE_BIT - 1) != 0 {
            return Err(Error::invalid(format!("inode {id}: {version} is not a version an inline chunk can take")));
        }
        let r = ChunkRef { version: ChunkRef::INLINE_BIT | version, ..ChunkRef::inline(data) };
        let updates = if len == 0 { Vec::new() } else { vec![(0, r)] };
        let plan = self.check_update(id, len, Some(len), &updates, true)?;
        self.apply_update(id, plan, &updates, now);
        if len > 0 {
            self.inline.insert(id, data.clone());
        }
        Ok(MetaReply::Info(self.info(id)))
    }

    /// After the chunks of file `id` changed: drops its inline bytes if
    /// chunk 0 is no longer the inline one.
    pub(super) fn settle_inline(&mut self, id: InodeId) {
        if !self.inline.files.contains_key(&id) {
            return;
        }
        let still =
            matches!(&self.node(id).body, Body::File { chunks, .. } if chunks.first().is_some_and(|r| r.is_inline()));
        if !still {
            self.keep_before(id);
            self.inline.remove(id);
        }
    }

    /// The bytes of file `id` held inline, if it is such a file.
    pub(super) fn inline_of(&self, id: InodeId) -> Option<&Bytes> {
        self.inline.files.get(&id)
    }

    /// Files held inline, and their bytes in all.
    pub fn inline_usage(&self) -> (u64, u64) {
        (self.inline.files.len() as u64, self.inline.bytes)
    }
}
