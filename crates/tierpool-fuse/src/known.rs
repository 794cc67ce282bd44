//! Directories whose every name this mount knows, so that a lookup of a
//! name one of them lacks is answered here, as missing, without asking the
//! coordinator. Extracting an archive or making many files looks up every
//! new name before making it: in a directory the mount made itself, that
//! lookup costs nothing.
//!
//! A directory is known from the moment this mount made it (empty) while
//! it follows the pool's change feed (`watch.rs`), with the names this
//! mount gave it and took from it since; not if the feed brought any other
//! client's change while it was being made (the feed may bring a change in
//! the new directory before the make's own answer comes back). It is forgotten when another
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
    /// Changes of other clients heard of so far (see [`KnownDirs::seen`]).
    heard: u64,
}

impl KnownDirs {
    /// How many changes of other clients were heard of: taken before a
    /// directory is made, and given to [`KnownDirs::made`]. The feed may
    /// bring another client's change in the new directory before the
    /// answer of the make comes back; if any came meanwhile, the directory
    /// is not known.
    pub fn seen(&self) -> u64 {
        self.heard
    }

    /// Another client changed something (not necessarily a known directory).
    pub fn heard(&mut self) {
        self.heard += 1;
    }

    /// This mount made `dir`, empty; `seen` was taken before it was made.
    pub fn made(&mut self, dir: u64, seen: u64) {
        if seen != self.heard {
            return;
        }
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

    /// Changes were lost: nothing is known (nor a directory being made).
    pub fn clear(&mut self) {
        self.dirs.clear();
        self.heard += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_made_here_lacks_what_it_was_not_given() {
        let mut k = KnownDirs::default();
        assert!(!k.lacks(7, "a"), "not known: the coordinator is asked");
        k.made(7, k.seen());
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
    fn a_directory_is_not_known_if_another_client_changed_anything_while_it_was_made() {
        let mut k = KnownDirs::default();
        let seen = k.seen();
        k.heard();
        k.made(7, seen);
        assert!(!k.lacks(7, "a"), "a change heard meanwhile may be in it");
        k.made(8, k.seen());
        assert!(k.lacks(8, "a"));
    }

    #[test]
    fn forgotten_directories_and_full_ones_are_asked_about_again() {
        let mut k = KnownDirs::default();
        k.made(1, 0);
        k.made(2, 0);
        k.forget(1);
        assert!(!k.lacks(1, "a"));
        assert!(k.lacks(2, "a"));
        for i in 0..MAX_NAMES {
            k.added(2, &format!("n{i}"));
        }
        assert!(k.lacks(2, "a"));
        k.added(2, "one more");
        assert!(!k.lacks(2, "a"), "more than MAX_NAMES: no longer known");
        k.made(3, 0);
        k.clear();
        assert!(!k.lacks(3, "a"));
        k.made(3, 0);
        assert!(!k.lacks(3, "a"), "changes were lost while it was made");
        for d in 0..(MAX_DIRS as u64 + 10) {
            k.made(d, k.seen());
        }
        assert!(!k.lacks(5, "a") && k.lacks(MAX_DIRS as u64 + 5, "a"), "at most MAX_DIRS are known, the last ones");
        assert_eq!(k.dirs.len(), 10);
    }
}
