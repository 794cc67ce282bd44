//! The pools this user started with `tierpool up`, so that commands, the
//! Python package and mounts on this machine find a pool's secret with no
//! flags: `~/.tierpool/pools/<host:port>` holds the path of the secret file
//! of the pool whose coordinator listens at `host:port` (the address `up`
//! prints, and clients are given).
//!
//! `up` records an entry once its pool is ready and `down` removes it; an
//! entry only ever names a file, never holds a key. The directory is made
//! private (0700) and entries are written private (0600) and atomically. An
//! entry whose secret file is gone (a pool removed without `down`) is as
//! good as none.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use tierpool_types::{Error, Result};

/// `~/.tierpool/pools`, if this user has a home.
pub fn dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".tierpool").join("pools"))
}

/// The entry of the pool at `addr`, if this user has a home and `addr` can name a file.
pub fn entry(addr: &str) -> Option<PathBuf> {
    entry_in(&dir()?, addr)
}

fn entry_in(dir: &Path, addr: &str) -> Option<PathBuf> {
    if addr.is_empty() || addr.contains('/') || addr.starts_with('.') || addr.contains('\0') {
        return None;
    }
    Some(dir.join(addr))
}

/// Records that the pool at `addr` has its secret in `secret_file`
/// (an absolute path); returns the entry written.
pub fn record(addr: &str, secret_file: &Path) -> Result<PathBuf> {
    let dir = dir().ok_or_else(|| Error::invalid("no home directory ($HOME) to record the pool in"))?;
    record_in(&dir, addr, secret_file)
}

fn record_in(dir: &Path, addr: &str, secret_file: &Path) -> Result<PathBuf> {
    let entry = entry_in(dir, addr).ok_or_else(|| Error::invalid(format!("no registry entry can name {addr:?}")))?;
    let ctx = |e: std::io::Error| Error::from(e).context(format!("recording the pool in {}", dir.display()));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(ctx)?;
    let tmp = dir.join(format!(".{addr}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(format!("{}\n", secret_file.display()).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &entry)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(ctx)?;
    Ok(entry)
}

/// The secret file recorded for the pool at `addr`, if one is recorded and exists.
pub fn lookup(addr: &str) -> Option<PathBuf> {
    lookup_in(&dir()?, addr)
}

fn lookup_in(dir: &Path, addr: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(entry_in(dir, addr)?).ok()?;
    let path = PathBuf::from(text.trim_end_matches('\n'));
    path.is_file().then_some(path)
}

/// Removes the entry of the pool at `addr` if it still names
/// `secret_file` (a newer pool on the same address keeps its own).
pub fn forget(addr: &str, secret_file: &Path) -> Result<()> {
    match dir() {
        Some(dir) => forget_in(&dir, addr, secret_file),
        None => Ok(()),
    }
}

fn forget_in(dir: &Path, addr: &str, secret_file: &Path) -> Result<()> {
    let Some(entry) = entry_in(dir, addr) else { return Ok(()) };
    match std::fs::read_to_string(&entry) {
        Ok(text) if Path::new(text.trim_end_matches('\n')) == secret_file => {
            std::fs::remove_file(&entry).map_err(|e| Error::from(e).context(entry.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_entry_is_private_found_by_address_and_forgotten_only_by_its_pool() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pools");
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "k").unwrap();
        let entry = record_in(&dir, "127.0.0.1:7700", &secret).unwrap();
        assert_eq!(entry, dir.join("127.0.0.1:7700"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&entry)), (0o700, 0o600));
        assert_eq!(std::fs::read_to_string(&entry).unwrap(), format!("{}\n", secret.display()));
        assert_eq!(lookup_in(&dir, "127.0.0.1:7700"), Some(secret.clone()));
        assert_eq!(lookup_in(&dir, "127.0.0.1:7701"), None);
        forget_in(&dir, "127.0.0.1:7700", &tmp.path().join("another")).unwrap();
        assert!(entry.exists(), "a newer pool's entry stays");
        std::fs::remove_file(&secret).unwrap();
        assert_eq!(lookup_in(&dir, "127.0.0.1:7700"), None, "an entry whose secret is gone is none");
        forget_in(&dir, "127.0.0.1:7700", &secret).unwrap();
        assert!(!entry.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(record_in(&dir, "../x", &secret).is_err());
    }
}
