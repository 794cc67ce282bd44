//! The first-committer-wins check of a transaction's namespace steps, as
//! pure code: whether a commit since the transaction began changed an
//! entry or an inode its steps touch.
//!
//! Each path a step names is traced back through the transaction's own
//! steps to where it was at begin (`overlay::trace`); there the entry and
//! its directory must resolve to the same inodes (or the same absence) in
//! the view and live. A step that drops inodes must not drop a change made
//! since begin: a removal, of the inode it removes (with `recursive`, of
//! every inode of its tree, view's and live, and of every tree the
//! transaction moved into it before), a move, of the inode it replaces.
//! "Changed since begin" is "noted since begin" (see `transactions`): any
//! op of another committer that touched the inode (its bytes, size, mode,
//! times, or a directory's entries).

use crate::overlay::{forward, trace, Traced};
use crate::state::Image;
use crate::{normalize, MetaState, TxNs};
use tierpool_types::{InodeId, Result};

/// A view's images by inode (`None`: unchanged since the view's begin).
pub(super) type Then<'a, 'b> = &'b dyn Fn(InodeId) -> Option<&'a Image>;

/// The first path (as at begin) whose entry or inode the steps `ns` touch
/// and another commit changed, with what happened to it.
pub(super) fn first_changed<'a>(
    state: &'a MetaState,
    ns: &[TxNs],
    then: Then<'a, '_>,
) -> Result<Option<(Vec<String>, &'static str)>> {
    let live = |_: InodeId| None;
    let changed = |id: InodeId| then(id).is_some();
    let before = |i: usize, p: &str| -> Result<Option<Vec<String>>> {
        Ok(match trace(&ns[..i], &normalize(p)?)? {
            Traced::Before(q) => Some(q),
            _ => None,
        })
    };
    for (i, step) in ns.iter().enumerate() {
        for path in step.paths() {
            let Some(q) = before(i, path)? else { continue };
            for c in [&q[..q.len().saturating_sub(1)], &q[..]] {
                if state.lookup_in(c, then).map_err(|e| e.kind) != state.lookup_in(c, &live).map_err(|e| e.kind) {
                    return Ok(Some((c.to_vec(), "was made, removed or replaced")));
                }
            }
        }
        match step {
            TxNs::Remove { path, recursive } => {
                // What it removes: the entry at begin, and trees moved into it before.
                let mut roots: Vec<Vec<String>> = before(i, path)?.into_iter().collect();
                let target = normalize(path)?;
                for (k, s) in ns[..i].iter().enumerate() {
                    let TxNs::Rename { from, to } = s else { continue };
                    let Some(src) = before(k, from)? else { continue };
                    if forward(&ns[k + 1..i], &normalize(to)?)?.is_some_and(|at| at.starts_with(&target)) {
                        roots.push(src);
                    }
                }
                for root in roots {
                    let Ok(id) = state.lookup_in(&root, &live) else { continue };
                    let mut ids = vec![id];
                    if *recursive {
                        ids.extend(state.tree_in(id, then).into_iter().map(|(_, _, c)| c));
                        ids.extend(state.tree_in(id, &live).into_iter().map(|(_, _, c)| c));
                    }
                    if ids.into_iter().any(changed) {
                        return Ok(Some((root, "was changed (or something beneath it)")));
                    }
                }
            }
            TxNs::Rename { from, to } => {
                let (Some(src), Some(dst)) = (before(i, from)?, before(i, to)?) else { continue };
                let replaced = state.lookup_in(&dst, &live);
                if let Ok(id) = replaced {
                    if state.lookup_in(&src, &live).ok() != Some(id) && changed(id) {
                        return Ok(Some((dst, "was changed")));
                    }
                }
            }
            TxNs::Mkdir { .. } | TxNs::Create { .. } => {}
        }
    }
    Ok(None)
}
