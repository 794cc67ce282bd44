//! From what a listing returns to the entries of a walk; paths and tags.
//!
//! Pure. A recursive listing of an object store returns keys only: a
//! directory exists there because a key lies below it or because an empty
//! `dir/` marker object names it. `build_tree` turns any such listing into the
//! walk's answer, with these invariants: paths are relative, '/'-separated,
//! without leading or trailing '/'; every ancestor of an entry is a directory
//! entry; each path appears once, in byte order of the path; if a store holds
//! both an object `a` and keys below `a/` (possible in S3, not in a directory
//! tree), the directory wins, as `stat` decides too.

use std::collections::BTreeMap;

use tierpool_types::{Error, Result};

use crate::UnderEntry;

/// One item of a listing, its path relative to the store's root.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// May end in '/' (directories and S3 markers).
    pub(crate) path: String,
    pub(crate) is_dir: bool,
    pub(crate) size: u64,
    pub(crate) mtime_ns: u64,
    pub(crate) etag: String,
}

/// The walk's entries for a listing: see the module header.
pub(crate) fn build_tree(listed: Vec<Listed>) -> Vec<UnderEntry> {
    let mut tree: BTreeMap<String, UnderEntry> = BTreeMap::new();
    for item in listed {
        let entry = entry(item);
        let (path, is_dir) = (entry.path.clone(), entry.is_dir);
        if path.is_empty() {
            continue;
        }
        add_ancestors(&mut tree, &path);
        match tree.get(&path) {
            Some(old) if old.is_dir && !is_dir => {
                tracing::warn!("{path:?} is both an object and a directory in the under-store; showing the directory");
            }
            Some(old) if old.is_dir && old.mtime_ns != 0 => {}
            _ => {
                tree.insert(path, entry);
            }
        }
    }
    tree.into_values().collect()
}

/// The entry of one listing item: a path ending in '/' is a directory.
pub(crate) fn entry(item: Listed) -> UnderEntry {
    let is_dir = item.is_dir || item.path.ends_with('/');
    let path = item.path.trim_matches('/').to_string();
    if is_dir {
        UnderEntry { path, is_dir, size: 0, mtime_ns: item.mtime_ns, etag: String::new() }
    } else {
        UnderEntry { path, is_dir, size: item.size, mtime_ns: item.mtime_ns, etag: item.etag }
    }
}

fn add_ancestors(tree: &mut BTreeMap<String, UnderEntry>, path: &str) {
    let mut end = 0;
    while let Some(i) = path[end..].find('/') {
        let dir = &path[..end + i];
        match tree.get(dir) {
            Some(e) if e.is_dir => {}
            _ => {
                let entry =
                    UnderEntry { path: dir.to_string(), is_dir: true, size: 0, mtime_ns: 0, etag: String::new() };
                tree.insert(dir.to_string(), entry);
            }
        }
        end += i + 1;
    }
}

/// A caller's path, checked and without leading or trailing '/': "" is the root.
pub(crate) fn clean(path: &str) -> Result<String> {
    let p = path.trim_matches('/');
    if !p.is_empty() && p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(Error::invalid(format!(
            "{path:?}: a path inside an under-store cannot have empty, '.' or '..' parts"
        )));
    }
    Ok(p.to_string())
}

/// The version tag of a file of a directory store.
pub(crate) fn dir_tag(size: u64, mtime_ns: u64) -> String {
    format!("{size}-{mtime_ns}")
}

/// An S3 ETag without its quotes (and without the weak marker some servers add).
pub(crate) fn s3_tag(raw: &str) -> String {
    raw.trim_start_matches("W/").trim_matches('"').to_string()
}

/// Nanoseconds since the Unix epoch; 0 for none or before 1970.
pub(crate) fn mtime_ns(t: Option<opendal::raw::Timestamp>) -> u64 {
    let since_epoch = t.and_then(|t| std::time::SystemTime::from(t).duration_since(std::time::UNIX_EPOCH).ok());
    since_epoch.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(path: &str, size: u64) -> Listed {
        Listed { path: path.into(), is_dir: false, size, mtime_ns: 7, etag: format!("e{size}") }
    }

    fn dir(path: &str) -> Listed {
        Listed { path: path.into(), is_dir: true, size: 0, mtime_ns: 0, etag: String::new() }
    }

    fn paths(entries: &[UnderEntry]) -> Vec<(String, bool)> {
        entries.iter().map(|e| (e.path.clone(), e.is_dir)).collect()
    }

    #[test]
    fn keys_make_their_directories_and_markers_make_empty_ones() {
        let tree = build_tree(vec![file("a/b/c.bin", 3), file("top", 1), dir("empty/"), file("a/x", 2), dir("")]);
        let want = [("a", true), ("a/b", true), ("a/b/c.bin", false), ("a/x", false), ("empty", true), ("top", false)];
        let want: Vec<(String, bool)> = want.iter().map(|(p, d)| (p.to_string(), *d)).collect();
        assert_eq!(paths(&tree), want);
        let c = tree.iter().find(|e| e.path == "a/b/c.bin").unwrap();
        assert_eq!((c.size, c.mtime_ns, c.etag.as_str()), (3, 7, "e3"));
        assert!(tree.iter().filter(|e| e.is_dir).all(|e| e.size == 0 && e.etag.is_empty()));
    }

    #[test]
    fn a_directory_wins_over_an_object_of_the_same_name() {
        for order in [vec![file("a", 1), file("a/b", 2)], vec![file("a/b", 2), file("a", 1)]] {
            let tree = build_tree(order);
            assert_eq!(paths(&tree), vec![("a".to_string(), true), ("a/b".to_string(), false)]);
        }
    }

    #[test]
    fn clean_refuses_escapes_and_trims_slashes() {
        assert_eq!(clean("/a/b/").unwrap(), "a/b");
        assert_eq!(clean("").unwrap(), "");
        for bad in ["a/../b", "./a", "a//b", ".."] {
            assert!(clean(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tags() {
        assert_eq!(dir_tag(10, 1_700_000_000_123_456_789), "10-1700000000123456789");
        assert_eq!(s3_tag("\"abc-2\""), "abc-2");
        assert_eq!(s3_tag("W/\"abc\""), "abc");
    }

    proptest! {
        /// Against a naive model: the walk holds exactly the files given and
        /// every proper prefix of their paths as a directory, sorted, once each.
        #[test]
        fn walk_holds_files_and_all_their_ancestors(keys in prop::collection::btree_set("[ab]{1,2}(/[ab]{1,2}){0,3}", 0..12)) {
            let files: Vec<&String> = keys.iter().filter(|k| !keys.iter().any(|o| o.starts_with(&format!("{k}/")))).collect();
            let tree = build_tree(files.iter().map(|k| file(k, k.len() as u64)).collect());
            let mut want: BTreeMap<String, bool> = BTreeMap::new();
            for k in &files {
                want.insert(k.to_string(), false);
                let parts: Vec<&str> = k.split('/').collect();
                for i in 1..parts.len() {
                    want.insert(parts[..i].join("/"), true);
                }
            }
            let want: Vec<(String, bool)> = want.into_iter().collect();
            prop_assert_eq!(paths(&tree), want);
        }
    }
}
