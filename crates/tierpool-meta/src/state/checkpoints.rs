//! Checkpoints of memory regions: snapshots of a region whose chunks were
//! copied on the workers first, since a region's chunks change in place.
//!
//! A client takes one by copying each chunk of the region to a fresh
//! version on the workers that hold it, except a chunk whose bytes equal
//! the version the newest earlier checkpoint keeps: that version is named
//! again (shared), so a checkpoint stores only what changed since the
//! last one. `Checkpoint` then records the versions as a snapshot of the
//! region (`FrozenBody::Region`), read like any at `PATH/.snapshots/NAME`.
//!
//! Restoring copies the versions back over the region's chunks. That is
//! not one step, so it is bracketed: `RegionRestore { done: false }` marks
//! the region before the first copy, `done: true` clears the mark after
//! the last. A region whose restore stopped half way keeps its mark
//! (shown by `stat`) until the same checkpoint is restored to the end, and
//! that checkpoint cannot be removed meanwhile.
//!
//! Invariants (checked with the state's, see `check`): a frozen region is
//! only ever a snapshot's root, with one stored version above 1 per chunk;
//! every mark names a live region and a checkpoint of that region.

use super::inode::Body;
use super::snapshots::{not_reserved, Frozen, FrozenBody, Snapshot};
use super::MetaState;
use crate::path::{check_name, display};
use crate::{MetaReply, Timestamp};
use tierpool_types::{ChunkRef, Error, ErrorKind, InodeId, Result};

impl MetaState {
    /// The live region at `comps`, with its size and chunk size.
    fn region_at(&self, comps: &[String]) -> Result<(InodeId, u64, u64)> {
        let id = self.lookup(comps)?;
        match self.node(id).body {
            Body::Region { size, chunk_size } => Ok((id, size, chunk_size)),
            _ => Err(Error::invalid(format!("{}: is not a region", display(comps)))),
        }
    }

    pub(super) fn checkpoint(
        &mut self,
        comps: &[String],
        name: &str,
        (inode, version): (InodeId, u64),
        chunks: &[ChunkRef],
        now: Timestamp,
    ) -> Result<MetaReply> {
        check_name(name)?;
        not_reserved(name)?;
        let label = Self::snapshot_label(comps, name);
        let (id, size, chunk_size) = self.region_at(comps)?;
        self.no_pages_pending(id, comps)?;
        if id != inode {
            return Err(Error::new(
                ErrorKind::Stale,
                format!("{label}: the region was replaced while it was copied; take the checkpoint again"),
            ));
        }
        if version <= 1
            || version == ChunkRef::BELOW.version
            || version >= self.next_inode
            || self.retired.contains(&version)
        {
            return Err(Error::new(
                ErrorKind::Stale,
                format!("{label}: its copies were given up as orphans; take the checkpoint again"),
            ));
        }
        let key = (display(comps), name.to_owned());
        if self.snapshots.named.contains_key(&key) {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{label}: a snapshot of that name exists")));
        }
        if let Some((_, was)) = self.snapshots.restoring.get(&id) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{}: its restore to checkpoint {was} has not finished; restore it again first", display(comps)),
            ));
        }
        let count = size.div_ceil(chunk_size.max(1));
        if chunks.len() as u64 != count {
            return Err(Error::invalid(format!(
                "{label}: {} chunk versions for a region of {count} chunks",
                chunks.len()
            )));
        }
        for (i, r) in chunks.iter().enumerate() {
            let share = (size - i as u64 * chunk_size).min(chunk_size);
            let bad = |why: &str| Err(Error::invalid(format!("{label}: chunk {i}: {why}")));
            if r.version <= 1 || r.version == ChunkRef::BELOW.version || r.is_inline() || r.home.is_some() {
                return bad(&format!("version {} cannot hold a checkpoint", r.version));
            }
            if r.len != share {
                return bad(&format!("a copy of {} bytes where the chunk has {share}", r.len));
            }
            if r.version != version && !self.snapshots.keeps(&r.key(id, i as u64)) {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!(
                        "{label}: chunk {i}: the copy it shares is no longer kept (its checkpoint was removed); take \
                         the checkpoint again"
                    ),
                ));
            }
        }
        let root = Frozen::of(id, self.node(id), FrozenBody::Region { size, chunk_size, chunks: chunks.to_vec() });
        self.snapshots.insert(key, Snapshot { created: now, root });
        Ok(MetaReply::Done)
    }

    pub(super) fn region_restore(
        &mut self,
        comps: &[String],
        name: &str,
        done: bool,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let label = Self::snapshot_label(comps, name);
        let (id, _, _) = self.region_at(comps)?;
        // A region moved while marked is still restored to its checkpoint,
        // named by where the region was when it was taken.
        let key = match self.snapshots.restoring.get(&id) {
            Some(k) if k.1 == name => k.clone(),
            _ => (display(comps), name.to_owned()),
        };
        let snap = self.snapshots.named.get(&key).ok_or_else(|| self.no_snapshot(comps, name))?;
        if !matches!(snap.root.body, FrozenBody::Region { .. }) || snap.root.id != id {
            return Err(Error::invalid(format!(
                "{label}: is not a checkpoint of the region now at {} (it was taken of another)",
                display(comps)
            )));
        }
        if !done {
            self.no_pages_pending(id, comps)?;
        }
        let marked = self.snapshots.restoring.get(&id);
        match (done, marked) {
            (false, Some(k)) if *k != key => Err(Error::new(
                ErrorKind::Busy,
                format!("{}: its restore to checkpoint {} has not finished; restore that first", display(comps), k.1),
            )),
            (false, _) => {
                let info = snap.root.info(self.table.replicas());
                self.snapshots.restoring.insert(id, key);
                Ok(MetaReply::Info(info))
            }
            (true, Some(k)) if *k == key => {
                self.snapshots.restoring.remove(&id);
                let n = self.node_mut(id);
                (n.mtime, n.ctime) = (now, now);
                Ok(MetaReply::Info(self.info(id)))
            }
            (true, _) => Err(Error::invalid(format!("{label}: no restore of the region to it is under way"))),
        }
    }
}
