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

use std::collections::hash_map::Entry;
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
    /// The other way round: the inodes last met by each entry (one, but for
    /// stale hints), so that a rename moves its entry's without a scan of
    /// every inode the kernel knows. Invariant: `ino` is listed under
    /// `(parent, name)` exactly when `met[ino]` is that entry.
    by_entry: HashMap<(u64, String), Vec<u64>>,
}

impl Names {
    /// The kernel was handed `ino` as entry `name` of `parent` (one lookup more).
    pub fn met(&mut self, ino: u64, parent: u64, name: &str) {
        match self.met.entry(ino) {
            Entry::Occupied(mut o) => {
                let e = o.get_mut();
                e.lookups += 1;
                if e.parent == parent && e.name == name {
                    return;
                }
                let before = (std::mem::replace(&mut e.parent, parent), std::mem::replace(&mut e.name, name.into()));
                unlist(&mut self.by_entry, before, ino);
            }
            Entry::Vacant(v) => {
                v.insert(Met { parent, name: name.into(), lookups: 1 });
            }
        }
        self.by_entry.entry((parent, name.to_string())).or_default().push(ino);
    }

    /// The kernel dropped `n` of its lookups of `ino`.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if let Some(e) = self.met.get_mut(&ino) {
            e.lookups = e.lookups.saturating_sub(n);
            if e.lookups == 0 {
                let e = self.met.remove(&ino).expect("looked up above");
                unlist(&mut self.by_entry, (e.parent, e.name), ino);
            }
        }
    }

    /// Entry `name` of `parent` became `new_name` of `new_parent`.
    pub fn renamed(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
        let Some(inodes) = self.by_entry.remove(&(parent, name.to_string())) else { return };
        for ino in &inodes {
            let e = self.met.get_mut(ino).expect("listed inodes are met");
            e.parent = new_parent;
            e.name = new_name.to_string();
        }
        self.by_entry.entry((new_parent, new_name.to_string())).or_default().extend(inodes);
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

/// Takes `ino` off the list of `entry`.
fn unlist(by_entry: &mut HashMap<(u64, String), Vec<u64>>, entry: (u64, String), ino: u64) {
    if let Some(list) = by_entry.get_mut(&entry) {
        list.retain(|i| *i != ino);
        if list.is_empty() {
            by_entry.remove(&entry);
        }
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

    /// The map as it was before it kept entries both ways: renames scan it.
    #[derive(Default)]
    struct Model(HashMap<u64, Met>);

    impl Model {
        fn met(&mut self, ino: u64, parent: u64, name: &str) {
            let e = self.0.entry(ino).or_insert_with(|| Met { parent, name: String::new(), lookups: 0 });
            (e.parent, e.name, e.lookups) = (parent, name.to_string(), e.lookups + 1);
        }

        fn forget(&mut self, ino: u64, n: u64) {
            if let Some(e) = self.0.get_mut(&ino) {
                e.lookups = e.lookups.saturating_sub(n);
                if e.lookups == 0 {
                    self.0.remove(&ino);
                }
            }
        }

        fn renamed(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
            for e in self.0.values_mut().filter(|e| e.parent == parent && e.name == name) {
                (e.parent, e.name) = (new_parent, new_name.to_string());
            }
        }
    }

    proptest::proptest! {
        /// Any sequence of lookups, forgets and renames leaves every inode
        /// where the scanning map leaves it, and the index listing exactly
        /// the inodes met by each entry.
        #[test]
        fn renames_follow_as_a_scan_would(
            ops in proptest::collection::vec((0u8..3, 0u64..6, 0u64..3, 0u8..3, 0u64..3, 0u8..3), 0..120),
        ) {
            let (mut n, mut m) = (Names::default(), Model::default());
            let name = |i: u8| ["a", "b", "c"][i as usize];
            for (op, ino, p, a, q, b) in ops {
                match op {
                    0 => {
                        n.met(ino, p, name(a));
                        m.met(ino, p, name(a));
                    }
                    1 => {
                        n.forget(ino, q);
                        m.forget(ino, q);
                    }
                    _ => {
                        n.renamed(p, name(a), q, name(b));
                        m.renamed(p, name(a), q, name(b));
                    }
                }
                proptest::prop_assert_eq!(&n.met, &m.0);
                let mut listed: Vec<(u64, u64, String)> = (n.by_entry.iter())
                    .flat_map(|((p, name), inos)| inos.iter().map(move |i| (*i, *p, name.clone())))
                    .collect();
                let mut all = n.all();
                listed.sort();
                all.sort();
                proptest::prop_assert_eq!(listed, all);
            }
        }
    }
}
