//! `.snapshots` on the mount: every directory and file has a hidden entry
//! `.snapshots` (not listed, found by name, as `cd dir/.snapshots` does)
//! holding its snapshots, read-only.
//!
//! Entries there are not pool inodes: the mount gives each path it meets
//! beneath a `.snapshots` an inode number of its own, above
//! [`SNAP_BASE`] (pool ids never reach it), and answers for it by path
//! (`stat` and `list` of `PATH/.snapshots/...`). Anything that would change
//! one is `EROFS`; a file there is opened read-only under its own number,
//! never shared with the live file it was, and held like any open file.
//!
//! Invariant: the numbering is a bijection between the paths met and the
//! numbers handed out, for as long as the mount lives (the kernel may ask
//! for any number it was given).

use crate::attr::file_type;
use crate::fs::{name_of, OpenHandle, TierpoolFs};
use crate::open_file::OpenFile;
use fuser::{Errno, FileType};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::Arc;
use tierpool_client::{InodeInfo, InodeKind};
use tierpool_types::InodeId;

/// Inode numbers of entries beneath `.snapshots` start here.
pub(crate) const SNAP_BASE: u64 = 1 << 63;
pub(crate) const SNAPSHOTS: &str = ".snapshots";

/// Whether `ino` is an entry beneath a `.snapshots`.
pub(crate) fn is_snap(ino: u64) -> bool {
    ino >= SNAP_BASE
}

/// The paths met beneath `.snapshots` and their inode numbers.
#[derive(Debug, Default)]
pub(crate) struct SnapInodes {
    by_ino: HashMap<u64, String>,
    by_path: HashMap<String, u64>,
}

impl SnapInodes {
    fn number(&mut self, path: &str) -> u64 {
        if let Some(ino) = self.by_path.get(path) {
            return *ino;
        }
        let ino = SNAP_BASE + self.by_ino.len() as u64;
        self.by_ino.insert(ino, path.to_owned());
        self.by_path.insert(path.to_owned(), ino);
        ino
    }

    fn path(&self, ino: u64) -> Option<String> {
        self.by_ino.get(&ino).cloned()
    }
}

/// `info` of an entry beneath `.snapshots` as the kernel is shown it:
/// under the mount's number `ino`, read-only.
pub(crate) fn shown(info: InodeInfo, ino: u64) -> InodeInfo {
    InodeInfo { id: InodeId(ino), mode: info.mode & !0o222, ..info }
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

impl TierpoolFs {
    /// `EROFS` for an entry beneath `.snapshots`: nothing there changes.
    pub(crate) fn writable(&self, ino: u64) -> Result<(), Errno> {
        if is_snap(ino) {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    /// `writable`, and `EROFS` for the name `.snapshots` itself (removed or renamed).
    pub(crate) fn writable_entry(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        self.writable(parent)?;
        if name == SNAPSHOTS {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    fn snap_path(&self, ino: u64) -> Result<String, Errno> {
        self.snaps.lock().path(ino).ok_or(Errno::ESTALE)
    }

    /// Entry `name` of `parent` if it lies beneath a `.snapshots` (or is
    /// one), as `stat` shows it under its own number; `None` for a live entry.
    pub(crate) fn snap_lookup(&self, parent: u64, name: &OsStr) -> Option<Result<InodeInfo, Errno>> {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        let path = if is_snap(parent) {
            self.snap_path(parent).map(|p| join(&p, name))
        } else if name == SNAPSHOTS {
            self.path_of(parent).map(|p| join(&p, name))
        } else {
            return None;
        };
        Some(path.and_then(|p| {
            // It must exist (the kernel caches what a lookup answers): numbered once found.
            let info = self.block(self.io.client.stat(&p))?;
            Ok(shown(info, self.snaps.lock().number(&p)))
        }))
    }

    /// What `stat` shows of entry `ino` beneath `.snapshots`: read-only.
    /// With `chunks`, under the pool inode whose chunks it reads.
    pub(crate) fn snap_inode(&self, ino: u64, chunks: bool) -> Result<InodeInfo, Errno> {
        let info = self.block(self.io.client.stat(&self.snap_path(ino)?))?;
        Ok(if chunks { InodeInfo { mode: info.mode & !0o222, ..info } } else { shown(info, ino) })
    }

    /// The listing of directory `ino` beneath `.snapshots`.
    pub(crate) fn snap_open_dir(&self, ino: u64) -> Result<u64, Errno> {
        let epoch = self.fresh.lock().epoch();
        let path = self.snap_path(ino)?;
        let entries = self.block(self.io.client.list(&path))?;
        if !self.block(self.io.client.stat(&path)).is_ok_and(|i| i.kind == InodeKind::Dir) {
            return Err(Errno::ENOTDIR);
        }
        let mut all = vec![(ino, FileType::Directory, ".".to_string()), (ino, FileType::Directory, "..".into())];
        let mut snaps = self.snaps.lock();
        all.extend(entries.into_iter().map(|e| (snaps.number(&join(&path, &e.name)), file_type(e.info.kind), e.name)));
        drop(snaps);
        let fh = self.new_fh();
        let read = (std::time::Instant::now(), epoch);
        self.dirs.lock().insert(fh, crate::namespace::Listing { entries: all, snap: true, read, attrs: None });
        Ok(fh)
    }

    /// Opens file `ino` beneath `.snapshots` for reading, on its own.
    pub(crate) fn snap_open(&self, ino: u64, flags: i32) -> Result<u64, Errno> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(Errno::EROFS);
        }
        let info = self.snap_inode(ino, true)?;
        match info.kind {
            InodeKind::File => {}
            InodeKind::Dir => return Err(Errno::EISDIR),
            // A region's checkpoint, like a live region, is used through the region API.
            InodeKind::Region => return Err(Errno::from_i32(libc::EOPNOTSUPP)),
            _ => return Err(Errno::EINVAL),
        }
        // Counted with the mount's open files (under its own number), so
        // the inode it reads is held while it is open.
        let file = {
            let mut files = self.files.lock();
            let (f, n) = files.entry(ino).or_insert_with(|| (Arc::new(OpenFile::frozen(info)), 0));
            *n += 1;
            f.clone()
        };
        let fh = self.new_fh();
        self.handles.lock().insert(fh, OpenHandle { ino, file, write: false, append: false });
        Ok(fh)
    }
}
