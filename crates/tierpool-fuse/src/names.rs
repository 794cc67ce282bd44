//! Where this mount last met each inode the kernel knows: the directory
//! and the name it was looked up, made or linked by.
//!
//! The mount addresses everything by inode, but a few pool ops take a path
//! (setting copies per chunk, `SetReplicas`); a directory's path follows
//! from its parent links, a file's from the name it was met by. Each entry
//! counts the kernel's lookups of its inode (every entry reply is one) and
//! goes when the kernel forgets them all, so the map holds no more than
//! the kernel's own inode cache. A name here is a hint, checked against the
//! pool before use: renames by other clients make it stale, and a file
//! renamed through this mount is followed.
//!
//! Pure: a map and its updates; `controls.rs` turns a hint into a path.

use std::collections::HashMap;

#[derive(Debug, PartialEq, Eq)]
struct Met {
    parent: u64,
    name: String,
    lookups: u64,
}

/// Inode -> the directory and name it was last met by.
#[derive(Debug, Default)]
pub struct Names {
    met: HashMap<u64, Met>,
}

impl Names {
    /// The kernel was handed `ino` as entry `name` of `parent` (one lookup more).
    pub fn met(&mut self, ino: u64, parent: u64, name: &str) {
        let e = self.met.entry(ino).or_insert_with(|| Met { parent, name: String::new(), lookups: 0 });
        e.parent = parent;
        if e.name != name {
            e.name = name.to_string();
        }
        e.lookups += 1;
    }

    /// The kernel dropped `n` of its lookups of `ino`.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if let Some(e) = self.met.get_mut(&ino) {
            e.lookups = e.lookups.saturating_sub(n);
            if e.lookups == 0 {
                self.met.remove(&ino);
            }
        }
    }

    /// Entry `name` of `parent` became `new_name` of `new_parent`.
    pub fn renamed(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
        for e in self.met.values_mut() {
            if e.parent == parent && e.name == name {
                e.parent = new_parent;
                e.name = new_name.to_string();
            }
        }
    }

    /// Every inode the kernel knows, with the directory and name it was last met by.
    pub fn all(&self) -> Vec<(u64, u64, String)> {
        self.met.iter().map(|(ino, e)| (*ino, e.parent, e.name.clone())).collect()
    }

    /// The directory and name `ino` was last met by, if the kernel knows it.
    pub fn get(&self, ino: u64) -> Option<(u64, String)> {
        self.met.get(&ino).map(|e| (e.parent, e.name.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_is_kept_until_the_kernel_forgets_every_lookup() {
        let mut n = Names::default();
        n.met(7, 1, "a");
        n.met(7, 1, "a");
        n.forget(7, 1);
        assert_eq!(n.get(7), Some((1, "a".into())));
        n.forget(7, 1);
        assert_eq!((n.get(7), n.met.len()), (None, 0));
        n.forget(7, 3); // a forget of an inode not met changes nothing
        assert!(n.met.is_empty());
    }

    #[test]
    fn the_last_name_met_wins_and_renames_are_followed() {
        let mut n = Names::default();
        n.met(7, 1, "a");
        n.met(7, 2, "hard-link");
        assert_eq!(n.get(7), Some((2, "hard-link".into())));
        n.met(8, 2, "b");
        n.renamed(2, "hard-link", 3, "moved");
        assert_eq!((n.get(7), n.get(8)), (Some((3, "moved".into())), Some((2, "b".into()))));
        n.forget(7, 5); // more than it had: gone
        assert_eq!(n.get(7), None);
    }
}
