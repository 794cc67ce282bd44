//! Pool inodes as the kernel sees them.
//!
//! The FUSE inode number is the pool's inode id (the root is 1 in both), so
//! names, hard links and renames need no table here. Access times are those
//! the pool keeps: set at creation and by `utimens`, not by reads.

use fuser::{FileAttr, FileType, INodeNo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tierpool_client::{InodeInfo, InodeKind};

/// The block size reported by `stat`: programs such as `cp` size their
/// buffers from it, and the mount takes writes of up to this size.
pub const IO_BLOCK: u32 = 1 << 20;

/// Now, in nanoseconds since the epoch.
pub fn time_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

pub fn file_type(kind: InodeKind) -> FileType {
    match kind {
        InodeKind::File | InodeKind::Region => FileType::RegularFile,
        InodeKind::Dir => FileType::Directory,
        InodeKind::Symlink => FileType::Symlink,
        InodeKind::Fifo => FileType::NamedPipe,
        InodeKind::Socket => FileType::Socket,
        InodeKind::CharDevice => FileType::CharDevice,
        InodeKind::BlockDevice => FileType::BlockDevice,
    }
}

pub fn attr(i: &InodeInfo) -> FileAttr {
    FileAttr {
        ino: INodeNo(i.id.0),
        size: i.size,
        blocks: i.size.div_ceil(512),
        atime: time(i.atime),
        mtime: time(i.mtime),
        ctime: time(i.ctime),
        crtime: time(i.ctime),
        kind: file_type(i.kind),
        perm: (i.mode & 0o7777) as u16,
        nlink: i.nlink,
        uid: i.uid,
        gid: i.gid,
        rdev: i.rdev as u32,
        blksize: IO_BLOCK,
        flags: 0,
    }
}

/// The attributes of a negative entry (a name with no inode): never read by
/// the kernel beyond their node number, 0.
pub fn absent() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: IO_BLOCK,
        flags: 0,
    }
}
