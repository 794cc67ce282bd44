//! Names: lookups, creation of every kind of inode with the caller as its
//! owner, unlink/rmdir, rename and directory listings, all addressed by the
//! parent directory's inode, so no path is ever resolved here.

use crate::attr::{attr, file_type};
use crate::fs::{name_of, TierpoolFs};
use crate::known::KnownDirs;
use fuser::{Errno, FileAttr, FileType, Request};
use std::ffi::OsStr;
use std::time::{Duration, Instant};
use tierpool_client::{InodeInfo, InodeKind, NewNode};
use tierpool_types::{ErrorKind, InodeId};

impl TierpoolFs {
    pub(crate) fn lookup_entry(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        if let Some(snap) = self.snap_lookup(parent, name) {
            return snap.map(|i| attr(&i));
        }
        let name = name_of(name)?;
        if self.known.lock().lacks(parent, name) && self.watch.following(Instant::now()) {
            return Err(Errno::ENOENT);
        }
        let info = self.ask(self.io.client.lookup(InodeId(parent), name))?;
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
        let _changing = self.watch.changing();
        let (epoch, began, seen) = (self.fresh.lock().epoch(), Instant::now(), self.known.lock().seen());
        let made = self.ask(self.io.client.make_at(InodeId(parent), name, node, mode & 0o7777, owner));
        let (info, dir) = self.known_after(made, &[parent], |known, (info, _)| {
            known.added(parent, name);
            if info.kind == InodeKind::Dir && self.watch.following(began) {
                known.made(info.id.0, seen);
            }
        })?;
        self.names.lock().met(info.id.0, parent, name);
        if info.kind == InodeKind::File {
            self.templates.lock().learn(&dir, &info);
        }
        let mut fresh = self.fresh.lock();
        let now = Instant::now();
        fresh.put(epoch, [dir], now);
        fresh.own(&info);
        if info.kind == InodeKind::File && fresh.epoch() == epoch + 1 {
            // Nothing changed while it was made: as the make left it, the
            // file (open here once `create` has it) answers the kernel's
            // re-reads for a while (after a write, before a chown...).
            let epoch = fresh.epoch();
            fresh.opened(epoch, info.id.0, now);
        }
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
        let _changing = self.watch.changing();
        let epoch = {
            let mut fresh = self.fresh.lock();
            fresh.clear(); // the directory or file removed may be there
            fresh.epoch()
        };
        let removed = self.ask(self.io.client.remove_at(InodeId(parent), name, dir));
        let (after, gone) = self.known_after(removed, &[parent], |known, _| known.removed(parent, name))?;
        let mut fresh = self.fresh.lock();
        fresh.put(epoch, [after], Instant::now());
        if let Some(ino) = gone {
            fresh.own_gone(ino.0);
        }
        drop(fresh);
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
        let _changing = self.watch.changing();
        let epoch = {
            let mut fresh = self.fresh.lock();
            fresh.clear(); // the entry moved (and one replaced) may be there
            fresh.epoch()
        };
        let moved = self.ask(client.rename_at((InodeId(parent), name), (InodeId(new_parent), new_name), noreplace));
        let moved = self.known_after(moved, &[parent, new_parent], |known, _| {
            known.removed(parent, name);
            known.added(new_parent, new_name);
        })?;
        self.names.lock().renamed(parent, name, new_parent, new_name);
        let mut fresh = self.fresh.lock();
        fresh.put(epoch, [moved.from, moved.to], Instant::now());
        fresh.own_ctime(moved.moved.0, moved.ctime);
        if let Some(ino) = moved.gone {
            fresh.own_gone(ino.0);
        }
        drop(fresh);
        self.forget_if_gone(replaced);
        Ok(())
    }

    /// Passes on the outcome of a change of entries of `dirs`, noting it
    /// in the directories known whole (`known.rs`) with `noted` if it was
    /// made; if it failed, its outcome may be unknown: they are forgotten.
    pub(crate) fn known_after<T>(
        &self,
        outcome: Result<T, Errno>,
        dirs: &[u64],
        noted: impl FnOnce(&mut KnownDirs, &T),
    ) -> Result<T, Errno> {
        let mut known = self.known.lock();
        match &outcome {
            Ok(t) => noted(&mut known, t),
            Err(_) => dirs.iter().for_each(|d| known.forget(*d)),
        }
        outcome
    }

    /// The inode of `parent/name` if this mount has it open.
    fn open_child(&self, parent: u64, name: &str) -> Option<u64> {
        if self.files.lock().is_empty() {
            return None;
        }
        let info = self.io.wait(self.io.client.lookup(InodeId(parent), name)).ok()?;
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
        let (parent, entries) = self.ask(self.io.client.read_dir(InodeId(ino)))?;
        let mut all = vec![(ino, FileType::Directory, ".".to_string()), (parent.0, FileType::Directory, "..".into())];
        all.extend(entries.into_iter().map(|e| (e.id.0, file_type(e.kind), e.name)));
        let fh = self.new_fh();
        self.dirs.lock().insert(fh, Listing { entries: all, snap: false, read: (Instant::now(), epoch), attrs: None });
        Ok(fh)
    }

    /// The entries of open directory `fh` (`dir`) from `offset` on, as
    /// readdirplus hands them to the kernel: each with its attributes,
    /// fetched for up to `PLUS_WINDOW` entries at a time (one request) and
    /// kept for the next calls while they may be. The kernel keeps an
    /// entry for what is left of `TTL` since both its name and its
    /// attributes were read, nothing if this mount changed anything since
    /// (a name removed here is never handed out again). Every entry but
    /// `.` and `..` counts as a lookup; one gone since the listing was
    /// read is left out (and nothing is answered only at the end of the
    /// listing: that ends it). Beneath `.snapshots` each entry is looked up.
    pub(crate) fn plus_entries(&self, dir: u64, fh: u64, offset: u64) -> Result<Vec<PlusEntry>, Errno> {
        let mut from = offset as usize;
        loop {
            let (out, looked) = self.plus_window(dir, fh, from)?;
            if !out.is_empty() || looked == from {
                return Ok(out);
            }
            from = looked; // all gone: on to the next ones
        }
    }

    /// `plus_entries` of one window from `from`; and the offset after the
    /// last entry looked at (`from` at the end of the listing).
    fn plus_window(&self, dir: u64, fh: u64, from: usize) -> Result<(Vec<PlusEntry>, usize), Errno> {
        let (from, window, snap, listed, cached) = {
            let dirs = self.dirs.lock();
            let l = dirs.get(&fh).ok_or(Errno::EBADF)?;
            let from = from.min(l.entries.len());
            let size = if l.snap { SNAP_WINDOW } else { PLUS_WINDOW };
            let window = l.entries[from..(from + size).min(l.entries.len())].to_vec();
            let cached = (l.attrs.as_ref())
                .filter(|a| a.from <= from && from < a.from + a.infos.len())
                .map(|a| (a.infos[from - a.from..].to_vec(), a.read));
            (from, window, l.snap, l.read, cached)
        };
        let now = Instant::now();
        let usable = |(_, (at, epoch)): &(Vec<Option<InodeInfo>>, (Instant, u64))| {
            !self.fresh.lock().left(*epoch, *at, now).is_zero()
        };
        let (infos, read) = match cached.filter(usable) {
            Some(c) => c,
            None if snap => (Vec::new(), listed),
            None => {
                let infos = self.fetch_attrs(from, &window)?;
                if let Some(l) = self.dirs.lock().get_mut(&fh) {
                    l.attrs = Some(Attrs { from, infos: infos.0.clone(), read: infos.1 });
                }
                infos
            }
        };
        let ttl = {
            let (fresh, now) = (self.fresh.lock(), Instant::now());
            fresh.left(listed.1, listed.0, now).min(fresh.left(read.1, read.0, now))
        };
        let mut out = Vec::with_capacity(window.len());
        let mut looked = from;
        for (i, (child, kind, name)) in window.into_iter().enumerate() {
            let next = (from + i + 1) as u64;
            if from + i < 2 {
                // The kernel takes nothing of `.` and `..` but their numbers and kinds.
                let attr = FileAttr { ino: fuser::INodeNo(child), kind, ..crate::attr::absent() };
                out.push(PlusEntry { name, attr, ttl: Duration::ZERO, next, counts: false });
            } else if snap {
                match self.lookup_entry(dir, OsStr::new(&name)) {
                    Ok(attr) => out.push(PlusEntry { name, attr, ttl: crate::fs::TTL, next, counts: false }),
                    Err(e) if e == Errno::ENOENT => {} // gone since the listing was read
                    Err(e) => return Err(e),
                }
            } else {
                match infos.get(i) {
                    None => break,   // beyond what was fetched: the kernel asks again from here
                    Some(None) => {} // gone since the listing was read
                    Some(Some(info)) => out.push(PlusEntry { attr: self.attr_of(info), name, ttl, next, counts: true }),
                }
            }
            looked = next as usize;
        }
        Ok((out, looked))
    }

    /// The attributes of the entries of `window` (entries `from` on of a
    /// listing), in one request: `None` for `.`, `..` and an entry gone.
    fn fetch_attrs(&self, from: usize, window: &[(u64, FileType, String)]) -> Result<AttrsRead, Errno> {
        let epoch = self.fresh.lock().epoch();
        let dots = 2usize.saturating_sub(from).min(window.len());
        let ids: Vec<InodeId> = window[dots..].iter().map(|(child, _, _)| InodeId(*child)).collect();
        let got = match ids.is_empty() {
            true => Vec::new(),
            false => self.ask(self.io.client.stat_inodes(ids))?,
        };
        let mut infos = vec![None; dots];
        for r in got {
            infos.push(match r {
                Ok(info) => Some(info),
                Err(e) if e.kind == ErrorKind::NotFound => None,
                Err(e) => return Err(crate::errno::errno(&e)),
            });
        }
        Ok((infos, (Instant::now(), epoch)))
    }
}

/// An open directory: its entries (inode, kind, name, from `.` and `..`
/// on) as read when it was opened, when and at which epoch of `fresh`,
/// and the attributes last fetched for some of them.
pub(crate) struct Listing {
    pub entries: Vec<(u64, FileType, String)>,
    /// Beneath `.snapshots`: entries are looked up one by one.
    pub snap: bool,
    pub read: (Instant, u64),
    pub attrs: Option<Attrs>,
}

/// Attributes of entries `from..from + infos.len()` of a listing (`None`:
/// `.`, `..`, or gone), when they were read and at which epoch.
pub(crate) struct Attrs {
    from: usize,
    infos: Vec<Option<InodeInfo>>,
    read: (Instant, u64),
}

type AttrsRead = (Vec<Option<InodeInfo>>, (Instant, u64));

/// Entries whose attributes one readdirplus fetches (at most `MAX_BATCH`):
/// more than fit in its reply, kept for the calls after it.
const PLUS_WINDOW: usize = 256;
/// Entries one readdirplus beneath `.snapshots` looks up one by one: about
/// what fits in its reply.
const SNAP_WINDOW: usize = 32;

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
