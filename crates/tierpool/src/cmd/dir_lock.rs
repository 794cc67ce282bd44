//! One server process of a role per state directory. A coordinator or
//! worker takes an exclusive lock on `DIR/ROLE.lock` before it reads
//! anything there, and holds it until it exits: two coordinators appending
//! to one metadata log, or two workers writing one chunk directory, would
//! corrupt them (a coordinator and a worker keep apart files, and may
//! share a directory). The lock is
//! the kernel's (`flock`), so a process killed with SIGKILL releases it
//! with its last breath, and no stale file is ever in the way. The file
//! names the holder's process id, for the error a second process gives.

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a server waits for the directory's holder to finish stopping
/// (a restart right after `kill`), before it gives up.
const WAIT_FOR_HOLDER: Duration = Duration::from_secs(5);

/// The held lock; released when dropped (or when the process ends).
#[must_use = "the directory is locked only while this is held"]
pub struct DirLock {
    _file: File,
}

/// Locks `dir` (made if missing) for a `role` ("coordinator", "worker").
pub fn hold(dir: &Path, role: &str) -> Result<DirLock> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{role}.lock"));
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let started = Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) if started.elapsed() < WAIT_FOR_HOLDER => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = f.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => String::new(),
                    pid => format!(" (process {pid})"),
                };
                bail!(
                    "another {role} is running on {}{holder}: stop it first, or give this one another --dir",
                    dir.display()
                );
            }
            Err(TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }
    f.set_len(0)?;
    f.rewind()?;
    writeln!(f, "{}", std::process::id())?;
    Ok(DirLock { _file: f })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let first = hold(&dir, "worker").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("worker.lock")).unwrap(), format!("{}\n", std::process::id()));
        let _other_role = hold(&dir, "coordinator").expect("a coordinator may share a worker's directory");
        let t = Instant::now();
        let e = hold(&dir, "worker").err().expect("a second holder is refused").to_string();
        assert!(t.elapsed() >= WAIT_FOR_HOLDER, "it waits for the holder to stop first");
        assert_eq!(
            e,
            format!(
                "another worker is running on {} (process {}): stop it first, or give this one another --dir",
                dir.display(),
                std::process::id()
            )
        );
        drop(first);
        let _again = hold(&dir, "worker").expect("free again once dropped");
    }
}
