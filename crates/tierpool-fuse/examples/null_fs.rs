//! A FUSE file system that stores nothing: names and attributes in one
//! map in memory, file bytes counted and dropped (a read returns zeros up
//! to the size written). Mounted like the pool's mount (4 serving threads,
//! one device clone each, default_permissions, entries and attributes kept
//! for 1 s, negative entries too), it measures what FUSE itself costs on
//! this machine: the ceiling of any FUSE mount's creates, stats, deletes
//! and `tar x`/`tar c` of a tree (`bench/fuse.py` runs beside the pool's
//! mount). Its read-only opens keep the kernel's pages and send no `FLUSH`
//! (the best case of the pool's mount); other handles bypass the page
//! cache, as the pool's mount's do. Renames move files, over a file
//! (a directory's is `EXDEV`, as across file systems: `mv` copies).
//!
//! `cargo run --release -p tierpool-fuse --example null_fs -- MOUNTPOINT`;
//! serves until unmounted (`fusermount3 -u MOUNTPOINT`).
//!
//! Invariant: every inode in `Nodes::nodes` but the root is named by exactly
//! one entry of one directory's `children`.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite,
    Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

struct Node {
    attr: FileAttr,
    children: HashMap<OsString, u64>,
}

struct Nodes {
    nodes: HashMap<u64, Node>,
    next: u64,
}

struct NullFs(Mutex<Nodes>);

fn new_attr(ino: u64, kind: FileType, perm: u16, req: &Request) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: req.uid(),
        gid: req.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Nodes {
    fn make(&mut self, req: &Request, parent: u64, name: &OsStr, kind: FileType, perm: u16) -> Result<FileAttr, Errno> {
        let ino = self.next;
        let dir = self.nodes.get_mut(&parent).ok_or(Errno::ENOENT)?;
        if dir.children.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        dir.children.insert(name.to_owned(), ino);
        dir.attr.mtime = SystemTime::now();
        dir.attr.ctime = dir.attr.mtime;
        self.next += 1;
        let attr = new_attr(ino, kind, perm, req);
        self.nodes.insert(ino, Node { attr, children: HashMap::new() });
        Ok(attr)
    }

    fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = *self.nodes.get(&parent).and_then(|p| p.children.get(name)).ok_or(Errno::ENOENT)?;
        let node = &self.nodes[&ino];
        match (dir, node.attr.kind == FileType::Directory) {
            (true, false) => return Err(Errno::ENOTDIR),
            (false, true) => return Err(Errno::EISDIR),
            (true, true) if !node.children.is_empty() => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        self.nodes.remove(&ino);
        let p = self.nodes.get_mut(&parent).expect("parent looked up above");
        p.children.remove(name);
        p.attr.mtime = SystemTime::now();
        p.attr.ctime = p.attr.mtime;
        Ok(())
    }

    /// Moves the file `parent/name` to `new_parent/new_name`, over a file there.
    fn rename(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr) -> Result<(), Errno> {
        let ino = *self.nodes.get(&parent).and_then(|p| p.children.get(name)).ok_or(Errno::ENOENT)?;
        if self.nodes[&ino].attr.kind == FileType::Directory {
            return Err(Errno::EXDEV);
        }
        let target = self.nodes.get(&new_parent).ok_or(Errno::ENOENT)?.children.get(new_name).copied();
        match target {
            Some(t) if t == ino => return Ok(()),
            Some(_) => self.remove(new_parent, new_name, false)?,
            None => {}
        }
        let now = SystemTime::now();
        for (dir, to) in [(parent, None), (new_parent, Some(ino))] {
            let d = self.nodes.get_mut(&dir).expect("both directories looked up above");
            match to {
                None => d.children.remove(name),
                Some(ino) => d.children.insert(new_name.to_owned(), ino),
            };
            (d.attr.mtime, d.attr.ctime) = (now, now);
        }
        self.nodes.get_mut(&ino).expect("looked up above").attr.ctime = now;
        Ok(())
    }
}

impl NullFs {
    fn nodes(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn reply_entry(r: Result<FileAttr, Errno>, reply: ReplyEntry) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for NullFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let n = self.nodes();
        match n.nodes.get(&parent.0).and_then(|p| p.children.get(name)) {
            Some(ino) => reply.entry(&TTL, &n.nodes[ino].attr, Generation(0)),
            // A negative entry, as the pool's mount gives.
            None => reply.entry(&TTL, &FileAttr { ino: INodeNo(0), ..n.nodes[&ROOT].attr }, Generation(0)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.nodes().nodes.get(&ino.0) {
            Some(n) => reply.attr(&TTL, &n.attr),
            None => reply.error(Errno::ENOENT),
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
        let mut n = self.nodes();
        let Some(node) = n.nodes.get_mut(&ino.0) else { return reply.error(Errno::ENOENT) };
        if let Some(m) = mode {
            node.attr.perm = (m & 0o7777) as u16;
        }
        if let Some(s) = size {
            node.attr.size = s;
        }
        node.attr.uid = uid.unwrap_or(node.attr.uid);
        node.attr.gid = gid.unwrap_or(node.attr.gid);
        let now = SystemTime::now();
        let at = |t: TimeOrNow| match t {
            TimeOrNow::SpecificTime(t) => t,
            TimeOrNow::Now => now,
        };
        node.attr.atime = atime.map_or(node.attr.atime, at);
        node.attr.mtime = mtime.map_or(node.attr.mtime, at);
        node.attr.ctime = now;
        reply.attr(&TTL, &node.attr)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let perm = (mode & !umask & 0o7777) as u16;
        reply_entry(self.nodes().make(req, parent.0, name, FileType::Directory, perm), reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.nodes().remove(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.nodes().remove(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
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
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        match self.nodes().rename(parent.0, name, newparent.0, newname) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match flags.0 & libc::O_ACCMODE {
            libc::O_RDONLY => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH),
            _ => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(len) = self.nodes().nodes.get(&ino.0).map(|n| n.attr.size) else {
            return reply.error(Errno::ENOENT);
        };
        let n = len.saturating_sub(offset).min(u64::from(size)) as usize;
        reply.data(&vec![0; n])
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.nodes().make(req, parent.0, name, FileType::RegularFile, perm) {
            Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut n = self.nodes();
        let Some(node) = n.nodes.get_mut(&ino.0) else { return reply.error(Errno::ENOENT) };
        node.attr.size = node.attr.size.max(offset + data.len() as u64);
        node.attr.mtime = SystemTime::now();
        reply.written(data.len() as u32)
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty())
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let n = self.nodes();
        let Some(dir) = n.nodes.get(&ino.0) else { return reply.error(Errno::ENOENT) };
        let mut entries =
            vec![(ino.0, FileType::Directory, OsString::from(".")), (ino.0, FileType::Directory, "..".into())];
        entries.extend(dir.children.iter().map(|(name, c)| (*c, n.nodes[c].attr.kind, name.clone())));
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok()
    }
}

fn main() -> std::io::Result<()> {
    let Some(mountpoint) = std::env::args_os().nth(1) else {
        eprintln!("usage: null_fs MOUNTPOINT");
        std::process::exit(2);
    };
    let root_attr = FileAttr {
        ino: INodeNo(ROOT),
        size: 0,
        blocks: 0,
        atime: SystemTime::now(),
        mtime: SystemTime::now(),
        ctime: SystemTime::now(),
        crtime: SystemTime::now(),
        kind: FileType::Directory,
        perm: 0o777,
        nlink: 2,
        // SAFETY: plain getters.
        uid: unsafe { libc::geteuid() },
        gid: unsafe { libc::getegid() },
        rdev: 0,
        blksize: 4096,
        flags: 0,
    };
    let root = Node { attr: root_attr, children: HashMap::new() };
    let fs = NullFs(Mutex::new(Nodes { nodes: HashMap::from([(ROOT, root)]), next: ROOT + 1 }));
    fuser::spawn_mount(fs, &mountpoint, &tierpool_fuse::config("null"))?.join()
}
