//! File handles: open and create attach a handle to the inode's shared
//! [`OpenFile`]; the last release detaches it. Truncation and attribute
//! changes go through here too, so an open file's local changes and the
//! pool's view never disagree.

use crate::fs::{name_of, OpenHandle, TierpoolFs};
use crate::open_file::OpenFile;
use fuser::{Errno, FileAttr, Request};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Instant;
use tierpool_client::{InodeChange, InodeInfo, InodeKind, NewNode};
use tierpool_types::InodeId;

impl TierpoolFs {
    /// The open file of `info` (with its chunk list), one more handle on it.
    /// An existing one without local changes takes the newer contents:
    /// whoever opens sees what was published before (close-to-open).
    fn attach(&self, info: InodeInfo) -> Arc<OpenFile> {
        self.attach_keeping(info).0
    }

    /// [`attach`](Self::attach), and whether the kernel may keep the pages
    /// it holds of the file: a new open file on the very contents the
    /// last one read (`kept_pages.rs`).
    fn attach_keeping(&self, info: InodeInfo) -> (Arc<OpenFile>, bool) {
        let mut files = self.files.lock();
        match files.get_mut(&info.id.0) {
            Some((f, n)) => {
                *n += 1;
                f.refresh(info);
                (f.clone(), false)
            }
            None => {
                let (ino, contents) = (info.id.0, (info.size, info.chunks.clone()));
                let f = Arc::new(OpenFile::new(info));
                let keep = self.kept_pages.lock().opened(ino, f.seq(), &contents);
                files.insert(ino, (f.clone(), 1));
                (f, keep)
            }
        }
    }

    /// One more handle on the file `ino` if it is open here.
    fn retain(&self, ino: u64) -> Option<Arc<OpenFile>> {
        let mut files = self.files.lock();
        let (f, n) = files.get_mut(&ino)?;
        *n += 1;
        Some(f.clone())
    }

    /// One handle less on `ino`; the last one closes the open file.
    fn detach(&self, ino: u64) {
        let closed = {
            let mut files = self.files.lock();
            match files.get_mut(&ino) {
                Some((_, n)) if *n > 1 => {
                    *n -= 1;
                    None
                }
                Some(_) => files.remove(&ino).map(|(f, _)| f),
                None => None,
            }
        };
        if let Some(f) = closed {
            f.close(&self.io);
            let kept = f.kept();
            self.kept_pages.lock().closed(ino, f.seq(), kept);
        }
    }

    /// The file `ino` with its chunk list, refusing what cannot be opened.
    fn openable(&self, ino: u64) -> Result<InodeInfo, Errno> {
        let info = self.ask(self.io.client.stat_inode(InodeId(ino), true))?;
        match info.kind {
            InodeKind::File => Ok(info),
            InodeKind::Dir => Err(Errno::EISDIR),
            // Regions are memory: they are used through the region API.
            InodeKind::Region => Err(Errno::from_i32(libc::EOPNOTSUPP)),
            _ => Err(Errno::EINVAL),
        }
    }

    fn add_handle(&self, info: InodeInfo, flags: i32) -> u64 {
        let file = self.attach(info);
        self.new_handle(file, flags)
    }

    /// A handle on `file`, new here (see `making.rs`): the first one.
    pub(crate) fn add_open(&self, file: Arc<OpenFile>, flags: i32) -> u64 {
        self.files.lock().insert(file.inode().0, (file.clone(), 1));
        self.new_handle(file, flags)
    }

    fn new_handle(&self, file: Arc<OpenFile>, flags: i32) -> u64 {
        let ino = file.inode().0;
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let append = flags & libc::O_APPEND != 0;
        let fh = self.new_fh();
        self.handles.lock().insert(fh, OpenHandle { ino, file, write, append });
        fh
    }

    /// A new handle on file `ino`, and whether the kernel may keep the
    /// pages it holds of it (`kept_pages.rs`).
    pub(crate) fn open_handle(&self, ino: u64, flags: i32) -> Result<(u64, bool), Errno> {
        let epoch = self.fresh.lock().epoch();
        let (info, fetched) = match self.openable(ino) {
            Ok(i) => (i, Some(std::time::Instant::now())),
            // Unlinked but still open here: a new handle shares the open
            // file. (Else the kernel walks the path again on ESTALE, the
            // first answer for an inode gone: `errno.rs`.)
            Err(e) if e == Errno::ESTALE || e == Errno::ENOENT => match self.open_file(ino) {
                Some(f) => (InodeInfo { chunks: Vec::new(), ..f.info() }, None),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if info.origin.is_some() {
            // A file of an under-store: refused (ESTALE) if its object changed below.
            self.ask(self.io.client.check_origin(&format!("inode {ino}"), &info))?;
        }
        let (ctime, seen) = (info.ctime, fetched.is_some());
        let (file, keep) = self.attach_keeping(info);
        let fh = self.new_handle(file, flags);
        if seen && !keep && !self.fresh.lock().is_own(ino, ctime) {
            // Close-to-open for the size too (the kernel reads a cached file
            // only up to the size it holds): unless the last change was this
            // mount's own, which the kernel followed, it may hold a size from
            // before another client's publish that the feed has not told it of.
            self.watch.drop_attributes_now(ino);
        }
        if let Some(at) = fetched {
            // Its attributes as fetched serve the kernel's re-reads for a while.
            self.fresh.lock().opened(epoch, ino, at);
        }
        Ok((fh, keep))
    }

    pub(crate) fn create_file(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64, bool), Errno> {
        if let Some((info, fh)) = name.to_str().and_then(|n| self.create_here(req, parent, n, mode, flags)) {
            return Ok((self.attr_of(&info), fh, true));
        }
        let node = NewNode::File { chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE };
        let info = match self.make(req, parent, name, node, mode) {
            Ok(i) => i,
            // Another client made it first (the kernel knew the name as
            // missing): open it, unless O_EXCL. The kernel takes the file
            // for one it just made, so the checks of an open are made here.
            Err(e) if e == Errno::EEXIST && flags & libc::O_EXCL == 0 => {
                let name = name_of(name)?;
                let found = self.ask(self.io.client.lookup(InodeId(parent), name))?;
                let info = self.openable(found.id.0)?;
                if !may_open(req, &info, flags) {
                    return Err(Errno::EACCES);
                }
                self.names.lock().met(info.id.0, parent, name);
                let fh = self.add_handle(info.clone(), flags);
                if flags & libc::O_TRUNC != 0 && info.size > 0 {
                    let change = InodeChange { mode: None, uid: None, gid: None, atime: None, mtime: None };
                    self.fresh.lock().forget(info.id.0);
                    let cut = self.set_attr(info.id.0, &change, Some(0));
                    self.fresh.lock().forget(info.id.0);
                    if let Err(e) = cut {
                        let _ = self.close_handle(fh);
                        return Err(e);
                    }
                }
                let info = self.inode(info.id.0)?;
                return Ok((self.attr_of(&info), fh, false));
            }
            Err(e) => return Err(e),
        };
        let fh = self.add_handle(info.clone(), flags);
        Ok((self.attr_of(&info), fh, true))
    }

    /// Publishes what the handle's file holds and detaches the handle.
    pub(crate) fn close_handle(&self, fh: u64) -> Result<(), Errno> {
        let Some(h) = self.handles.lock().remove(&fh) else { return Err(Errno::EBADF) };
        let published = self.publishing(h.ino, &h.file, || {
            let published = h.file.publish(&self.io);
            self.detach(h.ino);
            published
        });
        published.map_err(|e| {
            tracing::error!("inode {}: could not publish on close: {e}", h.ino);
            crate::errno::errno(&e)
        })
    }

    /// Runs `publish`, which publishes what `file` (`ino`) holds: noted in
    /// `fresh` before and after if there is anything to publish, as any
    /// other change this mount makes (attributes read before it are stale).
    /// The file as published is kept there, for the kernel's re-read once
    /// it is closed, as long as the kernel may keep what it fetches.
    pub(crate) fn publishing<T>(&self, ino: u64, file: &OpenFile, publish: impl FnOnce() -> T) -> T {
        if !file.unpublished() {
            return publish();
        }
        // Left by a make outside a publish: older than what this one brings.
        file.take_made_dir();
        let _changing = self.watch.changing();
        let (epoch, began) = {
            let mut fresh = self.fresh.lock();
            fresh.forget(ino);
            (fresh.epoch(), Instant::now())
        };
        let r = publish();
        self.made_or_dropped(file);
        // What the publish left (the feed brings it back as a change).
        let left = file.take_published();
        let published = (!file.unpublished()).then(|| file.info()).filter(|i| i.nlink > 0);
        let made_dir = file.take_made_dir();
        if let (Some(dir), Some(info)) = (&made_dir, &published) {
            self.templates.lock().learn(dir, info);
        }
        let mut fresh = self.fresh.lock();
        let crossed = epoch != fresh.epoch();
        match published {
            Some(info) => fresh.put_for(epoch, [info], Instant::now(), self.watch.ttl(began)),
            None => fresh.forget(ino),
        }
        if let Some(dir) = made_dir {
            // As the publish that made the file left it (kept unless the file's put was crossed).
            let epoch = if crossed { epoch } else { fresh.epoch() };
            fresh.put(epoch, [dir], Instant::now());
        }
        for ctime in left {
            fresh.own_ctime(ino, ctime);
        }
        r
    }

    /// `chmod`, `chown` or `utimens` of a file open here with changes
    /// waiting to be published: kept by it and made with them, nothing
    /// changing in the pool yet; `None` if it has no such changes.
    pub(crate) fn keep_for_publish(&self, ino: u64, change: &InodeChange) -> Option<InodeInfo> {
        let info = self.open_file(ino)?.defer_change(&self.io, change)?;
        // No answer in flight is older than the file's view, which has the
        // change: what was given is stale, the windows of `fresh` are not.
        self.fresh.lock().given_stale(ino);
        Some(info)
    }

    /// `truncate`/`ftruncate`, `chmod`, `chown` and `utimens` made in the
    /// pool (a change an open file keeps is `keep_for_publish`).
    pub(crate) fn set_attr(&self, ino: u64, change: &InodeChange, size: Option<u64>) -> Result<InodeInfo, Errno> {
        // A directory's mode or group decides new files' group there.
        self.templates.lock().forget(ino);
        // The kernel takes what its answers leave: this mount's own changes.
        let _changing = self.watch.changing();
        if let Some(size) = size {
            // Attached for the cut, so a concurrent last close cannot drop it.
            let file = match self.retain(ino) {
                Some(f) => f,
                None => self.attach(self.openable(ino)?),
            };
            let cut = file.truncate(&self.io, size).and_then(|()| file.publish(&self.io));
            let left = file.take_published();
            self.detach(ino);
            cut.map_err(|e| crate::errno::errno(&e))?;
            let mut fresh = self.fresh.lock();
            left.into_iter().for_each(|ctime| fresh.own_ctime(ino, ctime));
        }
        if *change != InodeChange::default() {
            // Published first, so that a later publish does not move the times set now.
            if let Some(f) = self.open_file(ino) {
                f.publish(&self.io).map_err(|e| crate::errno::errno(&e))?;
            }
            let info = self.ask(self.io.client.set_inode(InodeId(ino), change))?;
            self.fresh.lock().own(&info);
            match self.open_file(ino) {
                Some(f) => f.refresh(info),
                // The inode as the change left it: no second round trip.
                None if size.is_none() => return Ok(info),
                None => {}
            }
        }
        self.inode(ino)
    }
}

/// Whether the caller of `req` may open `info` with `flags`, by its mode
/// and owners, as the kernel checks an open (`default_permissions`): root
/// always; else the owner's, group's or others' bits, the caller's groups
/// read from `/proc` (its primary group if they cannot be).
fn may_open(req: &Request, info: &InodeInfo, flags: i32) -> bool {
    if req.uid() == 0 {
        return true;
    }
    let want = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => 4,
        libc::O_WRONLY => 2,
        _ => 6,
    } | if flags & libc::O_TRUNC != 0 { 2 } else { 0 };
    let bits = if req.uid() == info.uid {
        info.mode >> 6
    } else if req.gid() == info.gid || groups_of(req.pid()).contains(&info.gid) {
        info.mode >> 3
    } else {
        info.mode
    };
    bits & want == want
}

/// The supplementary groups of process `pid` (empty if not known).
fn groups_of(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("");
    line.split_whitespace().filter_map(|g| g.parse().ok()).collect()
}
