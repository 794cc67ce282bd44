//! Snapshots: named, read-only copies of a file or a directory tree that
//! share every chunk with the live data (copy on write).
//!
//! Taking one copies the tree's metadata (names, attributes, chunk lists,
//! inline bytes) and moves no data: the chunk versions it names are *kept*.
//! A kept version is never garbage: when the live file replaces or drops
//! it, or is removed, the version stays on the workers for the snapshot;
//! when the last snapshot keeping it goes, it becomes garbage like any
//! replaced version (or its whole inode does, once the inode is gone and
//! nothing keeps any of its versions).
//!
//! A snapshot is named by the path it was taken of, as it was then, and a
//! name; it is read at `PATH/.snapshots/NAME/...` and never changes.
//! `.snapshots` is therefore reserved: no path that changes anything may
//! go through it, and no entry may be called so.
//!
//! Restoring puts the snapshot's tree back at its path in one op. A file
//! keeps its inode id (its chunks are stored under it), so a file of the
//! snapshot that now also has a name outside that path cannot be restored;
//! directories and files storing no chunk get new ids.
//!
//! Invariants (checked with the state's, see `check`): `kept` counts, for
//! every stored chunk version, how many snapshot entries name it; no kept
//! version is pending collection, and no inode with a kept version is;
//! snapshots hold no memory region, and no chunk that is below.
//!
//! Beneath an attached under-store, a snapshot keeps only what the pool
//! holds: a file with chunks still below is refused (`Stale`: the client
//! loads the tree first), and frozen files mirror no object. A restore
//! there makes each restored file a file of the store again, at its key,
//! with changes not below; the client removes below what the restore
//! drops before it, and writes the files below after it, as the
//! attachment's mode says. A tree with a file of more than one name is not
//! restored there (a store has one name per file).

use super::inode::{Body, Inode, Owner};
use super::resolve::path_error;
use super::MetaState;
use crate::path::{check_name, display};
use crate::{DirEntry, InodeInfo, InodeKind, MetaReply, Timestamp};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Placement, Result};

/// The directory name under which a path's snapshots are read.
pub const SNAPSHOTS: &str = ".snapshots";

/// Deepest tree a snapshot takes (levels of directories beneath its root):
/// frozen trees are walked by recursion, which must stay well within a
/// thread's stack.
pub const MAX_DEPTH: usize = 1000;

/// One snapshot: when it was taken and the tree it froze.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub created: Timestamp,
    pub root: Frozen,
}

/// An inode as a snapshot froze it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frozen {
    /// The inode it was; a file's chunks are stored under this id.
    pub id: InodeId,
    pub mode: u32,
    pub owner: Owner,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub attrs: ChunkAttrs,
    pub replicas: u8,
    pub placement: Placement,
    pub body: FrozenBody,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrozenBody {
    File {
        size: u64,
        chunk_size: u64,
        chunks: Vec<ChunkRef>,
        inline: Option<Bytes>,
    },
    Dir {
        entries: BTreeMap<String, Frozen>,
    },
    Symlink {
        target: String,
    },
    Special {
        kind: InodeKind,
        rdev: u64,
    },
    /// A region's checkpoint (only ever a snapshot's root): one stored
    /// version per chunk, copied from the region's chunks, which change
    /// in place.
    Region {
        size: u64,
        chunk_size: u64,
        chunks: Vec<ChunkRef>,
    },
}

/// What `snapshot ls` shows of one snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotSummary {
    /// The path it was taken of.
    pub path: String,
    pub name: String,
    pub created: Timestamp,
    /// Files, directories and other entries in it, its root included.
    pub entries: u64,
    /// The sum of its files' sizes.
    pub bytes: u64,
    /// Bytes of stored chunk versions it names that no live file names
    /// (what the pool keeps for it and any other snapshot naming them).
    pub kept_bytes: u64,
}

/// Every snapshot, by (path, name), and the versions they keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Snapshots {
    pub(super) named: BTreeMap<(String, String), Snapshot>,
    /// Stored chunk version -> how many snapshot entries name it, and its
    /// length. Derived.
    kept: BTreeMap<ChunkKey, (u32, u64)>,
    /// Regions being restored to a checkpoint (by its key), whose restore
    /// has not finished.
    pub(super) restoring: BTreeMap<InodeId, (String, String)>,
}

impl Frozen {
    /// Live inode `id` (`n`) frozen with `body`.
    pub(super) fn of(id: InodeId, n: &Inode, body: FrozenBody) -> Frozen {
        Frozen {
            id,
            mode: n.mode,
            owner: n.owner,
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            attrs: n.attrs,
            replicas: n.replicas,
            placement: n.placement,
            body,
        }
    }

    /// Its stored chunk versions and their lengths, each as often as it is named.
    fn keys(&self, out: &mut Vec<(ChunkKey, u64)>) {
        match &self.body {
            FrozenBody::File { chunks, .. } | FrozenBody::Region { chunks, .. } => out.extend(
                (chunks.iter().enumerate())
                    .filter(|(_, r)| r.is_stored())
                    .map(|(i, r)| (r.key(self.id, i as u64), r.len)),
            ),
            FrozenBody::Dir { entries } => entries.values().for_each(|e| e.keys(out)),
            _ => {}
        }
    }

    pub(super) fn walk(&self, f: &mut dyn FnMut(&Frozen)) {
        f(self);
        if let FrozenBody::Dir { entries } = &self.body {
            entries.values().for_each(|e| e.walk(f));
        }
    }

    fn kind(&self) -> InodeKind {
        match &self.body {
            FrozenBody::File { .. } => InodeKind::File,
            FrozenBody::Dir { .. } => InodeKind::Dir,
            FrozenBody::Symlink { .. } => InodeKind::Symlink,
            FrozenBody::Special { kind, .. } => *kind,
            FrozenBody::Region { .. } => InodeKind::Region,
        }
    }

    /// How `stat` shows it: like the live inode it was, read-only, in a
    /// pool keeping `pool` copies of each chunk.
    pub(super) fn info(&self, pool: u8) -> InodeInfo {
        let replicas = match (self.replicas, self.placement) {
            (_, Placement::LocalOnly) => 1,
            (0, _) => pool,
            (n, _) => n.min(pool),
        };
        let mut info = InodeInfo {
            id: self.id,
            kind: self.kind(),
            size: 0,
            chunk_size: 0,
            mode: self.mode,
            uid: self.owner.uid,
            gid: self.owner.gid,
            nlink: 1,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            attrs: self.attrs,
            replicas,
            placement: self.placement,
            chunks: Vec::new(),
            target: String::new(),
            rdev: 0,
            origin: None,
            inline: None,
            restoring: None,
        };
        match &self.body {
            FrozenBody::File { size, chunk_size, chunks, inline } => {
                (info.size, info.chunk_size) = (*size, *chunk_size);
                info.chunks = chunks.clone();
                info.inline = inline.clone();
            }
            FrozenBody::Dir { entries } => {
                let subdirs = entries.values().filter(|e| matches!(e.body, FrozenBody::Dir { .. })).count() as u32;
                info.nlink = subdirs.saturating_add(2);
                info.size = entries.len() as u64;
            }
            FrozenBody::Symlink { target } => {
                info.size = target.len() as u64;
                info.target = target.clone();
            }
            FrozenBody::Special { rdev, .. } => info.rdev = *rdev,
            FrozenBody::Region { size, chunk_size, chunks } => {
                (info.size, info.chunk_size) = (*size, *chunk_size);
                info.chunks = chunks.clone();
            }
        }
        info
    }
}

impl Snapshots {
    pub(super) fn of(
        named: BTreeMap<(String, String), Snapshot>,
        restoring: BTreeMap<InodeId, (String, String)>,
    ) -> Snapshots {
        let mut s = Snapshots { named: BTreeMap::new(), kept: BTreeMap::new(), restoring };
        for (k, snap) in named {
            s.insert(k, snap);
        }
        s
    }

    pub(super) fn insert(&mut self, key: (String, String), snap: Snapshot) {
        let mut keys = Vec::new();
        snap.root.keys(&mut keys);
        for (k, len) in keys {
            self.kept.entry(k).or_insert((0, len)).0 += 1;
        }
        self.named.insert(key, snap);
    }

    /// Removes a snapshot; returns the versions no snapshot keeps any more.
    fn remove(&mut self, key: &(String, String)) -> Vec<ChunkKey> {
        let Some(snap) = self.named.remove(key) else { return Vec::new() };
        let mut keys = Vec::new();
        snap.root.keys(&mut keys);
        let mut freed = Vec::new();
        for (k, _) in keys {
            let (n, _) = self.kept.get_mut(&k).expect("a snapshot's versions are kept");
            *n -= 1;
            if *n == 0 {
                self.kept.remove(&k);
                freed.push(k);
            }
        }
        freed
    }

    pub(super) fn keeps(&self, key: &ChunkKey) -> bool {
        self.kept.contains_key(key)
    }

    /// Whether any version of inode `id` is kept.
    pub(super) fn keeps_inode(&self, id: InodeId) -> bool {
        self.kept.range(super::inode_keys(id)).next().is_some()
    }

    pub(super) fn kept(&self) -> &BTreeMap<ChunkKey, (u32, u64)> {
        &self.kept
    }
}

impl MetaState {
    /// Whether a snapshot keeps chunk version `key`.
    pub fn keeps(&self, key: &ChunkKey) -> bool {
        self.snapshots.keeps(key)
    }

    /// Whether a snapshot keeps any version of inode `id`.
    pub fn keeps_inode(&self, id: InodeId) -> bool {
        self.snapshots.keeps_inode(id)
    }
}

/// Refuses `.snapshots` as the name of a new or renamed entry.
pub(super) fn not_reserved(name: &str) -> Result<()> {
    if name == SNAPSHOTS {
        return Err(Error::new(ErrorKind::ReadOnly, format!("{SNAPSHOTS}: the name is reserved for snapshots")));
    }
    Ok(())
}

/// A path an op may change: normalised, and not through `.snapshots`.
pub(super) fn writable(path: &str) -> Result<Vec<String>> {
    let comps = crate::normalize(path)?;
    if comps.iter().any(|c| c == SNAPSHOTS) {
        return Err(Error::new(ErrorKind::ReadOnly, format!("{}: snapshots are read-only", display(&comps))));
    }
    Ok(comps)
}

/// Where a path through `.snapshots` leads: the list of a path's
/// snapshots, or an entry of one.
enum Place<'a> {
    /// A path's snapshots, by name.
    Index(Vec<(&'a str, &'a Snapshot)>),
    Entry(&'a Frozen),
}

impl MetaState {
    /// `path@name`, as errors name a snapshot.
    pub(super) fn snapshot_label(comps: &[String], name: &str) -> String {
        format!("{}@{name}", display(comps))
    }

    pub(super) fn create_snapshot(&mut self, comps: &[String], name: &str, now: Timestamp) -> Result<MetaReply> {
        check_name(name)?;
        not_reserved(name)?;
        let id = self.lookup(comps)?;
        let key = (display(comps), name.to_owned());
        if self.snapshots.named.contains_key(&key) {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: a snapshot of that name exists", Self::snapshot_label(comps, name)),
            ));
        }
        if self.depth_below(id) > MAX_DEPTH {
            return Err(Error::invalid(format!(
                "{}: is more than {MAX_DEPTH} directories deep; snapshot a part of it",
                display(comps)
            )));
        }
        let root = self.freeze(id, comps)?;
        self.snapshots.insert(key, Snapshot { created: now, root });
        Ok(MetaReply::Done)
    }

    /// Levels of directories beneath `id` (0 for a file or an empty directory).
    fn depth_below(&self, id: InodeId) -> usize {
        let (mut deepest, mut stack) = (0, vec![(id, 0)]);
        while let Some((i, d)) = stack.pop() {
            deepest = deepest.max(d);
            if let Some(children) = self.children(i) {
                stack.extend(children.values().filter(|c| self.is_dir(**c)).map(|c| (*c, d + 1)));
            }
        }
        deepest
    }

    /// Inode `id` and everything beneath it, frozen.
    fn freeze(&self, id: InodeId, comps: &[String]) -> Result<Frozen> {
        let n = self.node(id);
        let body = match &n.body {
            Body::File { chunks, .. } if chunks.iter().any(|r| r.is_below()) => {
                // Its object below will change; the snapshot keeps only what the pool holds.
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!(
                        "{}: has chunks only in its under-store; load them into the pool first (`tierpool load`)",
                        display(comps)
                    ),
                ));
            }
            Body::File { size, chunk_size, chunks } => FrozenBody::File {
                size: *size,
                chunk_size: *chunk_size,
                chunks: chunks.clone(),
                inline: self.inline_of(id).cloned(),
            },
            Body::Dir { children, .. } => {
                let mut entries = BTreeMap::new();
                for (name, c) in children {
                    let mut path = comps.to_vec();
                    path.push(name.clone());
                    entries.insert(name.clone(), self.freeze(*c, &path)?);
                }
                FrozenBody::Dir { entries }
            }
            Body::Region { .. } => {
                return Err(Error::invalid(format!(
                    "{}: is a memory region; take a checkpoint of the region itself (a tree holding one is not \
                     snapshotted)",
                    display(comps)
                )))
            }
            Body::Symlink { target } => FrozenBody::Symlink { target: target.clone() },
            Body::Special { kind, rdev } => FrozenBody::Special { kind: *kind, rdev: *rdev },
        };
        Ok(Frozen::of(id, n, body))
    }

    pub(super) fn drop_snapshot(&mut self, comps: &[String], name: &str) -> Result<MetaReply> {
        let key = (display(comps), name.to_owned());
        if !self.snapshots.named.contains_key(&key) {
            return Err(self.no_snapshot(comps, name));
        }
        if self.snapshots.restoring.values().any(|k| *k == key) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{}: a restore of the region to it has not finished", Self::snapshot_label(comps, name)),
            ));
        }
        let freed = self.snapshots.remove(&key);
        let mut gone = BTreeSet::new();
        for k in freed {
            match self.inodes.get(&k.inode).map(|n| &n.body) {
                Some(Body::File { chunks, .. }) => {
                    if chunks.get(k.index as usize).is_none_or(|r| !r.is_stored() || r.version != k.version) {
                        self.discard(k);
                    }
                }
                // A checkpoint's version is never the region's live one.
                Some(Body::Region { .. }) => self.discard(k),
                Some(_) => unreachable!("kept versions are of files and regions"),
                None if self.snapshots.keeps_inode(k.inode) => self.discard(k),
                None => {
                    gone.insert(k.inode);
                }
            }
        }
        for i in gone {
            self.collect_inode(i, true);
        }
        Ok(MetaReply::Done)
    }

    pub(super) fn no_snapshot(&self, comps: &[String], name: &str) -> Error {
        Error::new(ErrorKind::NotFound, format!("{}: no such snapshot", Self::snapshot_label(comps, name)))
    }

    /// Chunk version `key` is no longer named by its file: garbage, unless
    /// a snapshot keeps it.
    pub(super) fn discard(&mut self, key: ChunkKey) {
        if !self.snapshots.keeps(&key) {
            self.pend_chunk(key);
            self.fresh.0.keys.push(key);
        }
    }

    /// Dead inode `id`, which no snapshot keeps any version of: all its
    /// chunks are garbage (space comes back at once if it `stores` any).
    pub(super) fn collect_inode(&mut self, id: InodeId, stores: bool) {
        self.pend_inode(id);
        if stores {
            self.fresh.0.inodes.push(id);
        }
        let versions: Vec<_> = self.pending_chunks.range(super::inode_keys(id)).copied().collect();
        for k in versions {
            self.unpend_chunk(k);
        }
    }

    pub(super) fn restore_snapshot(&mut self, comps: &[String], name: &str, now: Timestamp) -> Result<MetaReply> {
        let label = Self::snapshot_label(comps, name);
        let snap = (self.snapshots.named.get(&(display(comps), name.to_owned())))
            .ok_or_else(|| self.no_snapshot(comps, name))?
            .root
            .clone();
        if let FrozenBody::Region { .. } = snap.body {
            return Err(Error::invalid(format!(
                "{label}: is a checkpoint of a region, whose chunks are copied back on the workers: restore it \
                 through a client (`tierpool snapshot restore`)"
            )));
        }
        let Some(leaf) = comps.last() else {
            return Err(Error::invalid(format!(
                "{label}: the root cannot be replaced; restore its entries one by one"
            )));
        };
        let parent = self.parent_dir(comps)?;
        self.check_writable(parent, &display(comps))?;
        let current = self.child(parent, leaf);
        // The names each inode has within the tree being replaced.
        let mut inside: BTreeMap<InodeId, u32> = BTreeMap::new();
        for i in current.map(|c| self.subtree(c)).unwrap_or_default() {
            if self.attachments.contains_key(&i) {
                let at = self.dir_path(i);
                return Err(Error::invalid(format!("{label}: an under-store is attached at {at}; detach it first")));
            }
            *inside.entry(i).or_default() += 1;
        }
        // Files storing chunks keep their ids (the chunks are stored under
        // them): live only inside, or gone but with versions kept (so never
        // collected nor retired). Everything else gets a fresh id.
        let mut reuse = BTreeSet::new();
        let mut links: BTreeMap<InodeId, u32> = BTreeMap::new();
        let (mut fresh, mut dirs) = (BTreeSet::new(), 0u64);
        let mut clash = None;
        snap.walk(&mut |f| {
            let stores = match &f.body {
                FrozenBody::Dir { .. } => return dirs += 1,
                FrozenBody::File { chunks, .. } => chunks.iter().any(|r| r.is_stored()),
                _ => false,
            };
            *links.entry(f.id).or_default() += 1;
            match self.inodes.get(&f.id) {
                Some(n) if inside.get(&f.id).copied() == Some(n.links) && n.has_data() => {
                    reuse.insert(f.id);
                }
                Some(_) if stores => clash = clash.or(Some(f.id)),
                None if stores && !self.retired.contains(&f.id.0) => {
                    reuse.insert(f.id);
                }
                None if stores => clash = clash.or(Some(f.id)),
                _ => {
                    fresh.insert(f.id);
                }
            }
        });
        if self.attachment_of(parent).is_some() && links.values().any(|n| *n > 1) {
            return Err(Error::invalid(format!(
                "{label}: holds a file of more than one name, which its under-store cannot hold"
            )));
        }
        if self.next_inode.checked_add(fresh.len() as u64 + dirs).is_none_or(|n| n == u64::MAX) {
            return Err(Error::new(ErrorKind::PoolFull, format!("{label}: the pool has no inode ids left")));
        }
        if let Some(id) = clash {
            let at = self.paths_of(&[id]).into_iter().next().unwrap_or_default();
            return Err(Error::invalid(format!(
                "{label}: a file in it is now also at {at} (or its id was given up); remove or move that name first"
            )));
        }
        // Validated: mutate.
        let mut before = BTreeMap::new();
        if let Some(c) = current {
            self.unlink(parent, leaf);
            before = self.release_sparing(c, &reuse);
        }
        let mut ids = BTreeMap::new();
        let root = self.thaw(&snap, &reuse, &links, &mut ids, &before);
        self.link(parent, leaf, root);
        self.touch(parent, now);
        if let Some(att) = self.attachment_of(parent) {
            self.mirror_restored(att, parent, leaf, root, &before);
        }
        Ok(MetaReply::Info(self.info(root)))
    }

    /// The files of the tree restored at entry `leaf` (inode `root`) of
    /// `parent`, beneath attachment `att`, are files of its store again:
    /// each at its key, with changes not below (the store holds whatever
    /// it held), keeping its own write mode if its id had one before.
    fn mirror_restored(
        &mut self,
        att: InodeId,
        parent: InodeId,
        leaf: &str,
        root: InodeId,
        before: &BTreeMap<InodeId, Inode>,
    ) {
        let mut stack = vec![(parent, leaf.to_owned(), root)];
        while let Some((dir, name, id)) = stack.pop() {
            match &self.node(id).body {
                Body::Dir { children, .. } => {
                    stack.extend(children.iter().map(|(n, c)| (id, n.clone(), *c)));
                }
                Body::File { .. } if self.node(id).origin.is_none() => {
                    let key = self.key_in(att, dir, &name);
                    self.note_origin(id, att, key);
                    let mode = before.get(&id).and_then(|n| n.origin.as_ref()).and_then(|o| o.mode);
                    if let Some(o) = self.node_mut(id).origin.as_mut() {
                        o.mode = mode;
                    }
                }
                _ => {}
            }
        }
    }

    /// Makes the live inode for frozen `f` (and what is beneath it);
    /// returns its id. `before` holds the inodes of reused ids as they were.
    fn thaw(
        &mut self,
        f: &Frozen,
        reuse: &BTreeSet<InodeId>,
        links: &BTreeMap<InodeId, u32>,
        ids: &mut BTreeMap<InodeId, InodeId>,
        before: &BTreeMap<InodeId, Inode>,
    ) -> InodeId {
        if let Some(id) = ids.get(&f.id) {
            return *id; // a further name of a hard-linked file
        }
        let id = if reuse.contains(&f.id) {
            f.id
        } else {
            let id = InodeId(self.next_inode);
            self.next_inode += 1;
            id
        };
        ids.insert(f.id, id);
        let body = match &f.body {
            FrozenBody::File { size, chunk_size, chunks, .. } => {
                Body::File { size: *size, chunk_size: *chunk_size, chunks: chunks.clone() }
            }
            FrozenBody::Dir { .. } => Body::Dir { parent: id, name: String::new(), children: BTreeMap::new() },
            FrozenBody::Symlink { target } => Body::Symlink { target: target.clone() },
            FrozenBody::Special { kind, rdev } => Body::Special { kind: *kind, rdev: *rdev },
            FrozenBody::Region { .. } => unreachable!("checkpoints are restored by RegionRestore"),
        };
        let node = Inode {
            mode: f.mode,
            owner: f.owner,
            atime: f.atime,
            mtime: f.mtime,
            ctime: f.ctime,
            attrs: f.attrs,
            links: links.get(&f.id).copied().unwrap_or(1),
            replicas: f.replicas,
            placement: f.placement,
            origin: None,
            body,
        };
        self.placed.0 |= node.placement != Placement::Hash;
        self.keep_before(id);
        self.inodes.insert(id, node);
        self.recount_subdirs([id]);
        match &f.body {
            FrozenBody::File { chunks, inline, .. } => {
                if let Some(data) = inline {
                    self.inline.insert(id, data.clone());
                }
                // What the file named before and the snapshot does not.
                if let Some(Body::File { chunks: old, .. }) = before.get(&id).map(|n| &n.body) {
                    for (i, r) in old.iter().enumerate().filter(|(_, r)| r.is_stored()) {
                        if chunks.get(i).is_none_or(|now| now.version != r.version || !now.is_stored()) {
                            self.discard(r.key(id, i as u64));
                        }
                    }
                }
            }
            FrozenBody::Dir { entries } => {
                for (name, e) in entries {
                    let child = self.thaw(e, reuse, links, ids, before);
                    self.link(id, name, child);
                }
            }
            _ => {}
        }
        id
    }

    /// Where `comps` leads when its component `at` is `.snapshots`.
    fn place<'a>(&'a self, comps: &'a [String], at: usize) -> Result<Place<'a>> {
        let path = display(&comps[..at]);
        let (Some(name), rest) = (comps.get(at + 1), comps.get(at + 2..).unwrap_or(&[])) else {
            let mine = (self.snapshots.named.range((path.clone(), String::new())..))
                .take_while(|((p, _), _)| *p == path)
                .map(|((_, n), s)| (n.as_str(), s));
            return Ok(Place::Index(mine.collect()));
        };
        let snap = self.snapshots.named.get(&(path, name.clone()));
        let mut cur = &snap.ok_or_else(|| path_error(ErrorKind::NotFound, comps))?.root;
        for c in rest {
            let FrozenBody::Dir { entries } = &cur.body else {
                return Err(path_error(ErrorKind::NotADirectory, comps));
            };
            cur = entries.get(c).ok_or_else(|| path_error(ErrorKind::NotFound, comps))?;
        }
        Ok(Place::Entry(cur))
    }

    /// `stat` of a path through `.snapshots` (its component `at`).
    pub(super) fn stat_snapshot(&self, comps: &[String], at: usize) -> Result<InodeInfo> {
        match self.place(comps, at)? {
            Place::Entry(f) => Ok(f.info(self.table.replicas())),
            Place::Index(snaps) => Ok(index_info(&snaps)),
        }
    }

    /// `list` of a path through `.snapshots` (its component `at`).
    pub(super) fn list_snapshot(&self, comps: &[String], at: usize) -> Result<Vec<DirEntry>> {
        let pool = self.table.replicas();
        match self.place(comps, at)? {
            Place::Index(snaps) => {
                Ok(snaps.iter().map(|(n, s)| DirEntry { name: (*n).to_owned(), info: s.root.info(pool) }).collect())
            }
            Place::Entry(f) => match &f.body {
                FrozenBody::Dir { entries } => {
                    Ok(entries.iter().map(|(n, e)| DirEntry { name: n.clone(), info: e.info(pool) }).collect())
                }
                _ => Ok(vec![DirEntry { name: comps.last().cloned().unwrap_or_default(), info: f.info(pool) }]),
            },
        }
    }

    /// The snapshots of `path` (of every path: `None`), by path and name.
    pub fn snapshots(&self, path: Option<&str>) -> Result<Vec<SnapshotSummary>> {
        self.ensure_initialised()?;
        let only = path.map(writable).transpose()?.map(|c| display(&c));
        let mut out = Vec::new();
        for ((p, name), snap) in &self.snapshots.named {
            if only.as_ref().is_some_and(|o| o != p) {
                continue;
            }
            let (mut entries, mut bytes, mut keys) = (0, 0, Vec::new());
            snap.root.walk(&mut |f| {
                entries += 1;
                if let FrozenBody::File { size, .. } | FrozenBody::Region { size, .. } = f.body {
                    bytes += size;
                }
            });
            snap.root.keys(&mut keys);
            let keys: BTreeSet<ChunkKey> = keys.into_iter().map(|(k, _)| k).collect();
            let kept_bytes = self.bytes_only_kept(keys.iter());
            out.push(SnapshotSummary {
                path: p.clone(),
                name: name.clone(),
                created: snap.created,
                entries,
                bytes,
                kept_bytes,
            });
        }
        Ok(out)
    }

    /// Snapshots, and the bytes of the versions they keep that no live file names.
    pub fn snapshot_usage(&self) -> (u64, u64) {
        (self.snapshots.named.len() as u64, self.bytes_only_kept(self.snapshots.kept.keys()))
    }

    fn bytes_only_kept<'a>(&self, keys: impl Iterator<Item = &'a ChunkKey>) -> u64 {
        let live = |k: &ChunkKey| match self.inodes.get(&k.inode).map(|n| &n.body) {
            Some(Body::File { chunks, .. }) => {
                chunks.get(k.index as usize).is_some_and(|r| r.is_stored() && r.key(k.inode, k.index) == *k)
            }
            _ => false,
        };
        keys.filter(|k| !live(k)).map(|k| self.snapshots.kept.get(k).map_or(0, |(_, len)| *len)).sum()
    }
}

/// How `stat` shows a path's `.snapshots`: a read-only directory.
fn index_info(snaps: &[(&str, &Snapshot)]) -> InodeInfo {
    let newest = snaps.iter().map(|(_, s)| s.created).max().unwrap_or(0);
    InodeInfo {
        id: InodeId(0),
        kind: InodeKind::Dir,
        size: snaps.len() as u64,
        chunk_size: 0,
        mode: 0o555,
        uid: 0,
        gid: 0,
        nlink: 2 + snaps.iter().filter(|(_, s)| matches!(s.root.body, FrozenBody::Dir { .. })).count() as u32,
        atime: newest,
        mtime: newest,
        ctime: newest,
        attrs: ChunkAttrs::default(),
        replicas: 0,
        placement: Placement::Hash,
        chunks: Vec::new(),
        target: String::new(),
        rdev: 0,
        origin: None,
        inline: None,
        restoring: None,
    }
}
