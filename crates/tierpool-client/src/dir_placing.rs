//! Directory settings, remembered: how a new file of a directory is
//! written (copies of each chunk and placement policy, see `placing`), so
//! that writing a file does not first ask the coordinator about its
//! directory (a stat that also costs the coordinator time in proportion to
//! the directory's entries).
//!
//! Invariant: a remembered setting only saves the lookup; it never decides
//! how many copies a file ends with. The commit's reply says what the
//! published file keeps (its directory's setting at that moment), and the
//! writer makes up any difference in copies before it acknowledges: it
//! copies the missing ones, or drops the extra ones. So a stale entry (the
//! directory's setting changed, or the path now names another directory)
//! costs a little work, never a copy. A stale placement policy cannot be
//! made up that way: the file's chunks stay where the old policy put them
//! (readable as any, their homes recorded) and the next file follows the
//! new one. The same check also closes the race a fresh lookup has with a
//! change of the directory's setting between the lookup and the commit.
//!
//! A pool that keeps one copy and where no path has a policy other than
//! `hash` (as its layout says) needs no lookup at all; a commit that shows
//! a policy makes the writer read the layout again.
//!
//! Entries are keyed by the directory's path; the map is emptied when it
//! grows past [`MAX_DIRS`]. Lock: one `Mutex`, never held across an await.

use crate::client::Client;
use crate::placing::Placing;
use parking_lot::Mutex;
use std::collections::HashMap;
use tierpool_meta::InodeInfo;
use tierpool_types::{ErrorKind, Placement, Result};

/// Directories remembered at most; past it the map starts over.
pub(crate) const MAX_DIRS: usize = 4096;

/// How a new file is written, by the path of its directory.
#[derive(Default)]
pub(crate) struct DirPlacing {
    by_dir: Mutex<HashMap<String, Placing>>,
}

impl DirPlacing {
    fn get(&self, dir: &str) -> Option<Placing> {
        self.by_dir.lock().get(dir).copied()
    }

    /// Forgets every directory (this client changed a setting itself).
    pub(crate) fn forget(&self) {
        self.by_dir.lock().clear();
    }

    fn set(&self, dir: &str, placing: Placing) {
        let mut m = self.by_dir.lock();
        if m.len() >= MAX_DIRS && !m.contains_key(dir) {
            m.clear();
        }
        m.insert(dir.to_string(), placing);
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
    /// How a new entry at `path` is to be written: as its directory says,
    /// as last seen by this client (with `fresh`, as it says now).
    pub(crate) async fn remembered_placing(&self, path: &str, fresh: bool) -> Result<Placing> {
        let layout = self.layout().await?;
        let pool = Placing { copies: layout.table.replicas(), placement: Placement::Hash };
        if pool.copies == 1 && !layout.placed {
            return Ok(pool);
        }
        let dir = parent_of(path);
        if let Some(p) = self.inner.dir_placing.get(dir).filter(|_| !fresh) {
            return Ok(Placing { copies: p.copies.clamp(1, pool.copies), ..p });
        }
        match self.stat(dir).await {
            Ok(info) => {
                let p = Placing::of(&info);
                self.inner.dir_placing.set(dir, p);
                Ok(p)
            }
            // Missing: the commit says so; the pool's is the best guess.
            Err(e) if e.kind == ErrorKind::NotFound => Ok(pool),
            Err(e) => Err(e),
        }
    }

    /// A file written as `written` was published as `info`: remembers its
    /// directory's setting and, if the file keeps another count of copies,
    /// copies or drops chunks until it has what it keeps.
    pub(crate) async fn settle(&self, path: &str, info: &InodeInfo, written: Placing) -> Result<()> {
        let kept = Placing::of(info);
        self.inner.dir_placing.set(parent_of(path), kept);
        if kept.placement != Placement::Hash && !self.layout().await?.placed {
            self.refresh_layout().await?;
        }
        if kept.copies == written.copies {
            return Ok(());
        }
        tracing::debug!(
            "{path}: written with {} copies, its directory keeps {}; settling",
            written.copies,
            kept.copies
        );
        self.change_copies(path, info, written.copies, kept.copies).await
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
        let d = DirPlacing::default();
        let p = |copies| Placing { copies, placement: Placement::Hash };
        for i in 0..MAX_DIRS {
            d.set(&format!("/d{i}"), p(2));
        }
        d.set("/d0", p(1));
        assert_eq!(d.get("/d0"), Some(p(1)), "an update of a known directory keeps the map");
        d.set("/new", p(1));
        assert_eq!(d.get("/new"), Some(p(1)));
        assert_eq!(d.get("/d1"), None, "a new directory past the bound empties the map");
    }
}
