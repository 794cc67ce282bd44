//! Snapshots: by examples, and against a model of a tree of files and its
//! snapshots' bytes while writers rewrite, remove and restore it and
//! garbage collection runs after every step (a chunk a snapshot or live
//! file still names must never be collected).

use crate::common::*;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::{InodeInfo, InodeKind, MetaOp, MetaReply, MetaState, NewNode};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, ErrorKind, InodeId};

fn snap(path: &str, name: &str) -> MetaOp {
    MetaOp::SnapshotCreate { path: path.into(), name: name.into() }
}

fn drop_snap(path: &str, name: &str) -> MetaOp {
    MetaOp::SnapshotRemove { path: path.into(), name: name.into() }
}

fn restore(path: &str, name: &str) -> MetaOp {
    MetaOp::SnapshotRestore { path: path.into(), name: name.into() }
}

fn stored(version: u64, data: &[u8]) -> ChunkRef {
    ChunkRef { version, len: data.len() as u64, checksum: crc32c::crc32c(data), home: None }
}

fn rewrite(s: &mut MetaState, id: InodeId, size: u64, version: u64) -> InodeInfo {
    let r = stored(version, &[1u8; 10]);
    match s.execute(&MetaOp::UpdateFile { inode: id, size, truncate: None, chunks: vec![(0, r)] }, 5).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

#[test]
fn a_snapshot_reads_as_the_tree_was_and_keeps_what_the_live_files_replace() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let f = commit(&mut s, "/d/f", 10);
    s.execute(&snap("/d", "one"), 10).unwrap();
    // The snapshot's entries look like the live ones did.
    let shot = s.stat("/d/.snapshots/one/f").unwrap();
    assert_eq!((shot.id, shot.size, shot.chunks.clone()), (f.id, 10, f.chunks.clone()));
    let names: Vec<_> = s.list("/d/.snapshots").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["one"]);
    assert_eq!(s.stat("/d/.snapshots").unwrap().kind, InodeKind::Dir);
    assert_eq!(s.list("/d/.snapshots/one").unwrap()[0].name, "f");
    // The live file moves on; its old version is kept, not garbage.
    s.take_garbage();
    let v = alloc(&mut s).0;
    rewrite(&mut s, f.id, 10, v);
    assert!(s.take_garbage().is_empty());
    assert!(s.pending_chunks().is_empty());
    assert_eq!(s.stat("/d/.snapshots/one/f").unwrap().chunks, f.chunks);
    let sum = &s.snapshots(None).unwrap()[0];
    assert_eq!(
        (sum.path.as_str(), sum.name.as_str(), sum.entries, sum.bytes, sum.kept_bytes),
        ("/d", "one", 2, 10, 10)
    );
    assert_eq!(s.snapshot_usage(), (1, 10));
    // Removing the snapshot makes the old version garbage.
    s.execute(&drop_snap("/d", "one"), 11).unwrap();
    let old = f.chunks[0].key(f.id, 0);
    assert_eq!(s.take_garbage().keys, [old]);
    assert!(s.pending_chunks().contains(&old));
    assert_eq!(s.snapshot_usage(), (0, 0));
    s.check_invariants().unwrap();
}

#[test]
fn a_removed_file_kept_by_a_snapshot_is_collected_only_with_the_last_snapshot() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 5000);
    s.execute(&snap("/f", "a"), 10).unwrap();
    s.execute(&snap("/f", "b"), 10).unwrap();
    s.take_garbage();
    s.execute(&remove_op("/f", false), 11).unwrap();
    assert!(s.take_garbage().is_empty());
    assert!(s.pending_gc().is_empty());
    assert_eq!(s.stat("/f/.snapshots/a").unwrap().size, 5000);
    s.execute(&drop_snap("/f", "a"), 12).unwrap();
    assert!(s.pending_gc().is_empty(), "snapshot b still reads it");
    s.execute(&drop_snap("/f", "b"), 13).unwrap();
    assert!(s.pending_gc().contains(&f.id));
    assert_eq!(s.take_garbage().inodes, [f.id]);
    s.check_invariants().unwrap();
}

#[test]
fn restore_puts_the_tree_back_in_one_step_reusing_file_ids() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let a = commit(&mut s, "/d/a", 10);
    let b = commit(&mut s, "/d/b", 10);
    s.execute(&snap("/d", "x"), 10).unwrap();
    let v = alloc(&mut s).0;
    rewrite(&mut s, a.id, 10, v);
    s.execute(&remove_op("/d/b", false), 11).unwrap();
    commit(&mut s, "/d/c", 3);
    s.take_garbage();
    let root = match s.execute(&restore("/d", "x"), 12).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    };
    assert_eq!(root.kind, InodeKind::Dir);
    let names: Vec<_> = s.list("/d").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(s.stat("/d/a").unwrap().chunks, a.chunks);
    assert_eq!((s.stat("/d/a").unwrap().id, s.stat("/d/b").unwrap().id), (a.id, b.id));
    // The rewritten version of a and the file c are garbage; nothing the snapshot names is.
    let g = s.take_garbage();
    assert_eq!(g.keys, [ChunkKey::hashed(a.id, 0, v)]);
    assert_eq!(g.inodes.len(), 1);
    // Changing the restored file keeps the snapshot intact.
    let w = alloc(&mut s).0;
    rewrite(&mut s, b.id, 10, w);
    assert_eq!(s.stat("/d/.snapshots/x/b").unwrap().chunks, b.chunks);
    s.check_invariants().unwrap();
}

#[test]
fn restore_of_a_gone_path_and_of_small_files_and_links() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let id = alloc(&mut s);
    let inline = MetaOp::CommitInline {
        path: "/d/small".into(),
        inode: id,
        data: Bytes::from_static(b"tiny"),
        chunk_size: CHUNK,
        attrs: ChunkAttrs::default(),
        mode: 0o600,
        overwrite: false,
    };
    s.execute(&inline, 3).unwrap();
    let node = NewNode::Symlink { target: "small".into() };
    let d = s.stat("/d").unwrap().id;
    s.execute(&MetaOp::MakeAt { parent: d, name: "ln".into(), node, mode: 0o777 }, 3).unwrap();
    let big = commit(&mut s, "/d/big", 10);
    s.execute(&MetaOp::LinkAt { inode: big.id, parent: d, name: "big2".into() }, 3).unwrap();
    s.execute(&snap("/d", "s"), 4).unwrap();
    s.execute(&remove_op("/d", true), 5).unwrap();
    s.execute(&restore("/d", "s"), 6).unwrap();
    assert_eq!(s.stat("/d/small").unwrap().inline.as_deref(), Some(&b"tiny"[..]));
    assert_eq!(s.stat("/d/ln").unwrap().target, "small");
    let (b1, b2) = (s.stat("/d/big").unwrap(), s.stat("/d/big2").unwrap());
    assert_eq!((b1.id, b2.id, b1.nlink), (big.id, big.id, 2));
    s.check_invariants().unwrap();
}

#[test]
fn restore_counts_the_names_of_every_kind_and_gives_chunkless_files_elsewhere_new_ids() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let d = s.stat("/d").unwrap().id;
    let node = NewNode::Symlink { target: "t".into() };
    let l = match s.execute(&MetaOp::MakeAt { parent: d, name: "l".into(), node, mode: 0o777 }, 3).unwrap() {
        MetaReply::Info(i) => i.id,
        r => panic!("unexpected reply {r:?}"),
    };
    s.execute(&MetaOp::LinkAt { inode: l, parent: d, name: "l2".into() }, 3).unwrap();
    let e = match s
        .execute(
            &MetaOp::MakeAt { parent: d, name: "e".into(), node: NewNode::File { chunk_size: CHUNK }, mode: 0o644 },
            3,
        )
        .unwrap()
    {
        MetaReply::Info(i) => i.id,
        r => panic!("unexpected reply {r:?}"),
    };
    s.execute(&snap("/d", "x"), 4).unwrap();
    // The empty file also gets a name outside: it stores nothing, so it is restored under a new id.
    s.execute(&MetaOp::LinkAt { inode: e, parent: InodeId::ROOT, name: "e-out".into() }, 5).unwrap();
    s.execute(&restore("/d", "x"), 6).unwrap();
    s.check_invariants().unwrap();
    let (l1, l2) = (s.stat("/d/l").unwrap(), s.stat("/d/l2").unwrap());
    assert_eq!((l1.id, l1.nlink), (l2.id, 2));
    assert_ne!(s.stat("/d/e").unwrap().id, e);
    assert_eq!(s.stat("/e-out").unwrap().id, e);
    // One name of the linked symlink goes; the other still resolves.
    s.execute(&remove_op("/d/l", false), 7).unwrap();
    assert_eq!(s.stat("/d/l2").unwrap().target, "t");
    s.check_invariants().unwrap();
}

#[test]
fn a_removed_file_kept_by_a_snapshot_keeps_its_id_from_writers_and_retirement() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 10);
    s.execute(&snap("/f", "x"), 4).unwrap();
    s.execute(&remove_op("/f", false), 5).unwrap();
    assert_eq!(fails(&mut s, commit_op("/g", f.id, 10, false)).0, ErrorKind::InvalidArgument);
    let (kind, msg) = fails(&mut s, MetaOp::Retire { ids: vec![f.id.0] });
    assert_eq!(
        (kind, msg),
        (ErrorKind::InvalidArgument, format!("inode {} is kept by a snapshot: it cannot be retired", f.id))
    );
    s.execute(&restore("/f", "x"), 6).unwrap();
    assert_eq!(s.stat("/f").unwrap().id, f.id);
    s.check_invariants().unwrap();
}

#[test]
fn bad_snapshot_ops_are_refused_and_change_nothing() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let f = commit(&mut s, "/d/f", 10);
    s.execute(&snap("/d", "x"), 10).unwrap();
    assert_eq!(
        fails(&mut s, snap("/d", "x")),
        (ErrorKind::AlreadyExists, "/d@x: a snapshot of that name exists".into())
    );
    assert_eq!(fails(&mut s, snap("/nope", "x")).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, snap("/d", ".snapshots")).0, ErrorKind::ReadOnly);
    assert_eq!(fails(&mut s, snap("/d", "a/b")).0, ErrorKind::InvalidArgument);
    assert_eq!(fails(&mut s, drop_snap("/d", "y")), (ErrorKind::NotFound, "/d@y: no such snapshot".into()));
    assert_eq!(fails(&mut s, restore("/d", "y")).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, restore("/", "x")).0, ErrorKind::NotFound);
    s.execute(&snap("/", "all"), 10).unwrap();
    assert_eq!(s.stat("/.snapshots/all/d/f").unwrap().id, f.id);
    assert_eq!(fails(&mut s, restore("/", "all")).0, ErrorKind::InvalidArgument);
    s.execute(&drop_snap("/", "all"), 10).unwrap();
    // Nothing changes through .snapshots, and no entry takes the name.
    let ro = fails(&mut s, remove_op("/d/.snapshots/x/f", false));
    assert_eq!(ro, (ErrorKind::ReadOnly, "/d/.snapshots/x/f: snapshots are read-only".into()));
    assert_eq!(fails(&mut s, mkdir_op("/d/.snapshots", false)).0, ErrorKind::ReadOnly);
    assert_eq!(fails(&mut s, rename_op("/d/f", "/d/.snapshots/x/g")).0, ErrorKind::ReadOnly);
    let d = s.stat("/d").unwrap().id;
    let mk = MetaOp::MakeAt { parent: d, name: ".snapshots".into(), node: NewNode::Dir, mode: 0o755 };
    assert_eq!(fails(&mut s, mk).0, ErrorKind::ReadOnly);
    // Reading through it: missing snapshots and entries, files as directories.
    assert_eq!(s.stat("/d/.snapshots/y").unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.stat("/d/.snapshots/x/g").unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.stat("/d/.snapshots/x/f/g").unwrap_err().kind, ErrorKind::NotADirectory);
    assert!(s.list("/elsewhere/.snapshots").unwrap().is_empty());
    // At most 1,000 levels of directories.
    let deep = |n: usize| format!("/deep{}", "/x".repeat(n));
    s.execute(&mkdir_op(&deep(1001), true), 11).unwrap();
    let (kind, msg) = fails(&mut s, snap("/deep", "y"));
    assert_eq!(
        (kind, msg.as_str()),
        (ErrorKind::InvalidArgument, "/deep: is more than 1000 directories deep; snapshot a part of it")
    );
    s.execute(&snap("/deep/x", "y"), 11).unwrap();
    assert_eq!(s.stat(&format!("{}/.snapshots/y{}", deep(1), "/x".repeat(1000))).unwrap().kind, InodeKind::Dir);
    s.execute(&remove_op("/deep", true), 11).unwrap();
    s.execute(&restore("/deep/x", "y"), 11).unwrap_err();
    s.execute(&mkdir_op("/deep", false), 11).unwrap();
    s.execute(&restore("/deep/x", "y"), 11).unwrap();
    s.execute(&drop_snap("/deep/x", "y"), 11).unwrap();
    s.execute(&remove_op("/deep", true), 11).unwrap();
    // A region is not snapshotted.
    let r = alloc(&mut s);
    let region = MetaOp::CommitRegion {
        path: "/d/r".into(),
        inode: r,
        size: 10,
        chunk_size: CHUNK,
        attrs: ChunkAttrs::default(),
        mode: 0o600,
    };
    s.execute(&region, 11).unwrap();
    let (kind, msg) = fails(&mut s, snap("/d", "y"));
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.starts_with("/d/r: is a memory region"), "{msg}");
    s.execute(&remove_op("/d/r", false), 12).unwrap();
    // Not restored over an attached under-store (detach it first).
    mkdir(&mut s, "/a");
    mkdir(&mut s, "/a/b");
    s.execute(&snap("/a", "y"), 11).unwrap();
    let attachment = tierpool_meta::Attachment {
        uri: "file:///data".into(),
        mode: tierpool_meta::WriteMode::Through,
        readonly: false,
        options: Default::default(),
    };
    s.execute(&MetaOp::Attach { path: "/a/b".into(), attachment }, 11).unwrap();
    let (kind, msg) = fails(&mut s, restore("/a", "y"));
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert_eq!(msg, "/a@y: an under-store is attached at /a/b; detach it first");
    // A file of the snapshot now also named outside the restored path.
    s.execute(&MetaOp::LinkAt { inode: f.id, parent: InodeId::ROOT, name: "out".into() }, 13).unwrap();
    let (kind, msg) = fails(&mut s, restore("/d", "x"));
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.contains("/out"), "{msg}");
    s.check_invariants().unwrap();
}

/// What is done to the tree `/t` (files `/t/0`..`/t/2`) and its snapshots.
#[derive(Clone, Debug)]
enum Step {
    Put { file: u8, len: u64, fill: u8 },
    Write { file: u8, fill: u8 },
    Remove { file: u8 },
    Snap { name: u8 },
    Drop { name: u8 },
    Restore { name: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3u8, prop_oneof![0..=100u64, 0..=2 * CHUNK + 10], any::<u8>()).prop_map(|(file, len, fill)| Step::Put {
            file,
            len,
            fill
        }),
        (0..3u8, any::<u8>()).prop_map(|(file, fill)| Step::Write { file, fill }),
        (0..3u8).prop_map(|file| Step::Remove { file }),
        (0..3u8).prop_map(|name| Step::Snap { name }),
        (0..3u8).prop_map(|name| Step::Drop { name }),
        (0..3u8).prop_map(|name| Step::Restore { name }),
    ]
}

type Tree = BTreeMap<u8, Vec<u8>>;

/// The bytes of the file at `path`, chunks from `store`.
fn read(s: &MetaState, path: &str, store: &BTreeMap<ChunkKey, Vec<u8>>) -> Vec<u8> {
    let i = s.stat(path).unwrap();
    let mut out = Vec::new();
    for (index, r) in i.chunks.iter().enumerate() {
        let mut bytes = if r.is_inline() {
            i.inline.clone().unwrap().to_vec()
        } else {
            let k = r.key(i.id, index as u64);
            store.get(&k).unwrap_or_else(|| panic!("{path}: chunk {k} was collected")).clone()
        };
        bytes.resize((i.size - index as u64 * CHUNK).min(CHUNK) as usize, 0);
        out.extend(bytes);
    }
    out
}

fn tree_of(s: &MetaState, dir: &str, store: &BTreeMap<ChunkKey, Vec<u8>>) -> Tree {
    let entries = s.list(dir).unwrap();
    entries.iter().map(|e| (e.name.parse().unwrap(), read(s, &format!("{dir}/{}", e.name), store))).collect()
}

/// Collects every pending inode and version from `store`, as workers would.
fn collect(s: &mut MetaState, store: &mut BTreeMap<ChunkKey, Vec<u8>>) {
    let inodes: Vec<_> = s.pending_gc().iter().copied().collect();
    let keys: Vec<_> = s.pending_chunks().iter().copied().collect();
    store.retain(|k, _| !inodes.contains(&k.inode) && !keys.contains(k));
    s.execute(&MetaOp::GcDone { inodes }, 50).unwrap();
    s.execute(&MetaOp::GcChunksDone { keys }, 50).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn snapshots_read_as_taken_and_nothing_they_name_is_collected(steps in prop::collection::vec(step(), 1..30)) {
        let mut s = ready();
        mkdir(&mut s, "/t");
        let mut store: BTreeMap<ChunkKey, Vec<u8>> = BTreeMap::new();
        let mut live: Tree = BTreeMap::new();
        let mut shots: BTreeMap<u8, Tree> = BTreeMap::new();
        for st in steps {
            match st {
                Step::Put { file, len, fill } => {
                    let id = alloc(&mut s);
                    let data = vec![fill; len as usize];
                    let path = format!("/t/{file}");
                    if len <= 100 {
                        let op = MetaOp::CommitInline {
                            path, inode: id, data: Bytes::from(data.clone()), chunk_size: CHUNK,
                            attrs: ChunkAttrs::default(), mode: 0o600, overwrite: true,
                        };
                        s.execute(&op, 3).unwrap();
                    } else {
                        let chunks: Vec<&[u8]> = data.chunks(CHUNK as usize).collect();
                        for (i, c) in chunks.iter().enumerate() {
                            store.insert(ChunkKey::hashed(id, i as u64, 1), c.to_vec());
                        }
                        let mut op = commit_op(&path, id, len, true);
                        if let MetaOp::CommitFile { checksums, .. } = &mut op {
                            *checksums = chunks.iter().map(|c| crc32c::crc32c(c)).collect();
                        }
                        s.execute(&op, 3).unwrap();
                    }
                    live.insert(file, data);
                }
                Step::Write { file, fill } => {
                    let Some(model) = live.get_mut(&file) else { continue };
                    let i = s.stat(&format!("/t/{file}")).unwrap();
                    let size = model.len().max(1);
                    model.resize(size, 0);
                    let len = size.min(CHUNK as usize);
                    model[..len].fill(fill);
                    let version = alloc(&mut s).0;
                    store.insert(ChunkKey::hashed(i.id, 0, version), model[..len].to_vec());
                    let chunks = vec![(0, stored(version, &model[..len]))];
                    let op = MetaOp::UpdateFile { inode: i.id, size: size as u64, truncate: None, chunks };
                    s.execute(&op, 4).unwrap();
                }
                Step::Remove { file } => {
                    if live.remove(&file).is_some() {
                        s.execute(&remove_op(&format!("/t/{file}"), false), 5).unwrap();
                    }
                }
                Step::Snap { name } => {
                    let r = s.execute(&snap("/t", &name.to_string()), 6);
                    prop_assert_eq!(r.is_ok(), !shots.contains_key(&name));
                    shots.entry(name).or_insert_with(|| live.clone());
                }
                Step::Drop { name } => {
                    let r = s.execute(&drop_snap("/t", &name.to_string()), 7);
                    prop_assert_eq!(r.is_ok(), shots.remove(&name).is_some());
                }
                Step::Restore { name } => {
                    let r = s.execute(&restore("/t", &name.to_string()), 8);
                    prop_assert_eq!(r.is_ok(), shots.contains_key(&name));
                    if let Some(t) = shots.get(&name) {
                        live = t.clone();
                    }
                }
            }
            s.check_invariants().unwrap();
            collect(&mut s, &mut store);
            prop_assert_eq!(tree_of(&s, "/t", &store), live.clone());
            for (name, t) in &shots {
                prop_assert_eq!(&tree_of(&s, &format!("/t/.snapshots/{name}"), &store), t);
            }
            // Nothing is kept that no one names.
            let named: usize = store.keys().filter(|k| {
                s.keeps(k) || s.stat_inode(k.inode, true).is_ok_and(|i| {
                    i.chunks.get(k.index as usize).is_some_and(|r| r.is_stored() && r.key(k.inode, k.index) == **k)
                })
            }).count();
            prop_assert_eq!(named, store.len());
        }
    }
}
