//! The file behind a region mapped read-only by several processes of a node.
//!
//! Readers hold a shared `flock` on it while they use it. One that finds no
//! other reader (it gets the exclusive lock) empties the file first, so pages
//! left from an earlier round of readers are never served; the last reader to
//! leave removes the file.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub struct SharedFile {
    file: File,
    path: PathBuf,
}

fn flock(f: &File, op: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl SharedFile {
    /// Opens (or creates) the file at `path`, sized `len`, holding a shared lock.
    pub fn open(path: &Path, len: u64) -> io::Result<SharedFile> {
        loop {
            let file = File::options().read(true).write(true).create(true).truncate(false).open(path)?;
            if flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
                // The only reader: start from an empty file of the right size.
                file.set_len(0)?;
                file.set_len(len)?;
                flock(&file, libc::LOCK_SH)?;
            } else {
                flock(&file, libc::LOCK_SH)?;
                if file.metadata()?.len() != len {
                    return Err(io::Error::other(format!(
                        "is in use for a region of another size ({} bytes)",
                        file.metadata()?.len()
                    )));
                }
            }
            // The last reader may have removed the path meanwhile: use it only
            // if it still names this file.
            use std::os::unix::fs::MetadataExt;
            let (mine, now) = (file.metadata()?, std::fs::metadata(path));
            if now.is_ok_and(|n| n.ino() == mine.ino() && n.dev() == mine.dev()) {
                return Ok(SharedFile { file, path: path.to_path_buf() });
            }
        }
    }

    pub fn raw(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Leaves; the last reader removes the file (and with it the pages).
    pub fn release(&self) {
        if flock(&self.file, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = flock(&self.file, libc::LOCK_UN);
    }
}
