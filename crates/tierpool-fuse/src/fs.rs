//! The FUSE callbacks: each one answers from the coordinator (metadata) or
//! from an [`OpenFile`] (contents), through the helpers of `namespace.rs`
//! and `files.rs`, and turns errors into errno values once (`errno.rs`).

use crate::attr::attr;
use crate::cache::ChunkCache;
use crate::errno::errno;
use crate::fresh::Fresh;
use crate::known::KnownDirs;
use crate::names::Names;
use crate::namespace::Listing;
use crate::open_file::{Io, OpenFile};
use crate::watch::Watch;
use crate::xattr;
use fuser::{
    Errno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tierpool_client::{Background, Client, InodeInfo, Step};
use tierpool_types::{ByteSize, InodeId};
use tokio::runtime::Handle;

/// How long the kernel may keep attributes and names when the mount does
/// not follow the pool's changes (short: other clients change the
/// namespace too); see `watch.rs` for when it may keep them longer.
pub(crate) const TTL: Duration = Duration::from_secs(1);
/// Block size `statfs` reports.
pub(crate) const BLOCK: u32 = 4096;
/// Longest name of a directory entry, as `statfs` reports it.
pub(crate) const NAME_MAX: usize = 255;
/// How often the inodes open here are declared held to the coordinator
/// (well within its grace period, so an unlinked open file keeps its chunks).
const HOLD_EVERY: Duration = Duration::from_secs(2);

/// Settings of a mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Chunk versions kept in memory for reads.
    pub cache: ByteSize,
    /// Unsent writes one open file may hold before it sends some.
    pub dirty: ByteSize,
}

/// An open file handle.
pub(crate) struct OpenHandle {
    pub(crate) ino: u64,
    pub(crate) file: Arc<OpenFile>,
    pub(crate) write: bool,
    pub(crate) append: bool,
}

/// Open files by inode, with the number of handles open on each.
pub(crate) type OpenFiles = HashMap<u64, (Arc<OpenFile>, usize)>;

/// The file system: see the crate documentation.
pub struct TierpoolFs {
    pub(crate) io: Io,
    pub(crate) files: Arc<Mutex<OpenFiles>>,
    pub(crate) handles: Mutex<HashMap<u64, OpenHandle>>,
    /// Listings of open directories.
    pub(crate) dirs: Mutex<HashMap<u64, Listing>>,
    /// Where each inode the kernel knows was met (for the ops that take a path).
    pub(crate) names: Arc<Mutex<Names>>,
    /// Entries beneath `.snapshots` the kernel was given, by number.
    pub(crate) snaps: Mutex<crate::snapshots::SnapInodes>,
    /// Directories as this mount's last change in each left them, files
    /// as their last publish here did, files made here (see `fresh.rs`).
    pub(crate) fresh: Arc<Mutex<Fresh>>,
    /// Whether the kernel may keep answers long (see `watch.rs`).
    pub(crate) watch: Arc<Watch>,
    /// Directories whose every name is known here (see `known.rs`).
    pub(crate) known: Arc<Mutex<KnownDirs>>,
    next_fh: AtomicU64,
    /// The kernel maps files opened with `direct_io` (see `open_flags`).
    direct_mmap: AtomicBool,
    /// Renews the holds on open inodes while the mount lives.
    holds: Option<Background>,
    /// Files this mount answered the create of, not yet made in the pool
    /// (see `making.rs`).
    pub(crate) unmade: crate::making::Unmade,
    /// What new files are given, by directory (see `making.rs`).
    pub(crate) templates: Mutex<crate::making::Templates>,
    /// Makes the files that waited long enough.
    making: Option<Background>,
    /// The contents the kernel may still hold pages of (`kept_pages.rs`).
    pub(crate) kept_pages: Mutex<crate::kept_pages::KeptPages>,
}

impl TierpoolFs {
    pub fn new(client: Client, rt: Handle, opts: MountOptions) -> TierpoolFs {
        let io = Io {
            client,
            rt,
            cache: Arc::new(Mutex::new(ChunkCache::new(opts.cache.0))),
            fetching: Arc::default(),
            dirty_limit: opts.dirty.0,
            machine: Arc::default(),
        };
        // Which machine's log answers from now on (a restart of it later
        // fails the next `fsync`).
        if let Err(e) = io.sync_log() {
            tracing::warn!("the coordinator's log could not be fsynced at the start: {}", e.message);
        }
        let mut fs = TierpoolFs {
            io,
            files: Arc::default(),
            handles: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            names: Arc::default(),
            snaps: Mutex::default(),
            fresh: Arc::new(Mutex::new(Fresh::new(TTL))),
            watch: Arc::default(),
            known: Arc::default(),
            next_fh: AtomicU64::new(1),
            direct_mmap: AtomicBool::new(false),
            holds: None,
            unmade: Arc::default(),
            templates: Mutex::default(),
            making: None,
            kept_pages: Mutex::default(),
        };
        fs.holds = Some(fs.start_holds());
        fs.making = Some(fs.start_making());
        fs
    }

    /// What following the pool's changes takes (see [`crate::watch::follow`]).
    pub(crate) fn watch_parts(&self) -> crate::watch::Parts {
        crate::watch::Parts {
            client: self.io.client.clone(),
            rt: self.io.rt.clone(),
            watch: Arc::downgrade(&self.watch),
            fresh: Arc::downgrade(&self.fresh),
            names: Arc::downgrade(&self.names),
            known: Arc::downgrade(&self.known),
        }
    }

    /// Renews this mount's holds on its open inodes every `HOLD_EVERY`,
    /// for as long as the mount lives.
    fn start_holds(&self) -> Background {
        let (client, files) = (self.io.client.clone(), Arc::downgrade(&self.files));
        let session = std::process::id() as u64 ^ crate::attr::time_ns().rotate_left(17);
        let held = Arc::new(AtomicBool::new(false));
        Background::every_on(&self.io.rt, "hold renewal", HOLD_EVERY, move || {
            let (client, files, held) = (client.clone(), files.clone(), held.clone());
            async move {
                let Some(files) = files.upgrade() else { return Ok(Step::Stop) };
                // The pool inodes read (a snapshot's file is open under the mount's own number;
                // a file not yet made is not there).
                let inodes: Vec<InodeId> =
                    files.lock().values().filter(|(f, _)| !f.unmade()).map(|(f, _)| f.inode()).collect();
                if inodes.is_empty() && !held.load(Ordering::Relaxed) {
                    return Ok(Step::Continue);
                }
                let holding = !inodes.is_empty();
                client.hold(session, inodes).await?;
                held.store(holding, Ordering::Relaxed);
                Ok(Step::Continue)
            }
        })
    }

    /// Runs a call to the pool, once every file answered here is made
    /// there (see `making.rs`), on the shared runtime.
    pub(crate) fn block<T>(&self, f: impl std::future::Future<Output = tierpool_types::Result<T>>) -> Result<T, Errno> {
        self.settle();
        self.io.rt.block_on(f).map_err(|e| errno(&e))
    }

    /// As [`block`](Self::block), run on this thread's own runtime
    /// ([`Io::wait`]): for the calls of requests the kernel sends often.
    pub(crate) fn ask<T>(&self, f: impl std::future::Future<Output = tierpool_types::Result<T>>) -> Result<T, Errno> {
        self.settle();
        self.io.wait(f).map_err(|e| errno(&e))
    }

    pub(crate) fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn open_file(&self, ino: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().get(&ino).map(|(f, _)| f.clone())
    }

    /// The inode as this mount shows it: an open file's local view, else the
    /// coordinator's (an unlinked file stays visible through its handles).
    pub(crate) fn inode(&self, ino: u64) -> Result<InodeInfo, Errno> {
        if crate::snapshots::is_snap(ino) {
            return match (self.snap_inode(ino, false), self.open_file(ino)) {
                // Its snapshot removed while the file is open here: the
                // file as it was opened answers (its chunks are held), as
                // an unlinked file's handles do. (The kernel asks for the
                // attributes before it reads through its page cache.)
                (Err(e), Some(f)) if e == Errno::ENOENT || e == Errno::ESTALE => {
                    Ok(crate::snapshots::shown(f.info(), ino))
                }
                (r, _) => r,
            };
        }
        match self.open_file(ino) {
            // Not in the pool yet: its own view is all there is.
            Some(f) if f.unmade() => return Ok(f.info()),
            _ => self.settle(),
        }
        let fetched = self.io.wait(self.io.client.stat_inode(InodeId(ino), false));
        match (fetched, self.open_file(ino)) {
            (Ok(i), Some(f)) => {
                f.refresh(i);
                Ok(f.info())
            }
            (Ok(i), None) => Ok(i),
            (Err(e), Some(f)) if e.kind == tierpool_types::ErrorKind::NotFound => {
                f.mark_unlinked();
                Ok(f.info())
            }
            (Err(e), _) => Err(errno(&e)),
        }
    }

    pub(crate) fn attr_of(&self, info: &InodeInfo) -> FileAttr {
        match self.open_file(info.id.0) {
            Some(f) => attr(&f.info()),
            None => attr(info),
        }
    }

    pub(crate) fn handle(&self, fh: FileHandle) -> Result<(u64, Arc<OpenFile>, bool, bool), Errno> {
        let h = self.handles.lock();
        let h = h.get(&fh.0).ok_or(Errno::EBADF)?;
        Ok((h.ino, h.file.clone(), h.write, h.append))
    }
}

/// A UTF-8 entry name of at most `NAME_MAX` bytes.
pub(crate) fn name_of(name: &OsStr) -> Result<&str, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if name.len() > NAME_MAX {
        return Err(Errno::from_i32(libc::ENAMETOOLONG));
    }
    Ok(name)
}

pub(crate) fn ns(t: TimeOrNow) -> u64 {
    let t = match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    };
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Files up to this size opened read-only keep the kernel's page cache
/// (see `open_flags`). Programs that read in small pieces (`tar` 10 KiB at a
/// time, Python's buffered files 8 KiB, `grep`, compilers) read files of
/// every size, a source tree's archives and libraries too: through the
/// cache each costs a request per read-ahead rather than one per read, and
/// nothing at all once its pages are kept. Larger files, the ones analytics
/// reads whole in large pieces, go around it (one copy fewer: a 512 MiB
/// file read 1 MiB at a time ran at 2.1 GB/s direct, 1.2 through the
/// cache here).
pub(crate) const CACHED_MAX: u64 = 64 << 20;

/// How the kernel treats a file handle (`size`: the file's at the open).
///
/// - Read-only handles of files up to [`CACHED_MAX`] keep the kernel's
///   page cache: a program's small reads (`tar`'s 10 KiB) are served from
///   the kernel's read-ahead, one request per read-ahead rather than one
///   per read.
///   An open drops the cache (no `FOPEN_KEEP_CACHE`), so it still reads
///   what was published before it (close-to-open), unless the pages the
///   kernel holds are of the very contents published now (`open` and
///   `kept_pages.rs`): then it keeps them. The
///   kernel drops the pages that a write through another handle here
///   covers (before it sends that write) and those a truncate cuts, so
///   processes on this machine still see each other's writes at once
///   (`fuse_posix.rs`).
/// - Other handles bypass it (`direct_io`): bytes go between the program's
///   memory and the mount's open file in one copy (large reads are faster
///   so, and the chunk cache is their only cache), and every read through
///   them sees the mount's latest state. `mmap` still works where the
///   kernel allows it on such handles (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux
///   6.6); on older kernels only write-only handles (which cannot be
///   mapped) bypass the page cache.
///
/// Read-only handles opened (not created) are closed without a `FLUSH`
/// (`FOPEN_NOFLUSH`): they have nothing to publish (the handles that wrote
/// publish at their own close), and `fcntl` locks are the kernel's own.
/// (A file created read-only is closed with one: `create`.)
fn open_flags(flags: i32, size: u64, direct_mmap: bool) -> FopenFlags {
    let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY;
    let direct = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => size > CACHED_MAX && direct_mmap,
        libc::O_WRONLY => true,
        _ => direct_mmap,
    };
    let mut fopen = FopenFlags::empty();
    if direct {
        fopen |= FopenFlags::FOPEN_DIRECT_IO;
    }
    if read_only {
        fopen |= FopenFlags::FOPEN_NOFLUSH;
    }
    fopen
}

fn reply_entry(r: Result<FileAttr, Errno>, ttl: Duration, reply: ReplyEntry) {
    match r {
        Ok(a) => reply.entry(&ttl, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(r: Result<(), Errno>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for TierpoolFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        // Large requests: writes and reads of up to 1 MiB at a time.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_BIG_WRITES | fuser::InitFlags::FUSE_MAX_PAGES);
        let direct_mmap = config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_ok();
        self.direct_mmap.store(direct_mmap, Ordering::Relaxed);
        // Listings carry their entries' attributes (readdirplus), so reading
        // a directory and then each of its entries (`ls -l`, `tar c`,
        // `find`) costs a round trip per 256 entries, not one a name.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DO_READDIRPLUS);
        let _ = config.set_max_write(crate::attr::IO_BLOCK).or_else(|max| config.set_max_write(max));
        let _ = config.set_max_readahead(crate::attr::IO_BLOCK).or_else(|max| config.set_max_readahead(max));
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let began = Instant::now();
        match self.lookup_entry(parent.0, name) {
            // A name that is not there is remembered by the kernel as long
            // as one that is (a negative entry: node 0): creating a file
            // then costs no lookup. This mount's own creates, renames and
            // links replace it at once; another client's within `TTL` (the
            // feed does not know what the kernel keeps as missing).
            // (Not beneath `.snapshots`, which snapshots change.)
            Err(e)
                if e == Errno::ENOENT
                    && !crate::snapshots::is_snap(parent.0)
                    && name != crate::snapshots::SNAPSHOTS =>
            {
                reply.entry(&TTL, &crate::attr::absent(), Generation(0))
            }
            // Snapshots come and go without a change to any inode: not
            // followed by the feed.
            r if crate::snapshots::is_snap(parent.0) || name == crate::snapshots::SNAPSHOTS => {
                reply_entry(r, TTL, reply)
            }
            // An open file answers with its own view, which the kernel does
            // not order against notifications as it does fetched attributes.
            Ok(a) if self.open_file(a.ino.0).is_some() => reply_entry(Ok(a), TTL, reply),
            r => reply_entry(r, self.watch.ttl(began), reply),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.names.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let began = Instant::now();
        // The re-read the kernel makes of a directory this mount just
        // changed, or of a file it published (unless open here: then its
        // own view answers).
        let kept = match self.open_file(ino.0) {
            None => self.fresh.lock().take(ino.0, Instant::now()),
            Some(_) => None,
        };
        if let Some((i, left)) = kept {
            return reply.attr(&left, &attr(&i));
        }
        // The re-read after a read of a file this mount just opened.
        let opened = self.fresh.lock().opened_left(ino.0, Instant::now());
        if let Some((left, f)) = opened.zip(self.open_file(ino.0)) {
            return reply.attr(&left, &attr(&f.info()));
        }
        match self.inode(ino.0) {
            Ok(i) if crate::snapshots::is_snap(ino.0) || self.open_file(ino.0).is_some() => reply.attr(&TTL, &attr(&i)),
            Ok(i) => reply.attr(&self.watch.ttl(began), &attr(&i)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = tierpool_client::InodeChange { mode, uid, gid, atime: atime.map(ns), mtime: mtime.map(ns) };
        let kept = (size.is_none() && change != Default::default() && self.writable(ino.0).is_ok())
            .then(|| self.keep_for_publish(ino.0, &change))
            .flatten();
        if let Some(i) = kept {
            return reply.attr(&TTL, &attr(&i));
        }
        self.fresh.lock().forget(ino.0);
        let changed = self.writable(ino.0).and_then(|()| self.set_attr(ino.0, &change, size));
        self.fresh.lock().forget(ino.0);
        match changed {
            Ok(i) => reply.attr(&TTL, &attr(&i)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.inode(ino.0) {
            Ok(i) if i.kind == tierpool_client::InodeKind::Symlink => reply.data(i.target.as_bytes()),
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let made = self.writable(parent.0).and_then(|()| self.make_node(req, parent.0, name, mode & !umask, rdev));
        reply_entry(made, TTL, reply)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let node = tierpool_client::NewNode::Dir;
        let made = self.writable(parent.0).and_then(|()| self.make(req, parent.0, name, node, mode & !umask));
        reply_entry(made.map(|i| attr(&i)), TTL, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.writable_entry(parent.0, name).and_then(|()| self.remove(parent.0, name, false)), reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(self.writable_entry(parent.0, name).and_then(|()| self.remove(parent.0, name, true)), reply)
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let made = self.writable(parent.0).and_then(|()| target.to_str().ok_or(Errno::EINVAL)).and_then(|t| {
            let node = tierpool_client::NewNode::Symlink { target: t.to_string() };
            self.make(req, parent.0, link_name, node, 0o777)
        });
        reply_entry(made.map(|i| attr(&i)), TTL, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let moved = (self.writable_entry(parent.0, name).and_then(|()| self.writable(newparent.0)))
            .and_then(|()| self.rename_entry(parent.0, name, newparent.0, newname, flags.bits()));
        reply_empty(moved, reply)
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let linked = (self.writable(ino.0).and_then(|()| self.writable(newparent.0)))
            .and_then(|()| name_of(newname))
            .and_then(|n| {
                let _changing = self.watch.changing();
                let epoch = {
                    let mut fresh = self.fresh.lock();
                    fresh.forget(ino.0); // its link count changes
                    fresh.epoch()
                };
                let linked = self.ask(self.io.client.link_at(InodeId(ino.0), InodeId(newparent.0), n));
                let (i, dir) = self.known_after(linked, &[newparent.0], |known, _| known.added(newparent.0, n))?;
                self.names.lock().met(ino.0, newparent.0, n);
                let mut fresh = self.fresh.lock();
                fresh.put(epoch, [dir], Instant::now());
                fresh.given_stale(ino.0);
                fresh.own(&i);
                drop(fresh);
                // Open here: its view takes the new link count (its contents stay).
                if let Some(f) = self.open_file(ino.0) {
                    f.refresh(InodeInfo { chunks: Vec::new(), ..i.clone() });
                }
                Ok(i)
            })
            .map(|i| self.attr_of(&i));
        reply_entry(linked, TTL, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = match crate::snapshots::is_snap(ino.0) {
            true => self.snap_open(ino.0, flags.0).map(|fh| (fh, false)),
            false => self.open_handle(ino.0, flags.0),
        };
        match opened {
            Ok((fh, keep)) => {
                let size = self.handle(FileHandle(fh)).map_or(0, |(_, f, _, _)| f.size());
                let mut fopen = open_flags(flags.0, size, self.direct_mmap.load(Ordering::Relaxed));
                if keep && !fopen.contains(FopenFlags::FOPEN_DIRECT_IO) {
                    fopen |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                reply.opened(FileHandle(fh), fopen)
            }
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (began, foreign) = (Instant::now(), self.fresh.lock().foreign());
        match self.writable(parent.0).and_then(|()| self.create_file(req, parent.0, name, mode & !umask, flags)) {
            Ok((a, fh, made)) => {
                // Closed with a FLUSH even if read-only: a file answered here
                // is made in the pool by it (`making.rs`).
                let fopen =
                    open_flags(flags, a.size, self.direct_mmap.load(Ordering::Relaxed)) - FopenFlags::FOPEN_NOFLUSH;
                // A file made here is new to the kernel, which makes the
                // inode from this answer: kept long while the feed is
                // followed and no other client's change came meanwhile, and
                // told again of a change that beats it there (`watch.rs`).
                // An existing file opened is not (the kernel may hold it,
                // and does not order this answer against a notification).
                let long = self.watch.ttl(began);
                let ttl = match made && long > TTL {
                    true if self.fresh.lock().made_long(a.ino.0, foreign, Instant::now(), long) => long,
                    _ => TTL,
                };
                reply.created(&ttl, &a, Generation(0), FileHandle(fh), fopen)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let pieces = self.handle(fh).and_then(|(_, f, _, _)| f.read(&self.io, offset, size).map_err(|e| errno(&e)));
        match pieces {
            Ok(p) if p.len() == 1 => reply.data(&p[0]),
            Ok(p) => reply.data(&p.concat()),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let written = self.handle(fh).and_then(|(_, f, write, append)| {
            if !write {
                return Err(Errno::EBADF);
            }
            f.write(&self.io, offset, data, append).map_err(|e| errno(&e))
        });
        match written {
            Ok(_) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let r = self
            .handle(fh)
            .and_then(|(ino, f, _, _)| self.publishing(ino, &f, || f.publish(&self.io)).map_err(|e| errno(&e)));
        reply_empty(r, reply)
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let r = self
            .handle(fh)
            .and_then(|(ino, f, _, _)| self.publishing(ino, &f, || f.sync(&self.io)).map_err(|e| errno(&e)));
        reply_empty(r, reply)
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Entries made, removed or moved were acknowledged once written: now fsynced
        // (with the files answered here made first).
        self.settle();
        reply_empty(self.io.sync_log().map_err(|e| errno(&e)), reply)
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(self.close_handle(fh.0), reply)
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let opened = match crate::snapshots::is_snap(ino.0) {
            true => self.snap_open_dir(ino.0),
            false => self.open_dir(ino.0),
        };
        match opened {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let dirs = self.dirs.lock();
        let Some(listing) = dirs.get(&fh.0) else { return reply.error(Errno::EBADF) };
        for (i, (child, kind, name)) in listing.entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*child), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok()
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let entries = match self.plus_entries(ino.0, fh.0, offset) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        for entry in entries {
            if reply.add(entry.attr.ino, entry.next, &entry.name, &entry.ttl, &entry.attr, Generation(0)) {
                break;
            }
            if entry.counts {
                self.names.lock().met(entry.attr.ino.0, ino.0, &entry.name);
            }
        }
        reply.ok()
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.dirs.lock().remove(&fh.0);
        reply.ok()
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.get_xattr(ino.0, name.to_str().unwrap_or("")) {
            Ok(v) => xattr::reply(&v, size, reply),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.inode(ino.0) {
            Ok(i) => xattr::reply(&xattr::names(&i), size, reply),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // Attributes of its own, or a control acting on others (see `controls.rs`).
        self.fresh.lock().clear();
        let set = self.writable(ino.0).and_then(|()| self.set_xattr(ino.0, name.to_str().unwrap_or(""), value));
        self.fresh.lock().clear();
        reply_empty(set, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        // `chown` removes `security.capability` first: answered without a round trip.
        let name = name.to_str().unwrap_or("");
        let r = match xattr::is_ours(name) {
            true => self.inode(ino.0).and_then(|_| Err(xattr::remove_error(name))),
            false => Err(xattr::remove_error(name)),
        };
        reply_empty(r, reply)
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.block(self.io.client.usage(true, false)) {
            Ok(s) => {
                let (mut cap, mut used) = (0u64, 0u64);
                for w in &s.workers {
                    cap += w.record.mem_capacity + w.record.disk_capacity;
                    if let Some(st) = &w.stats {
                        // Garbage is handed back as soon as room is needed: it is free space.
                        let t = &st.tiers;
                        used += (t.mem_used + t.disk_used).saturating_sub(t.reclaimable_bytes);
                    }
                }
                let (blocks, free) = (cap / u64::from(BLOCK), cap.saturating_sub(used) / u64::from(BLOCK));
                reply.statfs(blocks, free, free, s.inodes, u64::MAX / 2, BLOCK, NAME_MAX as u32, BLOCK);
            }
            Err(e) => reply.error(e),
        }
    }

    /// No file here takes an `ioctl`: `ENOTTY`, as on a local disk. (Every
    /// Python `open` asks whether the file is a terminal; unanswered, each
    /// was `ENOSYS` and a warning in the mount's log.)
    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::from_i32(libc::ENOTTY));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_handles_close_without_a_flush_and_small_files_keep_the_page_cache() {
        let (noflush, direct) = (FopenFlags::FOPEN_NOFLUSH, FopenFlags::FOPEN_DIRECT_IO);
        for mmap in [true, false] {
            assert_eq!(open_flags(libc::O_RDONLY, 0, mmap), noflush);
            assert_eq!(open_flags(libc::O_RDONLY | libc::O_NOFOLLOW, CACHED_MAX, mmap), noflush);
            assert_eq!(open_flags(libc::O_WRONLY, 10, mmap), direct);
            assert_eq!(open_flags(libc::O_WRONLY | libc::O_APPEND, CACHED_MAX + 1, mmap), direct);
        }
        // Handles that may be mapped bypass it only where the kernel maps such handles.
        assert_eq!(open_flags(libc::O_RDONLY, CACHED_MAX + 1, true), direct | noflush);
        assert_eq!(open_flags(libc::O_RDWR, 10, true), direct);
        assert_eq!(open_flags(libc::O_RDONLY, CACHED_MAX + 1, false), noflush);
        assert_eq!(open_flags(libc::O_RDWR, 10, false), FopenFlags::empty());
    }
}
