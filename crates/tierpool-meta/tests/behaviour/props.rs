//! The state machine's contract, over random op sequences: failures are
//! atomic, successful ops replay to the same state, the state survives a
//! serde round trip, its invariants hold after every op, and a directory's
//! ancestry names the path a walk from the root takes to it.

use crate::common::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use tierpool_meta::{InodeKind, MetaState};
use tierpool_types::ErrorKind;
use tierpool_types::InodeId;

/// Ids of every inode reachable from the root, failing on a directory seen
/// twice (other inodes may have several names).
fn reachable(s: &MetaState) -> Result<BTreeSet<InodeId>, String> {
    let mut seen = BTreeSet::from([InodeId::ROOT]);
    let mut dirs = vec![String::new()];
    while let Some(dir) = dirs.pop() {
        for e in s.list(&format!("{dir}/")).map_err(|e| e.message)? {
            if !seen.insert(e.info.id) && e.info.kind == InodeKind::Dir {
                return Err(format!("inode {} is reachable twice", e.info.id));
            }
            if e.info.kind == InodeKind::Dir {
                dirs.push(format!("{dir}/{}", e.name));
            }
        }
    }
    Ok(seen)
}

/// Every directory reachable from the root with the chain of (inode,
/// name) a walk of listings takes to it, root side first.
fn walked_dirs(s: &MetaState) -> Vec<(InodeId, Vec<(InodeId, String)>)> {
    let mut out = vec![(InodeId::ROOT, Vec::new())];
    let mut i = 0;
    while let Some((_, chain)) = out.get(i).cloned() {
        let path: String = chain.iter().map(|(_, n)| format!("/{n}")).collect();
        for e in s.list(&format!("{path}/")).unwrap().into_iter().filter(|e| e.info.kind == InodeKind::Dir) {
            let mut below = chain.clone();
            below.push((e.info.id, e.name));
            out.push((e.info.id, below));
        }
        i += 1;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn ancestry_names_the_path_a_walk_takes(ops in op_sequence()) {
        let d = Driver::run(ops);
        let s = &d.state;
        if !s.is_initialised() {
            prop_assert_eq!(s.ancestry(InodeId::ROOT).map_err(|e| e.kind), Err(ErrorKind::InvalidArgument));
            return Ok(());
        }
        let dirs = walked_dirs(s);
        for (id, chain) in &dirs {
            prop_assert_eq!(&s.ancestry(*id).unwrap(), chain, "directory {}", id);
        }
        let files = reachable(s).unwrap().into_iter().filter(|id| dirs.iter().all(|(d, _)| d != id));
        for id in files {
            prop_assert_eq!(s.ancestry(id).map_err(|e| e.kind), Err(ErrorKind::NotADirectory), "inode {}", id);
        }
        let gone = InodeId(u64::MAX / 2);
        prop_assert_eq!(s.ancestry(gone).map_err(|e| e.kind), Err(ErrorKind::NotFound));
    }

    #[test]
    fn failed_ops_leave_the_state_unchanged(ops in op_sequence()) {
        let mut d = Driver::new();
        for (owner, op) in ops {
            let (op, before, r) = d.step_as(owner, op);
            if let Err(e) = r {
                prop_assert_eq!(&d.state, &before, "{:?} failed with {:?} but changed the state", op, e);
                prop_assert!(!e.message.contains('\n') && !e.message.is_empty(), "message {:?}", e.message);
            }
        }
    }

    #[test]
    fn replaying_the_successful_ops_rebuilds_the_same_state(ops in op_sequence()) {
        let d = Driver::run(ops);
        let mut replayed = MetaState::new();
        for ((owner, op), now, reply) in &d.log {
            prop_assert_eq!(replayed.execute_as(op, *owner, *now), Ok(reply.clone()), "replay of {:?}", op);
        }
        prop_assert_eq!(replayed, d.state);
    }

    #[test]
    fn taking_the_state_apart_and_back_keeps_it(ops in op_sequence()) {
        let d = Driver::run(ops);
        let back = MetaState::from_parts(d.state.view().to_parts()).unwrap();
        prop_assert_eq!(back, d.state);
    }

    #[test]
    fn invariants_hold_after_every_op(ops in op_sequence()) {
        let mut d = Driver::new();
        for (owner, op) in ops {
            let (op, _, _) = d.step_as(owner, op);
            let s = &d.state;
            if let Err(e) = s.check_invariants() {
                return Err(TestCaseError::fail(format!("after {op:?}: {}", e.message)));
            }
            if !s.is_initialised() {
                continue;
            }
            let live = reachable(s).map_err(TestCaseError::fail)?;
            prop_assert_eq!(live.len() as u64, s.inode_count(), "after {:?}", op);
            prop_assert!(live.is_disjoint(s.pending_gc()), "after {:?}", op);
            if !s.workers().is_empty() {
                // Every partition has a known holder (in a replicated pool
                // its first slot may be let go while a worker is down or
                // restarting: another replica holds it then).
                for p in 0..s.table().partitions() {
                    let holders = s.table().holders(p);
                    prop_assert!(
                        !holders.is_empty() && holders.iter().all(|w| s.workers().contains_key(w)),
                        "partition {} holders {:?}", p, holders
                    );
                }
            }
        }
    }
}
