//! Names: lookups, creation of every kind of inode with the caller as its
//! owner, unlink/rmdir, rename and directory listings, all addressed by the
//! parent directory's inode, so no path is ever resolved here.

use crate::attr::{attr, file_type};
use crate::fs::{name_of, Listing, TierpoolFs};
use fuser::{Errno, FileAttr, FileType, Request};
use std::ffi::OsStr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tierpool_client::{InodeInfo, InodeKind, NewNode};
use tierpool_types::InodeId;

impl TierpoolFs {
    pub(crate) fn lookup_entry(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        if let Some(snap) = self.snap_lookup(parent, name) {
            return snap.map(|i| attr(&i));
        }
        let name = name_of(name)?;
        let info = self.block(self.io.client.lookup(InodeId(parent), name))?;
        self.names.lock().met(info.id.0, parent, name);
        Ok(self.attr_of(&info))
    }

    /// Creates `name` in `parent`, owned by the calling user (the pool
    /// gives it the directory's group in a set-group-id directory).
    pub(crate) fn make(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        node: NewNode,
        mode: u32,
    ) -> Result<InodeInfo, Errno> {
        let name = name_of(name)?;
        let owner = (req.uid(), req.gid());
        let epoch = self.fresh.lock().epoch();
        let (info, dir) = self.block(self.io.client.make_at(InodeId(parent), name, node, mode & 0o7777, owner))?;
        self.names.lock().met(info.id.0, parent, name);
        self.fresh.lock().put(epoch, [dir], Instant::now());
        Ok(info)
    }

    /// `mknod`: a regular file, a named pipe, a socket or a device node.
    pub(crate) fn make_node(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Result<FileAttr, Errno> {
        let kind = match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => None,
            libc::S_IFIFO => Some(InodeKind::Fifo),
            libc::S_IFSOCK => Some(InodeKind::Socket),
            libc::S_IFCHR => Some(InodeKind::CharDevice),
            libc::S_IFBLK => Some(InodeKind::BlockDevice),
            _ => return Err(Errno::EINVAL),
        };
        let node = match kind {
            None => NewNode::File { chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE },
            Some(kind) => NewNode::Special { kind, rdev: u64::from(rdev) },
        };
        self.make(req, parent, name, node, mode).map(|i| attr(&i))
    }

    /// `unlink` (`dir` false) or `rmdir`. A file open here stays readable
    /// and writable through its handles (its chunks are held), as POSIX wants.
    pub(crate) fn remove(&self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let name = name_of(name)?;
        let open = self.open_child(parent, name);
        let epoch = {
            let mut fresh = self.fresh.lock();
            if dir {
                fresh.clear(); // the directory removed may be there
            }
            fresh.epoch()
        };
        let after = self.block(self.io.client.remove_at(InodeId(parent), name, dir))?;
        self.fresh.lock().put(epoch, [after], Instant::now());
        self.forget_if_gone(open);
        Ok(())
    }

    pub(crate) fn rename_entry(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let (name, new_name) = (name_of(name)?, name_of(new_name)?);
        let noreplace = match flags {
            0 => false,
            f if f == libc::RENAME_NOREPLACE => true,
            _ => return Err(Errno::EINVAL),
        };
        let replaced = self.open_child(new_parent, new_name);
        let client = &self.io.client;
        let epoch = {
            let mut fresh = self.fresh.lock();
            fresh.clear(); // the entry moved (and one replaced) may be there
            fresh.epoch()
        };
        let (from, to) =
            self.block(client.rename_at((InodeId(parent), name), (InodeId(new_parent), new_name), noreplace))?;
        self.names.lock().renamed(parent, name, new_parent, new_name);
        self.fresh.lock().put(epoch, [from, to], Instant::now());
        self.forget_if_gone(replaced);
        Ok(())
    }

    /// The inode of `parent/name` if this mount has it open.
    fn open_child(&self, parent: u64, name: &str) -> Option<u64> {
        if self.files.lock().is_empty() {
            return None;
        }
        let info = self.io.rt.block_on(self.io.client.lookup(InodeId(parent), name)).ok()?;
        self.open_file(info.id.0).map(|_| info.id.0)
    }

    /// After `ino` lost a name: if it has none left, its open file stops publishing.
    fn forget_if_gone(&self, ino: Option<u64>) {
        if let Some(ino) = ino {
            let _ = self.inode(ino);
        }
    }

    /// Lists directory `ino` once for a whole `opendir`..`releasedir`.
    pub(crate) fn open_dir(&self, ino: u64) -> Result<u64, Errno> {
        let epoch = self.fresh.lock().epoch();
        let client = &self.io.client;
        let (parent, entries, infos) = match self.readdirplus.load(Ordering::Relaxed) {
            true => {
                let (parent, entries) = self.block(client.read_dir_plus(InodeId(ino)))?;
                let names = entries.iter().map(|e| (e.info.id.0, file_type(e.info.kind), e.name.clone())).collect();
                (parent, names, Some(entries.into_iter().map(|e| e.info).collect()))
            }
            false => {
                let (parent, entries) = self.block(client.read_dir(InodeId(ino)))?;
                (parent, entries.into_iter().map(|e| (e.id.0, file_type(e.kind), e.name)).collect(), None)
            }
        };
        let mut all = vec![(ino, FileType::Directory, ".".to_string()), (parent.0, FileType::Directory, "..".into())];
        all.extend::<Vec<_>>(entries);
        let fh = self.new_fh();
        self.dirs.lock().insert(fh, Listing { entries: all, infos, read: (Instant::now(), epoch) });
        Ok(fh)
    }

    /// The entries of open directory `fh` (`dir`) from `offset` on, as
    /// readdirplus hands them to the kernel: each with its attributes,
    /// kept by the kernel for what is left of `TTL` since they were read
    /// (nothing if this mount changed anything since). Every entry but
    /// `.` and `..` counts as a lookup. A listing read without them
    /// (beneath `.snapshots`) looks each entry up.
    pub(crate) fn plus_entries(&self, dir: u64, fh: u64, offset: u64) -> Result<Vec<PlusEntry>, Errno> {
        let (window, infos, (at, epoch)) = {
            let dirs = self.dirs.lock();
            let listing = dirs.get(&fh).ok_or(Errno::EBADF)?;
            let from = (offset as usize).min(listing.entries.len());
            let to = (from + PLUS_WINDOW).min(listing.entries.len());
            let infos = listing.infos.as_ref().map(|i| i[from.saturating_sub(2)..to.saturating_sub(2)].to_vec());
            (listing.entries[from..to].to_vec(), infos, listing.read)
        };
        let ttl = self.fresh.lock().left(epoch, at, Instant::now());
        let mut infos = infos.map(Vec::into_iter);
        let mut out = Vec::with_capacity(window.len());
        for (i, (child, kind, name)) in window.into_iter().enumerate() {
            let next = offset + i as u64 + 1;
            if next <= 2 {
                // The kernel takes nothing of `.` and `..` but their numbers and kinds.
                let attr = FileAttr { ino: fuser::INodeNo(child), kind, ..crate::attr::absent() };
                out.push(PlusEntry { name, attr, ttl: Duration::ZERO, next, counts: false });
                continue;
            }
            match infos.as_mut().and_then(Iterator::next) {
                Some(info) => out.push(PlusEntry { attr: self.attr_of(&info), name, ttl, next, counts: true }),
                None => match self.lookup_entry(dir, OsStr::new(&name)) {
                    Ok(attr) => out.push(PlusEntry { name, attr, ttl: crate::fs::TTL, next, counts: false }),
                    Err(e) if e == Errno::ENOENT => {} // gone since the listing was read
                    Err(e) => return Err(e),
                },
            }
        }
        Ok(out)
    }
}

/// Entries looked at by one readdirplus: more than fit in its reply.
const PLUS_WINDOW: usize = 256;

/// One entry of a readdirplus reply.
pub(crate) struct PlusEntry {
    pub name: String,
    pub attr: FileAttr,
    pub ttl: Duration,
    /// The offset of the entry after it.
    pub next: u64,
    /// Handing it to the kernel counts as a lookup of its inode here.
    pub counts: bool,
}
