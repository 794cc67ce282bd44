//! Where a path leads in a transaction's own namespace: the pool as the
//! transaction began, changed by the namespace steps it made so far
//! ([`TxNs`]). Pure: the client resolves its reads with it, the engine
//! finds the entries of the pool a commit's steps touch.
//!
//! [`trace`] walks the steps from the newest back. A step that made the
//! path (or an ancestor) says what it is; one that removed it, or moved it
//! away, says it is missing; one that moved it here from elsewhere sends
//! the walk on with the path it had before. A path no step touched is the
//! pool's path as the transaction began ([`Traced::Before`]).
//!
//! Invariant (property-tested in `tests/behaviour/txns.rs`): after steps
//! that each were valid where they ran, `trace` says what a namespace that
//! ran them would hold at the path.

use crate::path::normalize;
use crate::TxNs;
use tierpool_types::{ErrorKind, InodeId, Result};

/// What a path is in a transaction's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Traced {
    /// Whatever the pool held at this path when the transaction began.
    Before(Vec<String>),
    /// A directory the transaction made (its entries are the steps' only).
    NewDir,
    /// A file the transaction made, with this id.
    NewFile(InodeId),
    /// Nothing: an ancestor or the path itself was removed or moved away
    /// (`NotFound`), or an ancestor is a file the transaction made
    /// (`NotADirectory`).
    Missing(ErrorKind),
}

/// Where `comps` leads after `steps`.
pub fn trace(steps: &[TxNs], comps: &[String]) -> Result<Traced> {
    let mut cur = comps.to_vec();
    for step in steps.iter().rev() {
        match step {
            TxNs::Mkdir { path, .. } => match relation(&cur, &normalize(path)?) {
                Some(0) => return Ok(Traced::NewDir),
                Some(_) => return Ok(Traced::Missing(ErrorKind::NotFound)),
                None => {}
            },
            TxNs::Create { path, file, .. } => match relation(&cur, &normalize(path)?) {
                Some(0) => return Ok(Traced::NewFile(file.inode)),
                Some(_) => return Ok(Traced::Missing(ErrorKind::NotADirectory)),
                None => {}
            },
            TxNs::Remove { path, .. } => {
                if relation(&cur, &normalize(path)?).is_some() {
                    return Ok(Traced::Missing(ErrorKind::NotFound));
                }
            }
            TxNs::Rename { from, to } => match moved(&cur, &normalize(to)?, &normalize(from)?) {
                Some(Some(was)) => cur = was,
                Some(None) => return Ok(Traced::Missing(ErrorKind::NotFound)),
                None => {}
            },
        }
    }
    Ok(Traced::Before(cur))
}

/// Where the entry at `comps` (as the steps before `steps` left the
/// namespace) is after `steps`: `None` if one of them removed or replaced it.
pub fn forward(steps: &[TxNs], comps: &[String]) -> Result<Option<Vec<String>>> {
    let mut cur = comps.to_vec();
    for step in steps {
        match step {
            TxNs::Remove { path, .. } => {
                if relation(&cur, &normalize(path)?).is_some() {
                    return Ok(None);
                }
            }
            TxNs::Rename { from, to } => match moved(&cur, &normalize(from)?, &normalize(to)?) {
                Some(Some(now)) => cur = now,
                Some(None) => return Ok(None),
                None => {}
            },
            TxNs::Mkdir { .. } | TxNs::Create { .. } => {}
        }
    }
    Ok(Some(cur))
}

/// A move of `src` to `dst` seen from `path`: `Some(Some(p))` if `path`
/// is `src` or beneath it (now at `p`), `Some(None)` if it is `dst` or
/// beneath (what was there is gone), `None` if the move leaves it be.
fn moved(path: &[String], src: &[String], dst: &[String]) -> Option<Option<Vec<String>>> {
    if src == dst {
        return None;
    }
    if relation(path, src).is_some() {
        let mut p = dst.to_vec();
        p.extend_from_slice(&path[src.len()..]);
        return Some(Some(p));
    }
    relation(path, dst).map(|_| None)
}

/// `Some(n)` when `path` is `base` (0) or lies `n` levels beneath it.
fn relation(path: &[String], base: &[String]) -> Option<usize> {
    path.starts_with(base).then(|| path.len() - base.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TxFile;

    fn n(p: &str) -> Vec<String> {
        normalize(p).unwrap()
    }

    fn mv(a: &str, b: &str) -> TxNs {
        TxNs::Rename { from: a.into(), to: b.into() }
    }

    #[test]
    fn moves_send_the_walk_back_to_where_a_path_was() {
        let steps = [mv("/a", "/b"), TxNs::Mkdir { path: "/a".into(), mode: 0o755 }, mv("/b/x", "/a/y")];
        assert_eq!(trace(&steps, &n("/a/y/z")).unwrap(), Traced::Before(n("/a/x/z")));
        assert_eq!(trace(&steps, &n("/b/w")).unwrap(), Traced::Before(n("/a/w")));
        assert_eq!(trace(&steps, &n("/b/x")).unwrap(), Traced::Missing(ErrorKind::NotFound));
        assert_eq!(trace(&steps, &n("/a")).unwrap(), Traced::NewDir);
        assert_eq!(trace(&steps, &n("/a/w")).unwrap(), Traced::Missing(ErrorKind::NotFound));
        assert_eq!(trace(&steps, &n("/c")).unwrap(), Traced::Before(n("/c")));
    }

    #[test]
    fn made_files_and_removals() {
        let file = TxFile { inode: InodeId(9), size: 0, truncate: None, chunks: Vec::new() };
        let steps = [
            TxNs::Remove { path: "/d".into(), recursive: true },
            TxNs::Create { path: "/d".into(), mode: 0o644, chunk_size: 1 << 20, file },
        ];
        assert_eq!(trace(&steps, &n("/d")).unwrap(), Traced::NewFile(InodeId(9)));
        assert_eq!(trace(&steps, &n("/d/e")).unwrap(), Traced::Missing(ErrorKind::NotADirectory));
        assert_eq!(trace(&steps[..1], &n("/d/e")).unwrap(), Traced::Missing(ErrorKind::NotFound));
        assert_eq!(trace(&[], &n("/")).unwrap(), Traced::Before(Vec::new()));
    }

    #[test]
    fn forward_follows_an_entry_through_later_moves() {
        let steps = [mv("/a", "/b"), mv("/b/x", "/c"), TxNs::Remove { path: "/b".into(), recursive: true }];
        assert_eq!(forward(&steps[..2], &n("/a/x/y")).unwrap(), Some(n("/c/y")));
        assert_eq!(forward(&steps[..1], &n("/a/z")).unwrap(), Some(n("/b/z")));
        assert_eq!(forward(&steps, &n("/a/z")).unwrap(), None);
        assert_eq!(forward(&[mv("/q", "/c")], &n("/c/y")).unwrap(), None, "replaced");
    }
}
