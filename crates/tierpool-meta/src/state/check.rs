//! A full check of the state's invariants, for tests and for the shell after
//! recovery. Linear in the size of the state: not for every op in production.

use super::inode::Body;
use super::snapshots::FrozenBody;
use super::MetaState;
use crate::path::MAX_NAME_LEN;
use std::collections::BTreeMap;
use tierpool_types::WorkerId;
use tierpool_types::{Error, InodeId, Result};

pub(super) fn fail(what: String) -> Result<()> {
    Err(Error::internal(format!("metadata invariant broken: {what}")))
}

impl MetaState {
    /// Checks every invariant listed in the module docs of `state.rs`; the
    /// error names the first one found broken.
    pub fn check_invariants(&self) -> Result<()> {
        if !self.initialised {
            if !self.inodes.is_empty() || !self.workers.is_empty() || !self.pending_gc.is_empty() {
                return fail("an uninitialised state holds data".into());
            }
            return Ok(());
        }
        self.check_tree()?;
        for i in self.inodes.keys().chain(&self.pending_gc) {
            if i.0 == 0 || i.0 >= self.next_inode {
                return fail(format!("inode {i} is not below next_inode {}", self.next_inode));
            }
        }
        if let Some(i) = self.pending_gc.iter().find(|i| self.inodes.contains_key(i)) {
            return fail(format!("inode {i} is both live and pending garbage collection"));
        }
        if let Some(i) = self.retired.iter().find(|i| **i == 0 || **i >= self.next_inode) {
            return fail(format!("retired id {i} was never reserved"));
        }
        if let Some(i) = self.retired.iter().find(|i| self.inodes.contains_key(&InodeId(**i))) {
            return fail(format!("inode {i} is live and retired"));
        }
        for (id, n) in &self.inodes {
            if n.is_dir() && self.subdirs_of(*id) != self.count_subdirs(*id) {
                let (kept, counted) = (self.subdirs_of(*id), self.count_subdirs(*id));
                return fail(format!("directory {id}: {kept} subdirectories kept, {counted} counted"));
            }
        }
        self.check_attachments()?;
        self.check_owed()?;
        self.check_inline()?;
        self.check_tasks()?;
        self.check_workers()
    }

    /// Exactly the files whose chunk 0 is inline have bytes held, matching it.
    fn check_inline(&self) -> Result<()> {
        for (id, n) in &self.inodes {
            let r = match &n.body {
                Body::File { chunks, .. } => {
                    if chunks.iter().skip(1).any(|r| r.is_inline()) {
                        return fail(format!("file {id}: a chunk after the first is inline"));
                    }
                    chunks.first().copied().filter(|r| r.is_inline())
                }
                _ => None,
            };
            match (r, self.inline.files.get(id)) {
                (None, None) => {}
                (Some(r), Some(d)) if r.len == d.len() as u64 && r.checksum == crc32c::crc32c(d) => {}
                (Some(_), Some(_)) => return fail(format!("file {id}: its inline bytes do not match chunk 0")),
                (Some(_), None) => return fail(format!("file {id}: chunk 0 is inline but no bytes are held")),
                (None, Some(_)) => return fail(format!("inode {id}: bytes are held inline for no inline chunk")),
            }
        }
        if let Some(id) = self.inline.files.keys().find(|id| !self.inodes.contains_key(id)) {
            return fail(format!("inline bytes are held for dead inode {id}"));
        }
        if self.inline.bytes != self.inline.files.values().map(|d| d.len() as u64).sum::<u64>() {
            return fail("the count of inline bytes is wrong".into());
        }
        Ok(())
    }

    /// Every live directory is reached from the root exactly once, through an
    /// entry that matches its back link; every other inode through exactly
    /// `links` entries; files carry one fitting chunk entry per chunk.
    fn check_tree(&self) -> Result<()> {
        match self.inodes.get(&InodeId::ROOT) {
            Some(root) if root.dir_parent() == Some(InodeId::ROOT) => {}
            _ => return fail("the root is missing or not a directory".into()),
        }
        let mut names: BTreeMap<InodeId, u32> = BTreeMap::from([(InodeId::ROOT, 1)]);
        let mut queue = vec![InodeId::ROOT];
        while let Some(dir) = queue.pop() {
            for (name, c) in self.children(dir).into_iter().flatten() {
                let Some(n) = self.inodes.get(c) else { return fail(format!("entry {name} names dead inode {c}")) };
                check_entry_name(name)?;
                let seen = names.entry(*c).or_insert(0);
                *seen += 1;
                if let Body::Dir { parent, name: own, .. } = &n.body {
                    if *seen > 1 || *c == InodeId::ROOT {
                        return fail(format!("directory {c} is reachable twice"));
                    }
                    if *parent != dir || own != name {
                        return fail(format!("directory {c} links back to {parent}/{own}"));
                    }
                    queue.push(*c);
                } else if *seen == 1 {
                    check_body(*c, &n.body)?;
                }
            }
        }
        for (id, n) in &self.inodes {
            let seen = names.get(id).copied().unwrap_or(0);
            if seen == 0 {
                return fail(format!("inode {id} is live but unreachable"));
            }
            if seen != n.links {
                return fail(format!("inode {id} has {seen} names but counts {} links", n.links));
            }
        }
        for k in &self.pending_chunks {
            if self.snapshots.keeps(k) {
                return fail(format!("chunk {k} is kept by a snapshot and pending garbage collection"));
            }
            match self.inodes.get(&k.inode).map(|n| &n.body) {
                Some(Body::File { chunks, .. }) => {
                    if chunks.get(k.index as usize).is_some_and(|r| r.version == k.version) {
                        return fail(format!("chunk {k} is in use and pending garbage collection"));
                    }
                }
                // A version a region's checkpoint named, the region's live one never.
                Some(Body::Region { .. }) if k.version > 1 => {}
                None if self.snapshots.keeps_inode(k.inode) => {}
                _ => return fail(format!("pending chunk {k} is not of a live file or a checkpoint's copy")),
            }
        }
        self.check_snapshots()?;
        Ok(())
    }

    /// Attachments are live directories, none inside another; files with
    /// chunks below have an origin in a live attachment.
    fn check_attachments(&self) -> Result<()> {
        for a in self.attachments.keys() {
            match self.inodes.get(a) {
                Some(n) if n.is_dir() => {}
                _ => return fail(format!("attachment {a} is not a live directory")),
            }
            let above = self.node(*a).dir_parent().filter(|p| p != a).and_then(|p| self.attachment_of(p));
            if let Some(b) = above {
                return fail(format!("attachment {a} is inside attachment {b}"));
            }
        }
        for (id, n) in &self.inodes {
            if let Some(o) = &n.origin {
                if !self.attachments.contains_key(&o.attach) {
                    return fail(format!("file {id} mirrors an object of {}, which is not attached", o.attach));
                }
            } else if matches!(&n.body, Body::File { chunks, .. } if chunks.iter().any(|r| r.is_below())) {
                return fail(format!("file {id} has chunks below but no under-store object"));
            }
        }
        Ok(())
    }

    fn check_workers(&self) -> Result<()> {
        for (id, w) in &self.workers {
            if w.id != *id || u64::from(id.0) >= self.next_worker_id {
                return fail(format!("worker {id} has record id {} or is not below next_worker_id", w.id));
            }
        }
        if !self.workers.is_empty() {
            for p in 0..self.table.partitions() {
                if self.table.holders(p).is_empty() {
                    return fail(format!("partition {p} has no owner"));
                }
            }
            if let Some(w) = self.table.owners().iter().flatten().find(|w| !self.workers.contains_key(w)) {
                return fail(format!("worker {w} owns a slot but is unknown"));
            }
        }
        for (s, to) in self.table.moving() {
            if !self.workers.contains_key(to) || self.table.owner(*s) == Some(*to) {
                return fail(format!("slot {s} moves to {to}, unknown or its owner"));
            }
        }
        if !self.goal.is_empty() {
            if self.goal.len() != self.table.slots() as usize {
                return fail(format!("a goal of {} slots for {}", self.goal.len(), self.table.slots()));
            }
            let taking =
                |g: &WorkerId| self.workers.contains_key(g) && !self.draining.contains(g) && !self.down.contains(g);
            let replicated = self.table.replicas() > 1;
            if let Some(g) = self.goal.iter().find(|g| !g.as_ref().map_or(replicated, taking)) {
                return fail(format!("the goal names {g:?}, not a worker taking partitions"));
            }
        }
        if let Some(d) = self.down.iter().find(|d| !self.workers.contains_key(d)) {
            return fail(format!("down worker {d} is unknown"));
        }
        if let Some((w, p)) = self.speeds.iter().find(|(w, p)| !self.workers.contains_key(w) || !(1..100).contains(*p))
        {
            return fail(format!("worker {w} has a speed of {p}% (known workers only, 1..99%)"));
        }
        if let Some(d) = self.draining.iter().find(|d| !self.workers.contains_key(d)) {
            return fail(format!("draining worker {d} is unknown"));
        }
        if let Some(r) = self.removed.iter().find(|r| self.workers.contains_key(r)) {
            return fail(format!("removed worker {r} is still a member"));
        }
        Ok(())
    }
}

fn check_entry_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) || name.len() > MAX_NAME_LEN {
        return fail(format!("bad entry name {name:?}"));
    }
    Ok(())
}

fn check_body(id: InodeId, body: &Body) -> Result<()> {
    match body {
        Body::Region { chunk_size, .. } if *chunk_size == 0 => fail(format!("region {id} has chunk size 0")),
        Body::File { size, chunk_size, chunks } => {
            if *chunk_size == 0 || chunks.len() as u64 != size.div_ceil(*chunk_size) {
                return fail(format!("file {id} has {} chunk entries for {size} bytes", chunks.len()));
            }
            for (i, r) in chunks.iter().enumerate() {
                let share = (size - i as u64 * chunk_size).min(*chunk_size);
                if r.len > share || (r.is_hole() && r.len != 0) {
                    return fail(format!("file {id}: chunk {i} of {} bytes does not fit its {share}", r.len));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

impl MetaState {
    /// Snapshots keep versions of files and regions only (live or gone,
    /// never being collected whole), under ids that were handed out; their
    /// names are valid; a region's checkpoint is a snapshot's root, names
    /// a version above 1 for every chunk, and restores mark live regions.
    fn check_snapshots(&self) -> Result<()> {
        let rebuilt = super::snapshots::Snapshots::of(self.snapshots.named.clone(), self.snapshots.restoring.clone());
        if rebuilt != self.snapshots {
            return fail("the versions kept by snapshots are miscounted".to_owned());
        }
        for (path, name) in self.snapshots.named.keys() {
            let comps = crate::normalize(path)?;
            if crate::path::display(&comps) != *path || crate::check_name(name).is_err() || name == super::SNAPSHOTS {
                return fail(format!("snapshot {path}@{name} is misnamed"));
            }
        }
        for k in self.snapshots.kept().keys() {
            if self.pending_gc.contains(&k.inode) {
                return fail(format!("chunk {k} is kept by a snapshot and its inode is being collected"));
            }
            if k.inode.0 >= self.next_inode {
                return fail(format!("chunk {k} is kept by a snapshot but its inode was never handed out"));
            }
            if self.inodes.get(&k.inode).is_some_and(|n| !matches!(n.body, Body::File { .. } | Body::Region { .. })) {
                return fail(format!("chunk {k} is kept by a snapshot but its inode is not a file or a region"));
            }
        }
        for ((path, name), snap) in &self.snapshots.named {
            let mut inner_region = false;
            snap.root
                .walk(&mut |f| inner_region |= f.id != snap.root.id && matches!(f.body, FrozenBody::Region { .. }));
            if inner_region {
                return fail(format!("snapshot {path}@{name} holds a region beneath its root"));
            }
            if let FrozenBody::Region { size, chunk_size, chunks } = &snap.root.body {
                let count = size.div_ceil((*chunk_size).max(1));
                let bad = chunks.iter().any(|r| r.version <= 1 || r.is_inline() || r.home.is_some());
                if *chunk_size == 0 || chunks.len() as u64 != count || bad {
                    return fail(format!("checkpoint {path}@{name} does not name one stored copy per chunk"));
                }
            }
        }
        for (id, (path, name)) in &self.snapshots.restoring {
            let live = self.inodes.get(id).is_some_and(|n| matches!(n.body, Body::Region { .. }));
            let of_it = (self.snapshots.named.get(&(path.clone(), name.clone())))
                .is_some_and(|s| s.root.id == *id && matches!(s.root.body, FrozenBody::Region { .. }));
            if !live || !of_it {
                return fail(format!("region {id} is marked as being restored to {path}@{name}, which is not its"));
            }
        }
        Ok(())
    }
}
