//! Under-stores: attaching, adopting objects as files, loading and letting
//! go of chunks, clean and dirty files, read-only attachments and renames
//! beneath them; checked by examples and against a model of one file
//! (each chunk below, stored or a hole; clean or dirty; garbage made).

use crate::common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{Attachment, InodeInfo, MetaOp, MetaReply, MetaState, NewNode, WriteMode};
use tierpool_types::{ChunkKey, ChunkRef, ErrorKind, InodeId};

fn attachment(mode: WriteMode, readonly: bool) -> Attachment {
    Attachment { uri: "file:///data".into(), mode, readonly, options: BTreeMap::new() }
}

/// A pool with `/in` attached, and the inode of `/in`.
fn attached(mode: WriteMode, readonly: bool) -> (MetaState, InodeId) {
    let mut s = ready();
    mkdir(&mut s, "/in");
    s.execute(&MetaOp::Attach { path: "/in".into(), attachment: attachment(mode, readonly) }, 3).unwrap();
    let id = s.stat("/in").unwrap().id;
    (s, id)
}

fn info(s: &mut MetaState, op: MetaOp) -> InodeInfo {
    match s.execute(&op, 9).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn adopt(parent: InodeId, name: &str, size: u64, etag: &str) -> MetaOp {
    MetaOp::AdoptFile { parent, name: name.into(), size, chunk_size: CHUNK, mtime: 77, etag: etag.into(), mode: 0o644 }
}

fn stored(version: u64, len: u64) -> ChunkRef {
    ChunkRef { version, len, checksum: version as u32, home: None }
}

fn kind(s: &mut MetaState, op: MetaOp) -> ErrorKind {
    let before = s.clone();
    let e = s.execute(&op, 9).unwrap_err();
    assert_eq!(*s, before, "a failed op changed the state");
    e.kind
}

#[test]
fn an_adopted_file_mirrors_its_object_with_every_chunk_below() {
    let (mut s, at) = attached(WriteMode::Through, false);
    s.execute(&MetaOp::MakeAt { parent: at, name: "d".into(), node: NewNode::Dir, mode: 0o755 }, 4).unwrap();
    let d = s.stat("/in/d").unwrap().id;
    let f = info(&mut s, adopt(d, "x.csv", 2 * CHUNK + 5, "e1"));
    assert_eq!((f.size, f.mtime), (2 * CHUNK + 5, 77));
    assert_eq!(f.chunks, vec![ChunkRef::BELOW; 3]);
    let o = f.origin.unwrap();
    assert_eq!(
        (o.attach, o.key.as_str(), o.size, o.etag.as_str(), o.dirty),
        (at, "d/x.csv", 2 * CHUNK + 5, "e1", false)
    );
    s.check_invariants().unwrap();
    // Adopting the same object again changes nothing.
    let before = s.clone();
    info(&mut s, adopt(d, "x.csv", 2 * CHUNK + 5, "e1"));
    assert_eq!(s, before);
}

#[test]
fn attaching_needs_an_empty_directory_outside_every_attachment() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let again = MetaOp::Attach { path: "/in".into(), attachment: attachment(WriteMode::PoolOnly, false) };
    assert_eq!(kind(&mut s, again), ErrorKind::AlreadyExists);
    s.execute(&MetaOp::MakeAt { parent: at, name: "d".into(), node: NewNode::Dir, mode: 0o755 }, 4).unwrap();
    let inside = MetaOp::Attach { path: "/in/d".into(), attachment: attachment(WriteMode::PoolOnly, false) };
    assert_eq!(kind(&mut s, inside), ErrorKind::AlreadyExists);
    commit(&mut s, "/f", 10);
    mkdir(&mut s, "/full");
    commit(&mut s, "/full/g", 10);
    let full = MetaOp::Attach { path: "/full".into(), attachment: attachment(WriteMode::PoolOnly, false) };
    assert_eq!(kind(&mut s, full), ErrorKind::DirectoryNotEmpty);
    let file = MetaOp::Attach { path: "/f".into(), attachment: attachment(WriteMode::PoolOnly, false) };
    assert_eq!(kind(&mut s, file), ErrorKind::NotADirectory);
    let root = MetaOp::Attach { path: "/".into(), attachment: attachment(WriteMode::PoolOnly, false) };
    assert_eq!(kind(&mut s, root), ErrorKind::InvalidArgument);
}

#[test]
fn detaching_removes_what_is_beneath_and_collects_the_pools_copies() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let f = info(&mut s, adopt(at, "a", CHUNK, "e"));
    info(&mut s, MetaOp::LoadChunks { inode: f.id, chunks: vec![(0, stored(50, CHUNK))] });
    s.take_garbage();
    match s.execute(&MetaOp::Detach { path: "/in".into() }, 9).unwrap() {
        MetaReply::Removed { inodes, gone } => assert_eq!((inodes, gone), (1, None)),
        r => panic!("unexpected reply {r:?}"),
    }
    assert!(s.attachments().is_empty());
    assert!(s.list("/in").unwrap().is_empty());
    assert_eq!(s.take_garbage().inodes, vec![f.id]);
    s.check_invariants().unwrap();
    assert_eq!(kind(&mut s, MetaOp::Detach { path: "/in".into() }), ErrorKind::InvalidArgument);
}

#[test]
fn a_file_made_beneath_an_attachment_is_dirty_until_persisted() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let op = MetaOp::MakeAt { parent: at, name: "new".into(), node: NewNode::File { chunk_size: CHUNK }, mode: 0o644 };
    let f = info(&mut s, op);
    let o = f.origin.clone().unwrap();
    assert_eq!((o.key.as_str(), o.dirty), ("new", true));
    assert_eq!(kind(&mut s, MetaOp::Unload { inode: f.id }), ErrorKind::Stale);
    let w =
        info(&mut s, MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks: vec![(0, stored(60, 10))] });
    let persist = |chunks: Vec<ChunkRef>, key: &str| MetaOp::Persisted {
        inode: f.id,
        chunks,
        size: 10,
        mtime: 5,
        etag: "t".into(),
        key: Some(key.into()),
    };
    assert_eq!(kind(&mut s, persist(vec![stored(59, 10)], "new")), ErrorKind::Stale);
    // Renamed while it was written below: the object written is at the old key.
    s.execute(&MetaOp::Rename { from: "/in/new".into(), to: "/in/moved".into() }, 9).unwrap();
    assert_eq!(kind(&mut s, persist(w.chunks.clone(), "new")), ErrorKind::Stale);
    let p = info(&mut s, persist(w.chunks.clone(), "moved"));
    let o = p.origin.unwrap();
    assert_eq!((o.size, o.mtime, o.etag.as_str(), o.dirty), (10, 5, "t", false));
    let u = info(&mut s, MetaOp::Unload { inode: f.id });
    assert_eq!(u.chunks, vec![ChunkRef::BELOW]);
    assert_eq!(s.take_garbage().keys, vec![ChunkKey::hashed(f.id, 0, 60)]);
    s.check_invariants().unwrap();
}

#[test]
fn writing_a_file_below_loading_and_letting_go_of_its_chunks_are_no_change_a_stat_shows() {
    let (mut s, at) = attached(WriteMode::Back, false);
    let f = info(&mut s, adopt(at, "a", 10, "e"));
    s.note_changes(true);
    let write = |v: u64| MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks: vec![(0, stored(v, 10))] };
    let MetaReply::Info(w) = s.execute(&write(60), 10).unwrap() else { panic!("not an info") };
    assert_eq!(s.take_changes().inodes, vec![(f.id, 10)], "a write is a change");
    let persist = MetaOp::Persisted { inode: f.id, chunks: w.chunks, size: 10, mtime: 5, etag: "t".into(), key: None };
    assert!(!info(&mut s, persist).origin.unwrap().dirty);
    assert!(s.take_changes().is_empty(), "written below: its attributes and bytes are as they were");
    info(&mut s, MetaOp::Unload { inode: f.id });
    assert!(s.take_changes().is_empty(), "let go of");
    info(&mut s, MetaOp::LoadChunks { inode: f.id, chunks: vec![(0, stored(61, 10))] });
    assert!(s.take_changes().is_empty(), "loaded");
    // A change the clock did not move forward is still told, as no one's.
    let times = MetaOp::SetInode { inode: f.id, mode: None, uid: None, gid: None, atime: Some(1), mtime: Some(2) };
    s.execute(&times, 8).unwrap();
    assert_eq!(s.take_changes().inodes, vec![(f.id, 0)]);
    s.check_invariants().unwrap();
}

#[test]
fn a_file_with_changes_not_below_is_never_disowned() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let f = info(&mut s, adopt(at, "a", 10, "e"));
    info(&mut s, MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks: vec![(0, stored(90, 10))] });
    assert_eq!(kind(&mut s, MetaOp::Disown { parent: at, name: "a".into() }), ErrorKind::Stale);
    mkdir(&mut s, "/out");
    let out = s.stat("/out").unwrap().id;
    assert_eq!(
        kind(&mut s, MetaOp::AdoptDir { parent: out, name: "d".into(), mode: 0o755 }),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_cut_through_a_chunk_below_needs_a_shortened_version() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let f = info(&mut s, adopt(at, "a", 2 * CHUNK, "e"));
    let cut = MetaOp::UpdateFile { inode: f.id, size: 100, truncate: Some(100), chunks: vec![] };
    assert_eq!(kind(&mut s, cut), ErrorKind::InvalidArgument);
    let cut = MetaOp::UpdateFile { inode: f.id, size: CHUNK, truncate: Some(CHUNK), chunks: vec![] };
    assert_eq!(info(&mut s, cut).chunks, vec![ChunkRef::BELOW]);
    let below = MetaOp::UpdateFile { inode: f.id, size: CHUNK, truncate: None, chunks: vec![(0, ChunkRef::BELOW)] };
    assert_eq!(kind(&mut s, below), ErrorKind::InvalidArgument);
}

#[test]
fn a_read_only_attachment_refuses_every_change() {
    let (mut s, at) = attached(WriteMode::Through, true);
    let f = info(&mut s, adopt(at, "a", 10, "e"));
    let make = MetaOp::MakeAt { parent: at, name: "n".into(), node: NewNode::File { chunk_size: CHUNK }, mode: 0o644 };
    assert_eq!(kind(&mut s, make), ErrorKind::ReadOnly);
    assert_eq!(kind(&mut s, mkdir_op("/in/d", false)), ErrorKind::ReadOnly);
    let id = alloc(&mut s);
    assert_eq!(kind(&mut s, commit_op("/in/c", id, 10, false)), ErrorKind::ReadOnly);
    assert_eq!(kind(&mut s, remove_op("/in/a", false)), ErrorKind::ReadOnly);
    assert_eq!(kind(&mut s, rename_op("/in/a", "/in/b")), ErrorKind::ReadOnly);
    let write = MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks: vec![(0, stored(70, 10))] };
    assert_eq!(kind(&mut s, write), ErrorKind::ReadOnly);
    // Loading and letting go are not changes; the store's own changes are adopted.
    info(&mut s, MetaOp::LoadChunks { inode: f.id, chunks: vec![(0, stored(70, 10))] });
    info(&mut s, MetaOp::Unload { inode: f.id });
    let d = info(&mut s, MetaOp::AdoptDir { parent: at, name: "d".into(), mode: 0o755 });
    assert_eq!(info(&mut s, MetaOp::AdoptDir { parent: at, name: "d".into(), mode: 0o755 }).id, d.id);
    info(&mut s, adopt(d.id, "g", 5, "e"));
    assert_eq!(kind(&mut s, MetaOp::Disown { parent: at, name: "d".into() }), ErrorKind::DirectoryNotEmpty);
    s.execute(&MetaOp::Disown { parent: d.id, name: "g".into() }, 9).unwrap();
    s.execute(&MetaOp::Disown { parent: at, name: "d".into() }, 9).unwrap();
    s.execute(&MetaOp::Disown { parent: at, name: "a".into() }, 9).unwrap();
    assert!(s.list("/in").unwrap().is_empty());
    s.check_invariants().unwrap();
}

#[test]
fn renames_stay_inside_an_attachment_and_move_keys_in_through_mode_only() {
    for (mode, moved) in [(WriteMode::Through, "d2/x"), (WriteMode::Back, "d2/x"), (WriteMode::PoolOnly, "d/x")] {
        let (mut s, at) = attached(mode, false);
        s.execute(&MetaOp::MakeAt { parent: at, name: "d".into(), node: NewNode::Dir, mode: 0o755 }, 4).unwrap();
        let d = s.stat("/in/d").unwrap().id;
        info(&mut s, adopt(d, "x", 10, "e"));
        s.execute(&rename_op("/in/d", "/in/d2"), 9).unwrap();
        assert_eq!(s.stat("/in/d2/x").unwrap().origin.unwrap().key, moved, "{mode:?}");
        commit(&mut s, "/out", 10);
        assert_eq!(kind(&mut s, rename_op("/out", "/in/out")), ErrorKind::InvalidArgument);
        assert_eq!(kind(&mut s, rename_op("/in/d2/x", "/x")), ErrorKind::InvalidArgument);
        // The attached directory itself may move.
        s.execute(&rename_op("/in", "/in2"), 9).unwrap();
        s.check_invariants().unwrap();
        assert_eq!(kind(&mut s, remove_op("/in2", true)), ErrorKind::InvalidArgument);
    }
}

#[test]
fn an_object_changed_below_replaces_a_clean_file_and_is_refused_for_a_dirty_one() {
    let (mut s, at) = attached(WriteMode::Through, false);
    let f = info(&mut s, adopt(at, "a", 2 * CHUNK, "e1"));
    info(&mut s, MetaOp::LoadChunks { inode: f.id, chunks: vec![(1, stored(80, CHUNK))] });
    s.take_garbage();
    let g = info(&mut s, adopt(at, "a", 5, "e2"));
    assert_eq!((g.id, g.size, g.chunks.clone()), (f.id, 5, vec![ChunkRef::BELOW]));
    assert_eq!(s.take_garbage().keys, vec![ChunkKey::hashed(f.id, 1, 80)]);
    info(&mut s, MetaOp::UpdateFile { inode: f.id, size: 5, truncate: None, chunks: vec![(0, stored(81, 5))] });
    assert_eq!(kind(&mut s, adopt(at, "a", 6, "e3")), ErrorKind::Stale);
    s.check_invariants().unwrap();
}

/// One step on a file adopted from an object of `CHUNKS` chunks.
#[derive(Clone, Debug)]
enum Step {
    /// A reader stored chunk `i` it loaded from below.
    Load(u64),
    /// A writer replaced chunk `i`.
    Write(u64),
    /// The file was written below from its chunks as they are now.
    Persist,
    /// A persist that read the file before its last change.
    PersistStale,
    Unload,
    /// The object below changed.
    Changed,
}

const CHUNKS: u64 = 4;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..CHUNKS).prop_map(Step::Load),
        (0..CHUNKS).prop_map(Step::Write),
        Just(Step::Persist),
        Just(Step::PersistStale),
        Just(Step::Unload),
        Just(Step::Changed),
    ]
}

/// The file as the model sees it.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    chunks: Vec<ChunkRef>,
    dirty: bool,
    etag: u64,
    garbage: BTreeSet<(u64, u64)>,
}

proptest! {
    #[test]
    fn a_file_of_an_under_store_follows_the_model(steps in prop::collection::vec(step(), 1..40)) {
        let (mut s, at) = attached(WriteMode::Through, false);
        let f = info(&mut s, adopt(at, "f", CHUNKS * CHUNK, "0"));
        let mut m = Model { chunks: vec![ChunkRef::BELOW; CHUNKS as usize], dirty: false, etag: 0, garbage: BTreeSet::new() };
        let mut version = 100;
        let mut previous = m.chunks.clone();
        for st in steps {
            version += 1;
            let before = m.chunks.clone();
            let (op, ok) = match &st {
                Step::Load(i) => {
                    let r = stored(version, CHUNK);
                    let i = *i as usize;
                    if m.chunks[i].is_below() { m.chunks[i] = r } else { m.garbage.insert((i as u64, version)); }
                    (MetaOp::LoadChunks { inode: f.id, chunks: vec![(i as u64, r)] }, true)
                }
                Step::Write(i) => {
                    let r = stored(version, CHUNK);
                    let old = std::mem::replace(&mut m.chunks[*i as usize], r);
                    if old.is_stored() { m.garbage.insert((*i, old.version)); }
                    m.dirty = true;
                    (MetaOp::UpdateFile { inode: f.id, size: CHUNKS * CHUNK, truncate: None, chunks: vec![(*i, r)] }, true)
                }
                Step::Persist | Step::PersistStale => {
                    let seen = if matches!(st, Step::Persist) { m.chunks.clone() } else { previous.clone() };
                    let ok = seen == m.chunks;
                    if ok { m.dirty = false; m.etag = version; }
                    let op = MetaOp::Persisted { inode: f.id, chunks: seen, size: CHUNKS * CHUNK, mtime: 77, etag: version.to_string(), key: None };
                    (op, ok)
                }
                Step::Unload => {
                    let ok = !m.dirty;
                    if ok {
                        for (i, r) in m.chunks.iter_mut().enumerate() {
                            if r.is_stored() { m.garbage.insert((i as u64, r.version)); *r = ChunkRef::BELOW; }
                        }
                    }
                    (MetaOp::Unload { inode: f.id }, ok)
                }
                Step::Changed => {
                    let ok = !m.dirty;
                    if ok {
                        for (i, r) in m.chunks.iter_mut().enumerate() {
                            if r.is_stored() { m.garbage.insert((i as u64, r.version)); *r = ChunkRef::BELOW; }
                        }
                        m.etag = version;
                    }
                    (adopt(at, "f", CHUNKS * CHUNK, &version.to_string()), ok)
                }
            };
            let state = s.clone();
            let got = s.execute(&op, 9);
            prop_assert_eq!(got.is_ok(), ok, "{:?}: {:?}", st, got);
            if !ok {
                prop_assert_eq!(got.unwrap_err().kind, ErrorKind::Stale);
                prop_assert_eq!(&s, &state);
            }
            let now = s.stat("/in/f").unwrap();
            let o = now.origin.clone().unwrap();
            prop_assert_eq!(&now.chunks, &m.chunks);
            prop_assert_eq!(o.dirty, m.dirty);
            prop_assert_eq!(o.etag, m.etag.to_string());
            for k in s.take_garbage().keys {
                prop_assert!(m.garbage.remove(&(k.index, k.version)), "unexpected garbage {}", k);
            }
            prop_assert!(m.garbage.is_empty(), "garbage not made: {:?}", m.garbage);
            s.check_invariants().unwrap();
            // What the attachment owes, from the owed files alone.
            let owed = s.owed_figures();
            prop_assert_eq!(owed.len(), 1);
            prop_assert_eq!(owed[0].0.as_str(), "/in");
            let want = u64::from(m.dirty);
            prop_assert_eq!(&owed[0].2, &tierpool_meta::OwedFigures { dirty_files: want, dirty_bytes: want * CHUNKS * CHUNK, write_back_files: 0, write_back_bytes: 0 });
            if before != m.chunks { previous = before; }
        }
    }
}
