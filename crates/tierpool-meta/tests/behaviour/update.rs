//! `UpdateFile`: chunk versions and sizes of a file, checked by examples and
//! against a naive model (a vector of chunk entries, the size, and the set
//! of versions that became garbage).

use crate::common::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, MetaState, NewNode};
use tierpool_types::{ChunkKey, ChunkRef, ErrorKind, InodeId};

fn r(version: u64, len: u64) -> ChunkRef {
    ChunkRef { version, len, checksum: (version * 31 + len) as u32, home: None }
}

fn update(inode: InodeId, size: u64, truncate: Option<u64>, chunks: Vec<(u64, ChunkRef)>) -> MetaOp {
    MetaOp::UpdateFile { inode, size, truncate, chunks }
}

fn empty_file(s: &mut MetaState) -> InodeInfo {
    let op = MetaOp::MakeAt {
        parent: InodeId::ROOT,
        name: "f".into(),
        node: NewNode::File { chunk_size: CHUNK },
        mode: 0o644,
    };
    match s.execute(&op, 5).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn apply(s: &mut MetaState, op: MetaOp, now: u64) -> InodeInfo {
    match s.execute(&op, now).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn key(inode: InodeId, index: u64, version: u64) -> ChunkKey {
    ChunkKey::hashed(inode, index, version)
}

#[test]
fn updates_publish_chunk_versions_and_collect_the_replaced() {
    let mut s = ready();
    let f = empty_file(&mut s);
    // write 2.5 chunks
    let i = apply(&mut s, update(f.id, 10_000, None, vec![(0, r(7, 4096)), (1, r(7, 4096)), (2, r(7, 1808))]), 20);
    assert_eq!((i.size, i.mtime, i.ctime), (10_000, 20, 20));
    assert_eq!(i.chunks, vec![r(7, 4096), r(7, 4096), r(7, 1808)]);
    assert!(s.pending_chunks().is_empty());
    // rewrite chunk 1: version 7 of it becomes garbage
    apply(&mut s, update(f.id, 4100, None, vec![(1, r(9, 4096))]), 21);
    assert_eq!(s.stat("/f").unwrap().size, 10_000, "without truncate a file never shrinks");
    assert_eq!(s.pending_chunks().iter().copied().collect::<Vec<_>>(), vec![key(f.id, 1, 7)]);
    // republishing the same version is not garbage
    apply(&mut s, update(f.id, 0, None, vec![(1, r(9, 4096))]), 22);
    assert_eq!(s.pending_chunks().len(), 1);
    // grow with a hole: the short last chunk needs no rewrite
    let i = apply(&mut s, update(f.id, 5 * CHUNK, Some(5 * CHUNK), vec![]), 23);
    assert_eq!(i.chunks, vec![r(7, 4096), r(9, 4096), r(7, 1808), ChunkRef::HOLE, ChunkRef::HOLE]);
    s.check_invariants().unwrap();
    // truncate through chunk 1 with a shortened version; chunks 2.. go
    let i = apply(&mut s, update(f.id, 5000, Some(5000), vec![(1, r(10, 904))]), 24);
    assert_eq!((i.size, i.chunks.clone()), (5000, vec![r(7, 4096), r(10, 904)]));
    let pending: BTreeSet<_> = s.pending_chunks().iter().copied().collect();
    assert_eq!(pending, BTreeSet::from([key(f.id, 1, 7), key(f.id, 1, 9), key(f.id, 2, 7)]));
    s.check_invariants().unwrap();
    // collected versions are forgotten; removing the file forgets the rest
    s.execute(&MetaOp::GcChunksDone { keys: vec![key(f.id, 1, 7)] }, 25).unwrap();
    assert_eq!(s.pending_chunks().len(), 2);
    s.execute(&remove_op("/f", false), 26).unwrap();
    assert!(s.pending_chunks().is_empty() && s.pending_gc().contains(&f.id));
}

#[test]
fn updates_that_break_the_layout_are_refused() {
    let mut s = ready();
    let f = empty_file(&mut s);
    apply(&mut s, update(f.id, 2 * CHUNK, None, vec![(0, r(3, 4096)), (1, r(3, 4096))]), 20);
    let d = s.execute(&mkdir_op("/d", false), 21).map(|_| s.stat("/d").unwrap().id).unwrap();
    let cases = [
        (
            update(f.id, 5000, Some(5000), vec![]),
            "the cut to 5000 bytes goes through chunk 1; send a shortened version of it",
        ),
        (update(f.id, 100, Some(200), vec![]), "a file cut to Some(200) bytes cannot end at 100"),
        (update(f.id, 100, None, vec![(2, r(4, 1))]), "chunk 2 is past the end (8192 bytes)"),
        (
            update(f.id, 100, None, vec![(1, r(4, 4097))]),
            "chunk 1 version 4 of 4097 bytes does not fit the chunk's 4096 bytes",
        ),
        (update(f.id, 0, None, vec![(1, r(4, 1)), (0, r(4, 1))]), "chunk updates must be in increasing index order"),
        (update(f.id, 0, None, vec![(0, ChunkRef { version: 0, len: 5, checksum: 0, home: None })]), ""),
    ];
    for (op, message) in cases {
        let (kind, m) = fails(&mut s, op);
        assert_eq!(kind, ErrorKind::InvalidArgument, "{m}");
        if !message.is_empty() {
            assert_eq!(m, format!("inode {}: {message}", f.id));
        }
    }
    assert_eq!(fails(&mut s, update(d, 0, None, vec![])).0, ErrorKind::IsADirectory);
    assert_eq!(fails(&mut s, update(InodeId(999), 0, None, vec![])).0, ErrorKind::NotFound);
    // a version already replaced cannot come back (its object may be deleted)
    apply(&mut s, update(f.id, 0, None, vec![(0, r(5, 4096))]), 22);
    assert_eq!(fails(&mut s, update(f.id, 0, None, vec![(0, r(3, 4096))])).0, ErrorKind::InvalidArgument);
}

/// The rules of `UpdateFile`, written out over plain vectors.
#[derive(Debug, Default)]
struct Model {
    size: u64,
    chunks: Vec<ChunkRef>,
    garbage: BTreeSet<(u64, u64)>,
}

impl Model {
    fn apply(&mut self, size: u64, truncate: Option<u64>, ups: &[(u64, ChunkRef)]) -> Result<(), ()> {
        if truncate.is_some_and(|t| t > size) {
            return Err(());
        }
        // Cut first: bytes past the cut are gone, so a chunk cut through
        // must not hold any (unless rewritten below).
        let mut next = self.chunks.clone();
        if let Some(t) = truncate {
            next.truncate(t.div_ceil(CHUNK) as usize);
            if let Some(last) = next.last() {
                let start = (next.len() as u64 - 1) * CHUNK;
                if last.len > t - start && !ups.iter().any(|(i, _)| *i == next.len() as u64 - 1) {
                    return Err(());
                }
            }
        }
        let new_size = if truncate.is_some() { size } else { size.max(self.size) };
        let count = new_size.div_ceil(CHUNK);
        let share = |i: u64| (new_size - i * CHUNK).min(CHUNK);
        next.resize(count as usize, ChunkRef::HOLE);
        for w in ups.windows(2) {
            if w[0].0 >= w[1].0 {
                return Err(());
            }
        }
        for (i, c) in ups {
            if *i >= count || c.len > share(*i) || self.garbage.contains(&(*i, c.version)) {
                return Err(());
            }
            next[*i as usize] = *c;
        }
        if next.iter().enumerate().any(|(i, c)| c.len > share(i as u64)) {
            return Err(());
        }
        let garbage: Vec<(u64, u64)> = (self.chunks.iter().enumerate())
            .filter(|(i, c)| !c.is_hole() && next.get(*i).is_none_or(|n| n.version != c.version))
            .map(|(i, c)| (i as u64, c.version))
            .collect();
        self.size = new_size;
        self.chunks = next;
        self.garbage.extend(garbage.into_iter().filter(|(_, v)| *v != 0));
        Ok(())
    }
}

fn update_strategy() -> impl Strategy<Value = (u64, Option<u64>, Vec<(u64, ChunkRef)>)> {
    let chunk = (0u64..7, 1u64..6, prop_oneof![2 => Just(CHUNK), 1 => 0..=CHUNK + 1])
        .prop_map(|(i, v, len)| (i, ChunkRef { version: v, len, checksum: v as u32, home: None }));
    let cut = prop::option::of(0u64..7 * CHUNK);
    (0u64..7 * CHUNK, cut, prop::collection::btree_map(0u64..7, chunk, 0..4))
        .prop_map(|(size, t, m)| (size, t.map(|t| t.min(size)), m.into_iter().map(|(i, (_, c))| (i, c)).collect()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn updates_agree_with_a_naive_model(ups in prop::collection::vec(update_strategy(), 1..30)) {
        let mut s = ready();
        let f = empty_file(&mut s);
        let mut model = Model::default();
        for (n, (size, truncate, chunks)) in ups.into_iter().enumerate() {
            let op = update(f.id, size, truncate, chunks.clone());
            let before = s.clone();
            let got = s.execute(&op, 100 + n as u64);
            let want = model.apply(size, truncate, &chunks);
            prop_assert_eq!(got.is_ok(), want.is_ok(), "{:?}: {:?}", op, got);
            if got.is_err() {
                prop_assert_eq!(&s, &before);
                continue;
            }
            let info = s.stat("/f").unwrap();
            prop_assert_eq!((info.size, &info.chunks), (model.size, &model.chunks));
            let pending: BTreeSet<(u64, u64)> = s.pending_chunks().iter().map(|k| (k.index, k.version)).collect();
            prop_assert_eq!(&pending, &model.garbage);
            s.check_invariants().map_err(|e| TestCaseError::fail(e.message))?;
        }
    }
}

/// A writer given up on (its reserved ids retired after its chunks were
/// collected as orphans) can publish neither a file nor a chunk version.
#[test]
fn retired_ids_can_never_be_published() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 10);
    let orphan = alloc(&mut s);
    let version = alloc(&mut s).0;
    s.execute(&MetaOp::Retire { ids: vec![orphan.0, version] }, 5).unwrap();
    s.check_invariants().unwrap();
    let (kind, msg) = fails(&mut s, commit_op("/g", orphan, 10, false));
    assert_eq!(kind, ErrorKind::Stale);
    assert!(msg.contains(&format!("id {} was given up", orphan.0)), "{msg}");
    let r = ChunkRef { version, len: 10, checksum: 3, home: None };
    let update = MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks: vec![(0, r)] };
    assert_eq!(fails(&mut s, update).0, ErrorKind::Stale);
    // Live inodes and ids never reserved cannot be retired.
    assert_eq!(fails(&mut s, MetaOp::Retire { ids: vec![f.id.0] }).0, ErrorKind::InvalidArgument);
    let never = s.next_inode().0;
    let (kind, msg) = fails(&mut s, MetaOp::Retire { ids: vec![never] });
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.contains("never reserved"), "{msg}");
}
