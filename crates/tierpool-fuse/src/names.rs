//! FUSE inode numbers for pool paths.
//!
//! The pool's own inode ids change when a file is replaced (a new version is
//! a new inode), so the mount numbers paths itself: a path keeps its number
//! across replacements and renames. The root is 1.

use std::collections::HashMap;

#[derive(Default)]
pub struct Names {
    paths: HashMap<u64, String>,
    inos: HashMap<String, u64>,
    next: u64,
}

impl Names {
    pub fn new() -> Names {
        let mut n = Names { next: 2, ..Default::default() };
        n.paths.insert(1, "/".into());
        n.inos.insert("/".into(), 1);
        n
    }

    pub fn path(&self, ino: u64) -> Option<String> {
        self.paths.get(&ino).cloned()
    }

    /// The number of `path`, given one if it has none.
    pub fn ino(&mut self, path: &str) -> u64 {
        if let Some(i) = self.inos.get(path) {
            return *i;
        }
        let i = self.next;
        self.next += 1;
        self.paths.insert(i, path.to_string());
        self.inos.insert(path.to_string(), i);
        i
    }

    /// `from` (and everything beneath it) is now `to`; what was at `to` is gone.
    pub fn renamed(&mut self, from: &str, to: &str) {
        self.removed(to);
        let prefix = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .inos
            .iter()
            .filter(|(p, _)| *p == from || p.starts_with(&prefix))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (p, i) in moved {
            self.inos.remove(&p);
            let np = format!("{to}{}", &p[from.len()..]);
            self.paths.insert(i, np.clone());
            self.inos.insert(np, i);
        }
    }

    /// `path` (and everything beneath it) no longer exists.
    pub fn removed(&mut self, path: &str) {
        let prefix = format!("{path}/");
        let gone: Vec<String> = self.inos.keys().filter(|p| *p == path || p.starts_with(&prefix)).cloned().collect();
        for p in gone {
            if let Some(i) = self.inos.remove(&p) {
                self.paths.remove(&i);
            }
        }
    }
}

pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_move_subtrees_and_keep_numbers() {
        let mut n = Names::new();
        let (a, ab, x) = (n.ino("/a"), n.ino("/a/b"), n.ino("/x"));
        n.renamed("/a", "/x");
        assert_eq!((n.path(a).as_deref(), n.path(ab).as_deref(), n.path(x)), (Some("/x"), Some("/x/b"), None));
        assert_eq!(n.ino("/x/b"), ab);
        n.removed("/x");
        assert_eq!((n.path(a), n.path(ab)), (None, None));
        assert_eq!(join("/", "f"), "/f");
        assert_eq!(join("/d", "f"), "/d/f");
    }
}
