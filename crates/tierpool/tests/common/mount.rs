//! A FUSE mount of a test pool, unmounted when dropped.

use super::Pool;
use std::path::PathBuf;

pub struct Mount<'a> {
    pool: &'a Pool,
    pub dir: PathBuf,
}

impl<'a> Mount<'a> {
    /// Mounts the pool at `name` under the pool's directory.
    pub fn new(pool: &'a Pool, name: &str) -> Mount<'a> {
        let dir = pool.dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        pool.ok(&["mount", dir.to_str().unwrap()]);
        Mount { pool, dir }
    }

    /// A path inside the mount.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
}

impl Drop for Mount<'_> {
    fn drop(&mut self) {
        let _ = self.pool.cli(&["umount", self.dir.to_str().unwrap()]);
    }
}
