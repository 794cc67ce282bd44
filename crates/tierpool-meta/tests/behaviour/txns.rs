//! `Transact` with namespace steps: all or nothing (a failing step puts
//! back everything, files included), the same as running its steps one by
//! one, and `overlay::trace` agrees with the namespace the steps leave.

use crate::common::*;
use proptest::prelude::*;
use tierpool_meta::overlay::{trace, Traced};
use tierpool_meta::{normalize, MetaOp, MetaState, TxFile, TxNs};
use tierpool_types::{ChunkRef, ErrorKind, InodeId};

const PATHS: [&str; 10] = ["/a", "/a/b", "/a/f", "/c", "/c/g", "/d", "/d/x", "/a/b/y", "/c/d", "/e"];

/// /a, /a/b, /c dirs; /a/f (1 chunk) and /c/g (2 chunks) files; /c/g
/// rewritten once, so a replaced version waits for collection.
fn begin() -> MetaState {
    let mut s = ready();
    for d in ["/a", "/a/b", "/c"] {
        mkdir(&mut s, d);
    }
    commit(&mut s, "/a/f", CHUNK);
    let g = commit(&mut s, "/c/g", 2 * CHUNK).id;
    let v = alloc(&mut s).0;
    let chunk = ChunkRef { version: v, len: CHUNK, checksum: 7, home: None };
    s.execute(&MetaOp::UpdateFile { inode: g, size: 2 * CHUNK, truncate: None, chunks: vec![(1, chunk)] }, 3).unwrap();
    s.take_garbage();
    s
}

#[derive(Clone, Debug)]
enum Step {
    Mkdir(usize),
    Create(usize),
    Remove(usize, bool),
    Rename(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    let p = 0..PATHS.len();
    prop_oneof![
        p.clone().prop_map(Step::Mkdir),
        p.clone().prop_map(Step::Create),
        (p.clone(), any::<bool>()).prop_map(|(i, r)| Step::Remove(i, r)),
        (p.clone(), p).prop_map(|(a, b)| Step::Rename(a, b)),
    ]
}

/// The step, with `ids` the reserved ids a created file and its chunk take.
fn ns(step: &Step, ids: &mut impl Iterator<Item = u64>) -> TxNs {
    let path = |i: &usize| PATHS[*i].to_owned();
    match step {
        Step::Mkdir(i) => TxNs::Mkdir { path: path(i), mode: 0o755 },
        Step::Create(i) => {
            let (inode, version) = (InodeId(ids.next().unwrap()), ids.next().unwrap());
            let chunk = ChunkRef { version, len: 100, checksum: 5, home: None };
            let file = TxFile { inode, size: 100, truncate: None, chunks: vec![(0, chunk)] };
            TxNs::Create { path: path(i), mode: 0o644, chunk_size: CHUNK, file }
        }
        Step::Remove(i, recursive) => TxNs::Remove { path: path(i), recursive: *recursive },
        Step::Rename(a, b) => TxNs::Rename { from: path(a), to: path(b) },
    }
}

fn transact(files: Vec<TxFile>, ns: Vec<TxNs>) -> MetaOp {
    MetaOp::Transact { task: None, files, ns, regions: Vec::new() }
}

/// Where a path leads in a state: an inode, or why none.
fn at(s: &MetaState, comps: &[String]) -> Result<InodeId, ErrorKind> {
    s.lookup_in(comps, &|_| None).map_err(|e| e.kind)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn steps_commit_all_or_nothing_as_if_run_one_by_one(steps in prop::collection::vec(step(), 1..9)) {
        let mut start = begin();
        let ids: Vec<u64> = (0..2 * steps.len()).map(|_| alloc(&mut start).0).collect();
        let mut ids = ids.into_iter();
        // A write of /a/f rides along: a failing step must undo it too.
        let f = start.stat("/a/f").unwrap().id;
        let v = alloc(&mut start).0;
        let write = TxFile {
            inode: f,
            size: 10,
            truncate: Some(10),
            chunks: vec![(0, ChunkRef { version: v, len: 10, checksum: 3, home: None })],
        };
        // Keep the steps that run, each in a transaction of its own.
        let (mut one_by_one, mut kept, mut refused) = (start.clone(), Vec::new(), Vec::new());
        one_by_one.execute(&transact(vec![write.clone()], Vec::new()), 5).unwrap();
        for st in &steps {
            let n = ns(st, &mut ids);
            match one_by_one.execute(&transact(Vec::new(), vec![n.clone()]), 5) {
                Ok(_) => kept.push(n),
                Err(_) => refused.push(n),
            }
        }
        // All at once: the same state.
        let mut all = start.clone();
        all.execute(&transact(vec![write.clone()], kept.clone()), 5).unwrap();
        prop_assert_eq!(&all, &one_by_one);
        all.check_invariants().unwrap();
        // The trace of every path agrees with what the steps left.
        for p in PATHS.iter().chain(["/a/b/y/z", "/d/x/w", "/"].iter()) {
            let comps = normalize(p).unwrap();
            let now = at(&all, &comps);
            match trace(&kept, &comps).unwrap() {
                Traced::Before(q) => prop_assert_eq!(at(&start, &q), now, "{}", p),
                Traced::NewDir => {
                    let id = now.unwrap();
                    prop_assert!(at(&start, &comps) != Ok(id) && all.stat(p).unwrap().kind == tierpool_meta::InodeKind::Dir);
                }
                Traced::NewFile(id) => prop_assert_eq!(now, Ok(id)),
                Traced::Missing(kind) => prop_assert_eq!(now, Err(kind), "{}", p),
            }
        }
        // A step that cannot run after them fails the whole op, and
        // leaves nothing behind: not the steps before it, not the write.
        for bad in refused {
            let mut s = start.clone();
            let mut steps = kept.clone();
            steps.push(bad);
            if one_by_one.clone().execute(&transact(Vec::new(), vec![steps.last().unwrap().clone()]), 5).is_ok() {
                continue;
            }
            let before = s.clone();
            s.take_garbage();
            prop_assert!(s.execute(&transact(vec![write.clone()], steps), 5).is_err());
            prop_assert_eq!(&s, &before);
            prop_assert!(s.take_garbage().is_empty());
            s.check_invariants().unwrap();
        }
    }
}

#[test]
fn steps_beneath_snapshots_or_at_a_taken_path_are_refused() {
    let mut s = begin();
    let id = alloc(&mut s);
    let file = TxFile { inode: id, size: 0, truncate: None, chunks: Vec::new() };
    let create = |path: &str| TxNs::Create { path: path.into(), mode: 0o644, chunk_size: CHUNK, file: file.clone() };
    let (kind, msg) = fails(&mut s, transact(Vec::new(), vec![create("/a/f")]));
    assert_eq!((kind, msg.as_str()), (ErrorKind::AlreadyExists, "step 1 of the transaction: /a/f: file exists"));
    let (kind, _) = fails(&mut s, transact(Vec::new(), vec![create("/a/.snapshots/x")]));
    assert_eq!(kind, ErrorKind::ReadOnly);
    let steps = vec![TxNs::Mkdir { path: "/n".into(), mode: 0o755 }, create("/n/x"), create("/n/x")];
    let (kind, msg) = fails(&mut s, transact(Vec::new(), steps));
    assert_eq!((kind, msg.as_str()), (ErrorKind::AlreadyExists, "step 3 of the transaction: /n/x: file exists"));
    // A made file is a file as any other.
    let steps = vec![TxNs::Mkdir { path: "/n".into(), mode: 0o755 }, create("/n/x")];
    s.execute(&transact(Vec::new(), steps), 9).unwrap();
    assert_eq!(s.stat("/n/x").unwrap().id, id);
    s.check_invariants().unwrap();
}
