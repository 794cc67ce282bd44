//! `UpdateFile`: new versions of some chunks of a file and its new size;
//! `GcChunksDone`: replaced versions that the workers deleted.
//!
//! Invariant kept for every file: chunk `i`'s object is no longer than the
//! file's bytes in that chunk, `min(chunk_size, size - i * chunk_size)`;
//! what lies after the object reads as zeros. So growing a file never needs
//! a chunk rewritten, and a cut through a chunk must bring a shortened
//! version of it (the state cannot shorten stored objects).
//!
//! A version that an update replaces or cuts away goes to `pending_chunks`,
//! unless the file still references it afterwards (a writer republishing);
//! an inline chunk 0 replaced or cut away takes its bytes with it.

use super::inode::Body;
use super::MetaState;
use crate::{MetaReply, Timestamp};
use tierpool_types::{ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Result};

/// What a validated update does: the file's new size, how many of its
/// chunks are kept from before the cut, and its chunk count after.
#[derive(Clone, Copy, Debug)]
pub(super) struct UpdatePlan {
    new_size: u64,
    kept: u64,
    count: u64,
}

impl MetaState {
    pub(super) fn update_file(
        &mut self,
        id: InodeId,
        size: u64,
        truncate: Option<u64>,
        updates: &[(u64, ChunkRef)],
        now: Timestamp,
    ) -> Result<MetaReply> {
        let plan = self.check_update(id, size, truncate, updates, false)?;
        self.apply_update(id, plan, updates, now);
        Ok(MetaReply::Info(self.info(id)))
    }

    /// Validates an update of file `id` without changing anything: what
    /// [`MetaState::apply_update`] then does. `inline`: the update brings
    /// chunk 0 inline (`UpdateInline`), else it may only name the inline
    /// chunk the file has.
    pub(super) fn check_update(
        &self,
        id: InodeId,
        size: u64,
        truncate: Option<u64>,
        updates: &[(u64, ChunkRef)],
        inline: bool,
    ) -> Result<UpdatePlan> {
        let n = self.live(id)?;
        let Body::File { size: old_size, chunk_size, chunks } = &n.body else {
            let kind = if n.is_dir() { ErrorKind::IsADirectory } else { ErrorKind::InvalidArgument };
            return Err(Error::new(kind, format!("inode {id} is not a file: only files are updated by chunks")));
        };
        let cs = *chunk_size;
        if let Some(o) = &n.origin {
            let a = &self.attachments[&o.attach];
            if a.readonly {
                let e = format!("{}: is in the under-store {} attached read-only", o.key, a.uri);
                return Err(Error::new(ErrorKind::ReadOnly, e));
            }
        }
        if truncate.is_some_and(|t| t > size) {
            return Err(Error::invalid(format!("inode {id}: a file cut to {truncate:?} bytes cannot end at {size}")));
        }
        let new_size = if truncate.is_some() { size } else { size.max(*old_size) };
        // Chunks kept from before: all, or those below the cut.
        let kept = truncate.map_or(chunks.len() as u64, |t| t.div_ceil(cs).min(chunks.len() as u64));
        let count = new_size.div_ceil(cs);
        let share = |i: u64| (new_size - i * cs).min(cs);
        self.check_homes(updates.iter().map(|(_, r)| r.home))?;
        let mut last = None;
        for (i, r) in updates {
            if last.is_some_and(|l| l >= *i) {
                return Err(Error::invalid(format!("inode {id}: chunk updates must be in increasing index order")));
            }
            last = Some(*i);
            if *i >= count {
                return Err(Error::invalid(format!("inode {id}: chunk {i} is past the end ({new_size} bytes)")));
            }
            if r.is_below() {
                return Err(Error::invalid(format!("inode {id}: chunk {i} cannot be sent below")));
            }
            if r.is_inline() && !inline && chunks.get(*i as usize) != Some(r) {
                return Err(Error::invalid(format!("inode {id}: chunk {i} cannot be sent inline")));
            }
            if !r.is_hole() && self.retired.contains(&r.version) {
                return Err(super::create::retired_error(r.version));
            }
            if self.pending_chunks.contains(&r.key(id, *i)) {
                return Err(Error::invalid(format!("inode {id}: chunk {i} version {} was replaced before", r.version)));
            }
            if r.len > share(*i) || (r.is_hole() && (r.len != 0 || r.checksum != 0)) {
                return Err(Error::invalid(format!(
                    "inode {id}: chunk {i} version {} of {} bytes does not fit the chunk's {} bytes",
                    r.version,
                    r.len,
                    share(*i)
                )));
            }
        }
        // A cut through a kept chunk that the update does not rewrite.
        if let Some(t) = truncate.filter(|t| t % cs != 0) {
            let i = t / cs;
            let rewritten = updates.iter().any(|(j, _)| *j == i);
            let r = chunks.get(i as usize);
            if i < kept && !rewritten && r.is_some_and(|r| r.len > t - i * cs || r.is_below()) {
                return Err(Error::invalid(format!(
                    "inode {id}: the cut to {t} bytes goes through chunk {i}; send a shortened version of it"
                )));
            }
        }
        Ok(UpdatePlan { new_size, kept, count })
    }

    /// Carries out a validated update of file `id`.
    pub(super) fn apply_update(&mut self, id: InodeId, plan: UpdatePlan, updates: &[(u64, ChunkRef)], now: Timestamp) {
        let UpdatePlan { new_size, kept, count } = plan;
        let Body::File { size: s, chunks, .. } = &mut self.node_mut(id).body else { unreachable!("checked before") };
        let old = chunks.clone();
        chunks.truncate(kept as usize);
        chunks.resize(count as usize, ChunkRef::HOLE);
        for (i, r) in updates {
            chunks[*i as usize] = *r;
        }
        let replaced: Vec<ChunkKey> = (old.iter().enumerate())
            .filter(|(i, r)| r.is_stored() && chunks.get(*i).is_none_or(|now| now.version != r.version))
            .map(|(i, r)| r.key(id, i as u64))
            .collect();
        *s = new_size;
        let n = self.node_mut(id);
        n.mtime = now;
        n.ctime = now;
        if let Some(o) = n.origin.as_mut() {
            o.dirty = true;
        }
        for key in replaced {
            self.discard(key);
        }
        self.settle_inline(id);
    }

    pub(super) fn gc_chunks_done(&mut self, keys: &[ChunkKey]) -> MetaReply {
        for k in keys {
            self.unpend_chunk(*k);
        }
        MetaReply::Done
    }
}
