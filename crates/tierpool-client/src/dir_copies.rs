//! Copies per directory, remembered: how many copies of each chunk a new
//! file of a directory keeps, so that writing a file does not first ask
//! the coordinator about its directory (a stat that also costs the
//! coordinator time in proportion to the directory's entries).
//!
//! Invariant: a remembered count only saves the lookup; it never decides
//! how many copies a file ends with. The commit's reply says how many
//! copies the published file keeps (its directory's count at that moment),
//! and the writer makes up any difference before it acknowledges: it
//! copies the missing ones, or drops the extra ones. So a stale entry (the
//! directory's count changed, or the path now names another directory)
//! costs a little work, never a copy. The same check also closes the race
//! a fresh lookup has with a change of the directory's count between the
//! lookup and the commit.
//!
//! Entries are keyed by the directory's path; the map is emptied when it
//! grows past [`MAX_DIRS`]. Lock: one `Mutex`, never held across an await.

use crate::client::Client;
use parking_lot::Mutex;
use std::collections::HashMap;
use tierpool_meta::InodeInfo;
use tierpool_types::{ErrorKind, Result};

/// Directories remembered at most; past it the map starts over.
pub(crate) const MAX_DIRS: usize = 4096;

/// Copies a new file keeps, by the path of its directory.
#[derive(Default)]
pub(crate) struct DirCopies {
    by_dir: Mutex<HashMap<String, u8>>,
}

impl DirCopies {
    fn get(&self, dir: &str) -> Option<u8> {
        self.by_dir.lock().get(dir).copied()
    }

    fn set(&self, dir: &str, copies: u8) {
        let mut m = self.by_dir.lock();
        if m.len() >= MAX_DIRS && !m.contains_key(dir) {
            m.clear();
        }
        m.insert(dir.to_string(), copies);
    }
}

/// The directory holding `path`.
pub(crate) fn parent_of(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir,
        _ => "/",
    }
}

impl Client {
    /// Copies of each chunk a new file at `path` is to be written with:
    /// what its directory keeps, as last seen by this client.
    pub(crate) async fn remembered_copies(&self, path: &str) -> Result<u8> {
        let pool = self.layout().await?.table.replicas();
        if pool == 1 {
            return Ok(1);
        }
        let dir = parent_of(path);
        if let Some(c) = self.inner.dir_copies.get(dir) {
            return Ok(c.clamp(1, pool));
        }
        match self.stat(dir).await {
            Ok(info) => {
                let c = info.replicas.max(1);
                self.inner.dir_copies.set(dir, c);
                Ok(c)
            }
            // Missing: the commit says so; the pool's is the best guess.
            Err(e) if e.kind == ErrorKind::NotFound => Ok(pool),
            Err(e) => Err(e),
        }
    }

    /// A file written with `written` copies of each chunk was published as
    /// `info`: remembers its directory's count and, if the file keeps
    /// another count, copies or drops chunks until it has what it keeps.
    pub(crate) async fn settle_copies(&self, path: &str, info: &InodeInfo, written: u8) -> Result<()> {
        let kept = info.replicas.max(1);
        self.inner.dir_copies.set(parent_of(path), kept);
        if kept == written {
            return Ok(());
        }
        tracing::debug!("{path}: written with {written} copies, its directory keeps {kept}; settling");
        self.change_copies(path, info, written, kept).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_of_a_path_is_its_directory() {
        assert_eq!(parent_of("/a/b/c"), "/a/b");
        assert_eq!(parent_of("/a/b/"), "/a");
        assert_eq!(parent_of("/a"), "/");
        assert_eq!(parent_of("a"), "/");
    }

    #[test]
    fn a_full_map_starts_over_rather_than_grow() {
        let d = DirCopies::default();
        for i in 0..MAX_DIRS {
            d.set(&format!("/d{i}"), 2);
        }
        d.set("/d0", 1);
        assert_eq!(d.get("/d0"), Some(1), "an update of a known directory keeps the map");
        d.set("/new", 1);
        assert_eq!(d.get("/new"), Some(1));
        assert_eq!(d.get("/d1"), None, "a new directory past the bound empties the map");
    }
}
