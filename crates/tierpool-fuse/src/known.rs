//! Directories whose every name this mount knows, so that a lookup of a
//! name one of them lacks is answered here, as missing, without asking the
//! coordinator. Extracting an archive or making many files looks up every
//! new name before making it: in a directory the mount made itself, that
//! lookup costs nothing.
//!
//! A directory is known from the moment this mount made it (empty) while
//! it follows the pool's change feed (`watch.rs`), with the names this
//! mount gave it and took from it since. It is forgotten when another
//! client changes it (the feed says so), when an op of this mount in it
//! fails (its outcome may be unknown), when it holds more than
//! [`MAX_NAMES`] names, and all are forgotten when the feed loses changes.
//!
//! Invariant: while the feed is followed, the names a known directory has
//! in the pool are among those kept here, except for another client's
//! changes the feed has not yet brought: a missing name answered from here
//! is as old as the feed's delay, well within the `TTL` the kernel keeps
//! a missing name for anyway.

use std::collections::{HashMap, HashSet};

/// Directories known at most (then all are forgotten, and the next ones
/// made are known).
pub const MAX_DIRS: usize = 4096;
/// Names a known directory may hold before it is forgotten.
pub const MAX_NAMES: usize = 65_536;

#[derive(Default)]
pub struct KnownDirs {
    dirs: HashMap<u64, HashSet<String>>,
}

impl KnownDirs {
    /// This mount made `dir`, empty.
    pub fn made(&mut self, dir: u64) {
        if self.dirs.len() >= MAX_DIRS {
            self.dirs.clear();
        }
        self.dirs.insert(dir, HashSet::new());
    }

    /// This mount gave `dir` the entry `name`.
    pub fn added(&mut self, dir: u64, name: &str) {
        let Some(names) = self.dirs.get_mut(&dir) else { return };
        if names.len() >= MAX_NAMES {
            self.dirs.remove(&dir);
            return;
        }
        names.insert(name.to_string());
    }

    /// This mount removed entry `name` of `dir`.
    pub fn removed(&mut self, dir: u64, name: &str) {
        if let Some(names) = self.dirs.get_mut(&dir) {
            names.remove(name);
        }
    }

    /// Whether `dir` is known and has no entry `name`.
    pub fn lacks(&self, dir: u64, name: &str) -> bool {
        self.dirs.get(&dir).is_some_and(|names| !names.contains(name))
    }

    /// What is kept of `dir` may no longer hold: another client changed
    /// it, it was removed, or an op in it failed.
    pub fn forget(&mut self, dir: u64) {
        self.dirs.remove(&dir);
    }

    /// Changes were lost: nothing is known.
    pub fn clear(&mut self) {
        self.dirs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_made_here_lacks_what_it_was_not_given() {
        let mut k = KnownDirs::default();
        assert!(!k.lacks(7, "a"), "not known: the coordinator is asked");
        k.made(7);
        assert!(k.lacks(7, "a"));
        k.added(7, "a");
        assert!(!k.lacks(7, "a"));
        assert!(k.lacks(7, "b"));
        k.removed(7, "a");
        assert!(k.lacks(7, "a"));
        k.added(8, "x");
        assert!(!k.lacks(8, "y"), "names given to an unknown directory make nothing known");
    }

    #[test]
    fn forgotten_directories_and_full_ones_are_asked_about_again() {
        let mut k = KnownDirs::default();
        k.made(1);
        k.made(2);
        k.forget(1);
        assert!(!k.lacks(1, "a"));
        assert!(k.lacks(2, "a"));
        for i in 0..MAX_NAMES {
            k.added(2, &format!("n{i}"));
        }
        assert!(k.lacks(2, "a"));
        k.added(2, "one more");
        assert!(!k.lacks(2, "a"), "more than MAX_NAMES: no longer known");
        k.made(3);
        k.clear();
        assert!(!k.lacks(3, "a"));
        for d in 0..(MAX_DIRS as u64 + 10) {
            k.made(d);
        }
        assert!(!k.lacks(5, "a") && k.lacks(MAX_DIRS as u64 + 5, "a"), "at most MAX_DIRS are known, the last ones");
        assert_eq!(k.dirs.len(), 10);
    }
}
