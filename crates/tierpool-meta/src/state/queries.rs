//! Read-only queries: by path (the CLI's) and by inode id and entry name (a
//! file system's). Inode queries leave a file's chunk list out unless asked:
//! a file system looks inodes up far more often than it reads them.

use super::inode::Body;
use super::resolve::entry_error;
use super::MetaState;
use crate::path::normalize;
use crate::{DirEntry, DirName, InodeInfo};
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId, Result};

impl MetaState {
    pub fn stat(&self, path: &str) -> Result<InodeInfo> {
        self.ensure_initialised()?;
        let comps = normalize(path)?;
        if let Some(at) = comps.iter().position(|c| c == super::SNAPSHOTS) {
            return self.stat_snapshot(&comps, at);
        }
        Ok(self.info(self.lookup(&comps)?))
    }

    /// Entries of a directory sorted by name; for a file, the file itself as one entry.
    pub fn list(&self, path: &str) -> Result<Vec<DirEntry>> {
        self.ensure_initialised()?;
        let comps = normalize(path)?;
        if let Some(at) = comps.iter().position(|c| c == super::SNAPSHOTS) {
            return self.list_snapshot(&comps, at);
        }
        let id = self.lookup(&comps)?;
        match self.children(id) {
            Some(children) => {
                Ok(children.iter().map(|(name, c)| DirEntry { name: name.clone(), info: self.info(*c) }).collect())
            }
            None => {
                let name = comps.last().cloned().unwrap_or_default();
                Ok(vec![DirEntry { name, info: self.info(id) }])
            }
        }
    }

    /// The live inode `id`; `NotFound` once it has no name left.
    pub fn stat_inode(&self, id: InodeId, with_chunks: bool) -> Result<InodeInfo> {
        self.ensure_initialised()?;
        self.live(id)?;
        Ok(self.info_with(id, with_chunks))
    }

    /// Entry `name` of directory `parent` (without a file's chunk list).
    pub fn lookup_at(&self, parent: InodeId, name: &str) -> Result<InodeInfo> {
        self.ensure_initialised()?;
        let children = self.live(parent)?.children().ok_or_else(|| entry_error(ErrorKind::NotADirectory, name))?;
        let id = *children.get(name).ok_or_else(|| entry_error(ErrorKind::NotFound, name))?;
        Ok(self.info_with(id, false))
    }

    /// The entries of directory `id`, sorted by name, without `.` and `..`.
    pub fn read_dir(&self, id: InodeId) -> Result<Vec<DirName>> {
        self.ensure_initialised()?;
        let children =
            self.live(id)?.children().ok_or_else(|| entry_error(ErrorKind::NotADirectory, &format!("inode {id}")))?;
        Ok(children
            .iter()
            .map(|(name, c)| DirName { name: name.clone(), id: *c, kind: self.node(*c).kind() })
            .collect())
    }

    /// The directory holding directory `id` (the root holds itself).
    pub fn parent_of(&self, id: InodeId) -> Result<InodeId> {
        let n = self.live(id)?;
        n.dir_parent().ok_or_else(|| entry_error(ErrorKind::NotADirectory, &format!("inode {id}")))
    }

    /// The eviction attributes of every file and region that does not have
    /// the default ones, by inode id: what a worker needs to know.
    pub fn data_attrs(&self) -> Vec<(InodeId, ChunkAttrs)> {
        (self.inodes.iter())
            .filter(|(_, n)| matches!(n.body, Body::File { .. } | Body::Region { .. }))
            .filter(|(_, n)| n.attrs != ChunkAttrs::default())
            .map(|(id, n)| (*id, n.attrs))
            .collect()
    }

    /// Files and regions with a stored chunk in one of `partitions`.
    pub fn inodes_in_partitions(&self, partitions: &std::collections::BTreeSet<u32>) -> Vec<InodeId> {
        let n = self.table.partitions();
        let hit = |key| partitions.contains(&tierpool_placement::partition_of_key(key, n));
        (self.inodes.iter())
            .filter(|(id, inode)| match &inode.body {
                Body::File { chunks, .. } => {
                    chunks.iter().enumerate().any(|(i, c)| c.is_stored() && hit(c.key(**id, i as u64)))
                }
                Body::Region { size, chunk_size } => {
                    (0..size.div_ceil((*chunk_size).max(1))).any(|i| hit(ChunkKey::hashed(**id, i, 1)))
                }
                _ => false,
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// A path for each of `wanted` that the namespace reaches (the first in
    /// name order when hard links give several), sorted; an inode no entry
    /// names any more (unlinked while open) as `(unlinked inode N)`.
    /// Every attached directory: its path, inode and attachment.
    pub fn attached_dirs(&self) -> Vec<(String, InodeId, crate::Attachment)> {
        let mut out: Vec<_> = (self.attachments.iter()).map(|(id, a)| (self.dir_path(*id), *id, a.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Each attached directory's path and attachment, and of its files:
    /// `(files, dirty files, their bytes, bytes in the pool, bytes below,
    /// dirty files in write-back mode, their bytes, files with a write mode
    /// of their own)`.
    pub fn under_figures(&self) -> Vec<(String, crate::Attachment, [u64; 8])> {
        let mut out = Vec::new();
        for (path, id, a) in self.attached_dirs() {
            let mut f = [0u64; 8];
            for i in self.subtree(id) {
                let n = self.node(i);
                let (Some(o), super::inode::Body::File { size, chunk_size, chunks }) = (&n.origin, &n.body) else {
                    continue;
                };
                f[0] += 1;
                if o.dirty {
                    f[1] += 1;
                    f[2] += size;
                    if o.mode_in(&a) == crate::WriteMode::Back {
                        f[5] += 1;
                        f[6] += size;
                    }
                }
                f[7] += u64::from(o.mode.is_some());
                for (k, r) in chunks.iter().enumerate() {
                    let share = (size - k as u64 * chunk_size).min(*chunk_size);
                    if r.is_below() {
                        f[4] += share;
                    } else if r.is_stored() {
                        f[3] += r.len;
                    }
                }
            }
            out.push((path, a, f));
        }
        out
    }

    /// The path of live directory `id`.
    pub fn dir_path(&self, id: InodeId) -> String {
        let names: Vec<&str> = self.chain(id).into_iter().map(|(_, name)| name).collect();
        format!("/{}", names.join("/"))
    }

    /// Live directory `id` and its ancestors below the root, root side
    /// first, each with its name: empty for the root. One step a level,
    /// from the parent links and names directories keep (a file system
    /// asks it before a change under an attachment that mirrors names).
    pub fn ancestry(&self, id: InodeId) -> Result<Vec<(InodeId, String)>> {
        self.ensure_initialised()?;
        self.parent_of(id)?;
        Ok(self.chain(id).into_iter().map(|(d, name)| (d, name.to_string())).collect())
    }

    /// [`ancestry`](Self::ancestry) of `id`, borrowed, whatever it is.
    fn chain(&self, id: InodeId) -> Vec<(InodeId, &str)> {
        let mut out = Vec::new();
        let mut d = id;
        while let Some(Body::Dir { parent, name, .. }) = self.inodes.get(&d).map(|n| &n.body) {
            if *parent == d {
                break;
            }
            out.push((d, name.as_str()));
            d = *parent;
        }
        out.reverse();
        out
    }

    pub fn paths_of(&self, wanted: &[InodeId]) -> Vec<String> {
        let (mut out, unlinked): (Vec<String>, Vec<String>) =
            self.named(wanted).into_values().partition(|p| p.starts_with('/'));
        out.sort();
        out.extend(unlinked);
        out
    }

    /// [`paths_of`](Self::paths_of) by inode.
    pub fn named(&self, wanted: &[InodeId]) -> std::collections::BTreeMap<InodeId, String> {
        let mut named = std::collections::BTreeMap::new();
        let mut left: std::collections::BTreeSet<InodeId> = wanted.iter().copied().collect();
        let mut stack = vec![(InodeId::ROOT, String::new())];
        while let Some((dir, path)) = stack.pop() {
            let Some(children) = self.inodes.get(&dir).and_then(|d| d.children()) else { continue };
            for (name, id) in children.iter().rev() {
                let child = format!("{path}/{name}");
                if left.remove(id) {
                    named.insert(*id, child.clone());
                }
                if self.inodes.get(id).is_some_and(|n| n.children().is_some()) {
                    stack.push((*id, child));
                }
            }
            if left.is_empty() {
                break;
            }
        }
        named.extend(left.iter().map(|id| (*id, format!("(unlinked inode {id})"))));
        named
    }

    /// Bytes of live chunk data per partition, as the metadata counts them
    /// (a region's chunks all count, a file's holes do not).
    pub fn partition_bytes(&self) -> Vec<u64> {
        let n = self.table.partitions();
        let mut out = vec![0u64; n as usize];
        for (id, inode) in &self.inodes {
            match &inode.body {
                Body::File { chunks, .. } => {
                    for (index, c) in chunks.iter().enumerate().filter(|(_, c)| c.is_stored()) {
                        out[tierpool_placement::partition_of_key(c.key(*id, index as u64), n) as usize] += c.len;
                    }
                }
                Body::Region { size, chunk_size } => {
                    for index in 0..size.div_ceil((*chunk_size).max(1)) {
                        let len = (size - index * chunk_size).min(*chunk_size);
                        out[tierpool_placement::partition_of(*id, index, n) as usize] += len;
                    }
                }
                _ => {}
            }
        }
        out
    }
}
