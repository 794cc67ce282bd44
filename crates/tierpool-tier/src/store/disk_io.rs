//! The I/O seam of the DISK tier: every file system call of this crate goes
//! through here, so tests can make the Nth call fail.
//!
//! Files are written to a temporary name and renamed into place, so a chunk
//! file is either absent or complete. There is no fsync: the tier only has to
//! survive a crash of the worker process (kill -9), and the kernel's page
//! cache outlives the process. A machine crash may lose recent DISK chunks;
//! acknowledged data is protected by replicas and the under-store, not here.
//!
//! Fault injection (tests, or the `fault-injection` feature): [`fail_nth`]
//! arms a per-thread countdown; the Nth call made afterwards on that thread
//! fails with an `io::Error` and disarms it. [`fail_nth_with`] chooses the
//! error: [`Fault::NoSpace`] is the `StorageFull` (ENOSPC) of a full disk.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The error an injected fault raises.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// An I/O error of no particular kind, naming the operation and path.
    Io,
    /// The disk is out of space: `io::ErrorKind::StorageFull`, as ENOSPC.
    NoSpace,
}

#[cfg(any(test, feature = "fault-injection"))]
mod fault {
    use super::Fault;
    use std::cell::Cell;
    use std::io;

    thread_local! {
        static COUNTDOWN: Cell<(u64, Fault)> = const { Cell::new((0, Fault::Io)) };
    }

    pub fn arm(n: u64, fault: Fault) {
        COUNTDOWN.with(|c| c.set((n, fault)));
    }

    pub fn check(op: &str, path: &std::path::Path) -> io::Result<()> {
        COUNTDOWN.with(|c| match c.get() {
            (0, _) => Ok(()),
            (1, fault) => {
                c.set((0, Fault::Io));
                Err(match fault {
                    Fault::Io => io::Error::other(format!("injected fault: {op} {}", path.display())),
                    Fault::NoSpace => io::Error::new(io::ErrorKind::StorageFull, "No space left on device"),
                })
            }
            (n, fault) => {
                c.set((n - 1, fault));
                Ok(())
            }
        })
    }
}

#[cfg(not(any(test, feature = "fault-injection")))]
mod fault {
    #[inline(always)]
    pub fn check(_op: &str, _path: &std::path::Path) -> std::io::Result<()> {
        Ok(())
    }
}

/// Makes the `n`th disk operation from now on this thread fail (1 = the next
/// one); 0 disarms.
#[cfg(any(test, feature = "fault-injection"))]
pub fn fail_nth(n: u64) {
    fault::arm(n, Fault::Io);
}

/// As [`fail_nth`], failing with the error of `fault`.
#[cfg(any(test, feature = "fault-injection"))]
pub fn fail_nth_with(n: u64, fault: Fault) {
    fault::arm(n, fault);
}

pub fn create_dir_all(path: &Path) -> io::Result<()> {
    fault::check("mkdir", path)?;
    fs::create_dir_all(path)
}

/// The entries of a directory.
pub fn list_dir(path: &Path) -> io::Result<Vec<PathBuf>> {
    fault::check("readdir", path)?;
    fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect()
}

/// Writes `parts` to `tmp`, then renames it to `dest`. On failure `tmp` is
/// removed (best effort) and `dest` is untouched.
pub fn write_atomic(tmp: &Path, dest: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let result = (|| {
        fault::check("write", tmp)?;
        let mut f = File::create(tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        drop(f);
        fault::check("rename", dest)?;
        fs::rename(tmp, dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// The whole file; `size_hint` sizes the buffer.
pub fn read_all(path: &Path, size_hint: usize) -> io::Result<Vec<u8>> {
    fault::check("read", path)?;
    let mut f = File::open(path)?;
    let mut buf = Vec::with_capacity(size_hint);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Fills `buf` from the start of the file as far as the file goes; returns
/// how many bytes were read and the file's length.
pub fn read_prefix(path: &Path, buf: &mut [u8]) -> io::Result<(usize, u64)> {
    fault::check("read", path)?;
    let mut f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((n, file_len))
}

/// Removes a file; a file that is already gone is not an error.
pub fn remove_file(path: &Path) -> io::Result<()> {
    fault::check("unlink", path)?;
    match fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}
