//! The FUSE callbacks.

use crate::cache::ChunkCache;
use crate::errno::{errno, io_errno};
use crate::names::{join, Names};
use crate::xattr;
use bytes::Bytes;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tierpool_client::{Client, InodeInfo, InodeKind, PutOptions};
use tierpool_types::{ChunkAttrs, Error, ErrorKind};
use tokio::runtime::Handle;

/// How long the kernel may keep attributes and names (short: other clients
/// change the namespace too).
const TTL: Duration = Duration::from_secs(1);
const BLOCK: u32 = 4096;
/// Longest name of a directory entry, as `statfs` reports it.
const NAME_MAX: usize = 255;
/// Chunks fetched ahead of a reader.
const READ_AHEAD_CHUNKS: u64 = 2;

/// Settings of a mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Bytes of file chunks kept for reads.
    pub cache: u64,
    /// Where files open for writing are staged.
    pub staging_dir: std::path::PathBuf,
}

enum Open {
    Read { path: String, info: InodeInfo },
    Write(Staged),
}

/// A file open for writing: its bytes in a local temporary file until published.
struct Staged {
    path: String,
    file: File,
    dirty: bool,
    append: bool,
    opts: PutOptions,
}

/// The file system: see the crate documentation.
pub struct TierpoolFs {
    client: Client,
    rt: Handle,
    opts: MountOptions,
    names: Mutex<Names>,
    open: Mutex<HashMap<u64, Arc<Mutex<Open>>>>,
    next_fh: AtomicU64,
    cache: Arc<Mutex<ChunkCache>>,
    /// Chunks being fetched ahead, so each is fetched once.
    fetching: Arc<Mutex<std::collections::HashSet<(u64, u64)>>>,
    uid: u32,
    gid: u32,
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

impl TierpoolFs {
    pub fn new(client: Client, rt: Handle, opts: MountOptions) -> TierpoolFs {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let cache = Arc::new(Mutex::new(ChunkCache::new(opts.cache)));
        TierpoolFs {
            client,
            rt,
            opts,
            names: Mutex::new(Names::new()),
            open: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            cache,
            fetching: Arc::default(),
            uid,
            gid,
        }
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        self.names.lock().path(ino.0).ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        if name.len() > NAME_MAX {
            return Err(Errno::from_i32(libc::ENAMETOOLONG));
        }
        Ok(join(&self.path(parent)?, name))
    }

    fn stat(&self, path: &str) -> Result<InodeInfo, Errno> {
        self.rt.block_on(self.client.stat(path)).map_err(|e| errno(&e))
    }

    fn attr(&self, ino: u64, i: &InodeInfo) -> FileAttr {
        let kind = if i.kind == InodeKind::Dir { FileType::Directory } else { FileType::RegularFile };
        let mut size = i.size;
        // A file being written shows its staged size.
        if let Some(s) = self.staged_size(ino) {
            size = s;
        }
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time(i.mtime),
            mtime: time(i.mtime),
            ctime: time(i.ctime),
            crtime: time(i.ctime),
            kind,
            perm: (i.mode & 0o7777) as u16,
            nlink: i.nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: BLOCK,
            flags: 0,
        }
    }

    fn staged_size(&self, ino: u64) -> Option<u64> {
        let path = self.names.lock().path(ino)?;
        let open: Vec<_> = self.open.lock().values().cloned().collect();
        open.iter().find_map(|o| match &*o.lock() {
            Open::Write(s) if s.path == path => s.file.metadata().ok().map(|m| m.len()),
            _ => None,
        })
    }

    /// `chmod` and `utimens`. A file staged for writing is published first
    /// (so a later publish does not undo the new time) and keeps the new mode.
    /// Access times are not kept: `atime` shows `mtime`.
    fn set_meta(&self, path: &str, mode: Option<u32>, mtime: Option<TimeOrNow>) -> Result<(), Errno> {
        let open: Vec<_> = self.open.lock().values().cloned().collect();
        for o in open {
            if let Open::Write(s) = &mut *o.lock() {
                if s.path == path {
                    self.publish(s)?;
                    if let Some(m) = mode {
                        s.opts.mode = m;
                    }
                }
            }
        }
        let ns = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mtime = mtime.map(|t| match t {
            TimeOrNow::SpecificTime(t) => ns(t),
            TimeOrNow::Now => ns(SystemTime::now()),
        });
        self.rt.block_on(self.client.set_meta(path, mode, mtime)).map_err(|e| errno(&e))?;
        Ok(())
    }

    fn entry(&self, path: &str, reply: ReplyEntry) {
        match self.stat(path) {
            Ok(i) => {
                let ino = self.names.lock().ino(path);
                reply.entry(&TTL, &self.attr(ino, &i), Generation(0));
            }
            Err(e) => reply.error(e),
        }
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Mutex<Open>>, Errno> {
        self.open.lock().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn add(&self, o: Open) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.open.lock().insert(fh, Arc::new(Mutex::new(o)));
        FileHandle(fh)
    }

    /// A staging file for `path`, holding its current bytes unless `truncate`.
    fn stage(&self, path: &str, info: Option<&InodeInfo>, truncate: bool, append: bool) -> Result<Staged, Errno> {
        let mut file = tempfile::tempfile_in(&self.opts.staging_dir).map_err(|e| io_errno(&e))?;
        let mut opts = PutOptions::default();
        if let Some(i) = info {
            opts.chunk_size = i.chunk_size.max(BLOCK.into());
            opts.attrs = i.attrs;
            opts.mode = i.mode;
            if !truncate && i.size > 0 {
                let f = &mut file;
                let r: tierpool_types::Result<()> = self.rt.block_on(async {
                    let mut chunks = self.client.chunk_stream(path, i);
                    while let Some(c) = chunks.next().await? {
                        f.write_all(&c).map_err(Error::from)?;
                    }
                    Ok(())
                });
                r.map_err(|e| errno(&e))?;
            }
        }
        Ok(Staged { path: path.to_string(), file, dirty: truncate && info.is_some_and(|i| i.size > 0), append, opts })
    }

    /// Publishes a staged file if it changed: the new version replaces the old at once.
    fn publish(&self, s: &mut Staged) -> Result<(), Errno> {
        if !s.dirty {
            return Ok(());
        }
        let f = s.file.try_clone().map_err(|e| io_errno(&e))?;
        let r: tierpool_types::Result<InodeInfo> = self.rt.block_on(async {
            let mut w = self.client.create(&s.path, &s.opts).await?;
            let mut buf = vec![0u8; s.opts.chunk_size as usize];
            let mut at = 0u64;
            loop {
                let n = match f.read_at(&mut buf, at) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        w.abort().await;
                        return Err(Error::from(e));
                    }
                };
                at += n as u64;
                if let Err(e) = w.write(&buf[..n]).await {
                    w.abort().await;
                    return Err(e);
                }
            }
            w.close().await
        });
        r.map_err(|e| errno(&e))?;
        s.dirty = false;
        Ok(())
    }

    /// Bytes `offset..offset+size` of a file open for reading, through the chunk cache.
    fn read_file(&self, path: &str, info: &InodeInfo, offset: u64, size: u32) -> Result<Vec<u8>, Error> {
        let end = (offset + u64::from(size)).min(info.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let cs = info.chunk_size;
        let mut out = Vec::with_capacity((end - offset) as usize);
        let (first, last) = (offset / cs, (end - 1) / cs);
        for idx in first..=last {
            let data = self.chunk(path, info, idx)?;
            let start = idx * cs;
            let from = (offset.max(start) - start) as usize;
            let to = ((end - start) as usize).min(data.len());
            out.extend_from_slice(&data[from..to]);
        }
        // Fetch the next chunks ahead while the reader consumes this one.
        for next in last + 1..=last + READ_AHEAD_CHUNKS {
            let key = (info.id.0, next);
            if next * cs >= info.size || self.cache.lock().contains(key) || !self.fetching.lock().insert(key) {
                continue;
            }
            let (c, p, i) = (self.client.clone(), path.to_string(), info.clone());
            let (cache, fetching) = (self.cache.clone(), self.fetching.clone());
            self.rt.spawn(async move {
                if let Ok(d) = c.read_chunk(&p, &i, next).await {
                    cache.lock().insert(key, d);
                }
                fetching.lock().remove(&key);
            });
        }
        Ok(out)
    }

    fn chunk(&self, path: &str, info: &InodeInfo, idx: u64) -> Result<Bytes, Error> {
        if let Some(d) = self.cache.lock().get((info.id.0, idx)) {
            return Ok(d);
        }
        let d = self.rt.block_on(self.client.read_chunk(path, info, idx))?;
        self.cache.lock().insert((info.id.0, idx), d.clone());
        Ok(d)
    }

    fn remove(&self, parent: INodeNo, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        let r = (|| {
            let path = self.child(parent, name)?;
            let i = self.stat(&path)?;
            match (dir, i.kind == InodeKind::Dir) {
                (true, false) => return Err(Errno::ENOTDIR),
                (false, true) => return Err(Errno::EISDIR),
                _ => {}
            }
            self.rt.block_on(self.client.remove(&path, false)).map_err(|e| errno(&e))?;
            self.names.lock().removed(&path);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl Filesystem for TierpoolFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        // Large requests: writes and reads of up to 1 MiB at a time.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_BIG_WRITES | fuser::InitFlags::FUSE_MAX_PAGES);
        let _ = config.set_max_write(1 << 20).or_else(|max| config.set_max_write(max));
        let _ = config.set_max_readahead(1 << 20).or_else(|max| config.set_max_readahead(max));
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name) {
            Ok(p) => self.entry(&p, reply),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.path(ino).and_then(|p| self.stat(&p)) {
            Ok(i) => reply.attr(&TTL, &self.attr(ino.0, &i)),
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
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        tracing::debug!("setattr ino {ino:?} size {size:?} fh {fh:?} mode {mode:?}");
        // The pool keeps no owners: every file belongs to the mounting user,
        // and giving one away is refused as it is to an unprivileged user.
        if uid.is_some_and(|u| u != self.uid) || gid.is_some_and(|g| g != self.gid) {
            return reply.error(Errno::EPERM);
        }
        let r = (|| {
            let path = self.path(ino)?;
            if mode.is_some() || mtime.is_some() {
                self.set_meta(&path, mode, mtime)?;
            }
            if let Some(size) = size {
                // The kernel truncates for O_TRUNC after `open`, without a
                // handle: apply it to every handle staging this file.
                let staged: Vec<_> = match fh.and_then(|fh| self.handle(fh).ok()) {
                    Some(o) => vec![o],
                    None => self.open.lock().values().cloned().collect(),
                };
                let mut applied = false;
                for o in staged {
                    if let Open::Write(s) = &mut *o.lock() {
                        if s.path == path {
                            s.file.set_len(size).map_err(|e| io_errno(&e))?;
                            s.dirty = true;
                            applied = true;
                        }
                    }
                }
                if !applied {
                    let info = self.stat(&path)?;
                    if info.kind == InodeKind::Dir {
                        return Err(Errno::EISDIR);
                    }
                    let mut s = self.stage(&path, Some(&info), size == 0, false)?;
                    s.file.set_len(size).map_err(|e| io_errno(&e))?;
                    s.dirty = true;
                    self.publish(&mut s)?;
                }
            }
            let i = self.stat(&path)?;
            Ok(self.attr(ino.0, &i))
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let path = match self.child(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        // Directories are made with 0o755; other permission bits follow at once.
        let mode = mode & !umask & 0o7777;
        let made = self.rt.block_on(async {
            self.client.mkdir(&path, false).await?;
            if mode != 0o755 {
                self.client.set_meta(&path, Some(mode), None).await?;
            }
            Ok::<_, Error>(())
        });
        match made {
            Ok(()) => self.entry(&path, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, false, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, true, reply)
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
        if flags.bits() != 0 {
            return reply.error(Errno::EINVAL);
        }
        let r = (|| {
            let (from, to) = (self.child(parent, name)?, self.child(newparent, newname)?);
            self.rt.block_on(self.client.rename(&from, &to)).map_err(|e| errno(&e))?;
            self.names.lock().renamed(&from, &to);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        tracing::debug!("open ino {ino:?} flags {:#x}", flags.0);
        let r = (|| {
            let path = self.path(ino)?;
            let info = self.stat(&path)?;
            if info.kind == InodeKind::Dir {
                return Err(Errno::EISDIR);
            }
            if flags.acc_mode() == OpenAccMode::O_RDONLY {
                return Ok(self.add(Open::Read { path, info }));
            }
            let (trunc, append) = (flags.0 & libc::O_TRUNC != 0, flags.0 & libc::O_APPEND != 0);
            Ok(self.add(Open::Write(self.stage(&path, Some(&info), trunc, append)?)))
        })();
        match r {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let path = self.child(parent, name)?;
            let opts = PutOptions {
                mode: mode & !umask & 0o7777,
                attrs: ChunkAttrs::default(),
                overwrite: false,
                ..PutOptions::default()
            };
            // The file exists (empty) from now on, as POSIX wants.
            let info = self.rt.block_on(self.client.put_bytes(&path, Bytes::new(), &opts)).map_err(|e| {
                if e.kind == ErrorKind::AlreadyExists {
                    Errno::EEXIST
                } else {
                    errno(&e)
                }
            })?;
            let mut s = self.stage(&path, Some(&info), true, flags & libc::O_APPEND != 0)?;
            s.opts.overwrite = true;
            let ino = self.names.lock().ino(&path);
            let fh = self.add(Open::Write(s));
            Ok((self.attr(ino, &info), fh))
        })();
        match r {
            Ok((attr, fh)) => reply.created(&TTL, &attr, Generation(0), fh, FopenFlags::empty()),
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
        let o = match self.handle(fh) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        let g = o.lock();
        match &*g {
            Open::Read { path, info } => match self.read_file(path, info, offset, size) {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(errno(&e)),
            },
            Open::Write(s) => {
                let mut buf = vec![0u8; size as usize];
                let mut n = 0;
                while n < buf.len() {
                    match s.file.read_at(&mut buf[n..], offset + n as u64) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) => return reply.error(io_errno(&e)),
                    }
                }
                reply.data(&buf[..n]);
            }
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
        let o = match self.handle(fh) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        let mut g = o.lock();
        match &mut *g {
            Open::Write(s) => {
                let at = if s.append { s.file.metadata().map(|m| m.len()).unwrap_or(offset) } else { offset };
                match s.file.write_all_at(data, at) {
                    Ok(()) => {
                        s.dirty = true;
                        reply.written(data.len() as u32);
                    }
                    Err(e) => reply.error(io_errno(&e)),
                }
            }
            Open::Read { .. } => reply.error(Errno::EBADF),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let r = self.handle(fh).and_then(|o| match &mut *o.lock() {
            Open::Write(s) => self.publish(s),
            Open::Read { .. } => Ok(()),
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.flush(req, ino, fh, LockOwner(0), reply)
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
        let o = self.open.lock().remove(&fh.0);
        if let Some(o) = o {
            if let Open::Write(s) = &mut *o.lock() {
                if let Err(e) = self.publish(s) {
                    tracing::error!("{}: could not publish on release: {e:?}", s.path);
                    return reply.error(e);
                }
            }
        }
        reply.ok()
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let entries = match self.rt.block_on(self.client.list(&path)) {
            Ok(e) => e,
            Err(e) => return reply.error(errno(&e)),
        };
        let parent = if path == "/" {
            1
        } else {
            self.names.lock().ino(path.rsplit_once('/').map_or("/", |(d, _)| if d.is_empty() { "/" } else { d }))
        };
        let mut all =
            vec![(ino.0, FileType::Directory, ".".to_string()), (parent, FileType::Directory, "..".to_string())];
        for e in entries {
            let kind = if e.info.kind == InodeKind::Dir { FileType::Directory } else { FileType::RegularFile };
            let child = self.names.lock().ino(&join(&path, &e.name));
            all.push((child, kind, e.name));
        }
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok()
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let value =
            self.path(ino).and_then(|p| self.stat(&p)).and_then(|i| xattr::get(name.to_str().unwrap_or(""), &i.attrs));
        match value {
            Ok(v) => xattr::reply(&v, size, reply),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.path(ino).and_then(|p| self.stat(&p)) {
            Ok(_) => xattr::reply(&xattr::names(), size, reply),
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
        let done = self.path(ino).and_then(|p| {
            let (priority, pinned) = match xattr::parse(name.to_str().unwrap_or(""), value)? {
                xattr::Change::Priority(p) => (Some(p), None),
                xattr::Change::Pinned(b) => (None, Some(b)),
            };
            self.rt.block_on(self.client.set_attrs(&p, priority, pinned)).map_err(|e| errno(&e))
        });
        match done {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let known = [xattr::PRIORITY, xattr::PINNED].contains(&name.to_str().unwrap_or(""));
        match self.path(ino).and_then(|p| self.stat(&p)) {
            Ok(_) if known => reply.error(Errno::EPERM),
            Ok(_) => reply.error(Errno::from_i32(libc::ENODATA)),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.rt.block_on(self.client.status()) {
            Ok(s) => {
                let (mut cap, mut used) = (0u64, 0u64);
                for w in &s.workers {
                    cap += w.record.mem_capacity + w.record.disk_capacity;
                    if let Some(st) = &w.stats {
                        used += st.mem_used + st.disk_used;
                    }
                }
                let (blocks, free) = (cap / u64::from(BLOCK), cap.saturating_sub(used) / u64::from(BLOCK));
                reply.statfs(blocks, free, free, s.inodes, u64::MAX / 2, BLOCK, NAME_MAX as u32, BLOCK);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}
