//! Checkpoints of regions: by examples, and against a model of a region's
//! chunks and its checkpoints' bytes while the region is written,
//! checkpointed (sharing unchanged chunks), restored, removed, and its
//! checkpoints removed, with garbage collection after every step.

use crate::common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::engine::orphans::{judge, Verdict};
use tierpool_meta::{InodeKind, MetaOp, MetaReply, MetaState};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, ErrorKind, InodeId};

fn region(s: &mut MetaState, path: &str, size: u64) -> InodeId {
    let inode = alloc(s);
    let op = MetaOp::CommitRegion {
        path: path.into(),
        inode,
        size,
        chunk_size: CHUNK,
        attrs: ChunkAttrs::default(),
        mode: 0o600,
    };
    s.execute(&op, 3).unwrap();
    inode
}

fn copy(version: u64, len: u64, checksum: u32) -> ChunkRef {
    ChunkRef { version, len, checksum, home: None }
}

/// A checkpoint of region `inode` whose fresh copies are the newest version named.
fn ckpt(inode: InodeId, path: &str, name: &str, chunks: Vec<ChunkRef>) -> MetaOp {
    let version = chunks.iter().map(|r| r.version).max().unwrap_or(2);
    MetaOp::Checkpoint { path: path.into(), name: name.into(), inode, version, chunks }
}

fn restore(path: &str, name: &str, done: bool) -> MetaOp {
    MetaOp::RegionRestore { path: path.into(), name: name.into(), done }
}

/// Fresh copies of every chunk of a region of `size` bytes.
fn fresh(s: &mut MetaState, size: u64) -> Vec<ChunkRef> {
    let v = alloc(s).0;
    (0..size.div_ceil(CHUNK)).map(|i| copy(v, (size - i * CHUNK).min(CHUNK), i as u32)).collect()
}

#[test]
fn a_checkpoint_reads_as_a_read_only_region_with_its_versions() {
    let mut s = ready();
    let id = region(&mut s, "/r", 2 * CHUNK + 5);
    let chunks = fresh(&mut s, 2 * CHUNK + 5);
    assert_eq!(s.execute(&ckpt(id, "/r", "one", chunks.clone()), 10).unwrap(), MetaReply::Done);
    let c = s.stat("/r/.snapshots/one").unwrap();
    assert_eq!(
        (c.id, c.kind, c.size, c.chunk_size, c.chunks.clone()),
        (id, InodeKind::Region, 2 * CHUNK + 5, CHUNK, chunks)
    );
    let sum = &s.snapshots(Some("/r")).unwrap()[0];
    assert_eq!((sum.entries, sum.bytes, sum.kept_bytes), (1, 2 * CHUNK + 5, 2 * CHUNK + 5));
    assert_eq!(s.snapshot_usage(), (1, 2 * CHUNK + 5));
    // The live region is as it was: its chunks change in place.
    let live = s.stat("/r").unwrap();
    assert_eq!((live.chunks.len(), live.restoring.clone()), (0, None));
    s.check_invariants().unwrap();
}

#[test]
fn a_checkpoint_is_refused_unless_it_names_one_fresh_or_kept_copy_per_chunk() {
    let mut s = ready();
    let id = region(&mut s, "/r", 2 * CHUNK);
    let good = fresh(&mut s, 2 * CHUNK);
    commit(&mut s, "/f", 10);
    assert_eq!(
        fails(&mut s, ckpt(id, "/f", "a", good.clone())),
        (ErrorKind::InvalidArgument, "/f: is not a region".into())
    );
    assert_eq!(
        fails(&mut s, ckpt(id, "/r", "a", good[..1].to_vec())).1,
        "/r@a: 1 chunk versions for a region of 2 chunks"
    );
    let mut live = good.clone();
    live[1].version = 1;
    assert_eq!(fails(&mut s, ckpt(id, "/r", "a", live)).1, "/r@a: chunk 1: version 1 cannot hold a checkpoint");
    let mut short = good.clone();
    short[0].len = 7;
    assert_eq!(
        fails(&mut s, ckpt(id, "/r", "a", short)).1,
        "/r@a: chunk 0: a copy of 7 bytes where the chunk has 4096"
    );
    let mut unknown = good.clone();
    unknown[0].version = 1 << 40;
    assert_eq!(fails(&mut s, ckpt(id, "/r", "a", unknown)).0, ErrorKind::Stale);
    // A copy given up as an orphan (its id retired) cannot be recorded.
    s.execute(&MetaOp::Retire { ids: vec![good[0].version] }, 4).unwrap();
    let (kind, msg) = fails(&mut s, ckpt(id, "/r", "a", good.clone()));
    assert_eq!(
        (kind, msg.as_str()),
        (ErrorKind::Stale, "/r@a: its copies were given up as orphans; take the checkpoint again")
    );
    // Copies of another region (one replaced at the path meanwhile) are not recorded.
    let good = fresh(&mut s, 2 * CHUNK);
    let (kind, msg) = fails(&mut s, ckpt(InodeId(id.0 + 1000), "/r", "a", good.clone()));
    assert_eq!(
        (kind, msg.as_str()),
        (ErrorKind::Stale, "/r@a: the region was replaced while it was copied; take the checkpoint again")
    );
    s.execute(&ckpt(id, "/r", "a", good.clone()), 5).unwrap();
    assert_eq!(fails(&mut s, ckpt(id, "/r", "a", good.clone())).0, ErrorKind::AlreadyExists);
    // A copy shared with a checkpoint removed meanwhile (garbage now) is not recorded.
    let mut shares = good.clone();
    shares[1] = fresh(&mut s, CHUNK)[0];
    s.execute(&MetaOp::SnapshotRemove { path: "/r".into(), name: "a".into() }, 6).unwrap();
    assert!(s.pending_chunks().contains(&good[0].key(id, 0)));
    let (kind, msg) = fails(&mut s, ckpt(id, "/r", "b", shares));
    assert_eq!((kind, msg.as_str()), (ErrorKind::Stale, "/r@b: chunk 0: the copy it shares is no longer kept (its checkpoint was removed); take the checkpoint again"));
    // A tree holding a region is not snapshotted.
    mkdir(&mut s, "/d");
    region(&mut s, "/d/r", CHUNK);
    let (kind, msg) = fails(&mut s, MetaOp::SnapshotCreate { path: "/d".into(), name: "x".into() });
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.starts_with("/d/r: is a memory region; take a checkpoint of the region itself"), "{msg}");
}

#[test]
fn checkpoints_share_unchanged_copies_and_free_only_their_own() {
    let mut s = ready();
    let id = region(&mut s, "/r", 3 * CHUNK);
    let first = fresh(&mut s, 3 * CHUNK);
    s.execute(&ckpt(id, "/r", "one", first.clone()), 10).unwrap();
    let mut second = first.clone();
    second[1] = fresh(&mut s, CHUNK)[0];
    s.execute(&ckpt(id, "/r", "two", second.clone()), 11).unwrap();
    assert_eq!(s.snapshot_usage(), (2, 4 * CHUNK), "three copies of the first and one of the second");
    s.take_garbage();
    s.execute(&MetaOp::SnapshotRemove { path: "/r".into(), name: "one".into() }, 12).unwrap();
    // Only the copy no other checkpoint names became garbage.
    let g = s.take_garbage();
    assert_eq!((g.inodes, g.keys), (vec![], vec![first[1].key(id, 1)]));
    assert_eq!(s.stat("/r/.snapshots/two").unwrap().chunks, second);
    s.check_invariants().unwrap();
}

#[test]
fn a_removed_region_keeps_what_its_checkpoints_name_until_they_go() {
    let mut s = ready();
    let id = region(&mut s, "/r", 2 * CHUNK);
    let chunks = fresh(&mut s, 2 * CHUNK);
    s.execute(&ckpt(id, "/r", "one", chunks.clone()), 10).unwrap();
    s.take_garbage();
    s.execute(&remove_op("/r", false), 11).unwrap();
    // The region's own chunks go one by one; its inode is not collected whole.
    let g = s.take_garbage();
    assert_eq!((g.inodes, g.keys), (vec![], vec![ChunkKey::hashed(id, 0, 1), ChunkKey::hashed(id, 1, 1)]));
    assert!(!s.pending_gc().contains(&id));
    assert_eq!(s.stat("/r/.snapshots/one").unwrap().chunks, chunks);
    s.execute(&MetaOp::SnapshotRemove { path: "/r".into(), name: "one".into() }, 12).unwrap();
    let g = s.take_garbage();
    assert_eq!(g.inodes, vec![id]);
    assert!(s.pending_gc().contains(&id));
    s.check_invariants().unwrap();
}

#[test]
fn a_restore_is_marked_from_its_start_to_its_end() {
    let mut s = ready();
    let id = region(&mut s, "/r", CHUNK);
    let one = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/r", "one", one), 10).unwrap();
    let two = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/r", "two", two), 11).unwrap();
    assert_eq!(fails(&mut s, restore("/r", "one", true)).1, "/r@one: no restore of the region to it is under way");
    // Its start answers the checkpoint, with the versions to copy back.
    let MetaReply::Info(i) = s.execute(&restore("/r", "one", false), 12).unwrap() else { panic!() };
    assert_eq!(i, s.stat("/r/.snapshots/one").unwrap());
    assert_eq!(s.stat("/r").unwrap().restoring.as_deref(), Some("one"));
    // Begun again (a retry) it stays marked; nothing else may start meanwhile.
    s.execute(&restore("/r", "one", false), 13).unwrap();
    let (kind, msg) = fails(&mut s, restore("/r", "two", false));
    assert_eq!(
        (kind, msg.as_str()),
        (ErrorKind::Busy, "/r: its restore to checkpoint one has not finished; restore that first")
    );
    let next = fresh(&mut s, CHUNK);
    assert_eq!(fails(&mut s, ckpt(id, "/r", "three", next)).0, ErrorKind::Busy);
    let (kind, msg) = fails(&mut s, MetaOp::SnapshotRemove { path: "/r".into(), name: "one".into() });
    assert_eq!((kind, msg.as_str()), (ErrorKind::Busy, "/r@one: a restore of the region to it has not finished"));
    s.check_invariants().unwrap();
    let MetaReply::Info(i) = s.execute(&restore("/r", "one", true), 14).unwrap() else { panic!() };
    assert_eq!((i.restoring, i.mtime, i.ctime), (None, 14, 14));
    // A checkpoint is not restored as a snapshot is (its chunks must be copied back).
    let (kind, msg) = fails(&mut s, MetaOp::SnapshotRestore { path: "/r".into(), name: "two".into() });
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.starts_with("/r@two: is a checkpoint of a region"), "{msg}");
    // A region made anew at the path is not the one checkpointed.
    s.execute(&remove_op("/r", false), 15).unwrap();
    region(&mut s, "/r", CHUNK);
    assert!(fails(&mut s, restore("/r", "two", false)).1.contains("it was taken of another"));
    s.check_invariants().unwrap();
}

#[test]
fn a_region_moved_mid_restore_is_restored_at_its_new_path() {
    let mut s = ready();
    let id = region(&mut s, "/r", CHUNK);
    let one = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/r", "one", one.clone()), 10).unwrap();
    s.execute(&restore("/r", "one", false), 11).unwrap();
    s.execute(&rename_op("/r", "/moved"), 12).unwrap();
    let MetaReply::Info(i) = s.execute(&restore("/moved", "one", false), 13).unwrap() else { panic!() };
    assert_eq!(i.chunks, one);
    s.execute(&restore("/moved", "one", true), 14).unwrap();
    assert_eq!(s.stat("/moved").unwrap().restoring, None);
    s.check_invariants().unwrap();
}

#[test]
fn removing_a_region_mid_restore_drops_its_mark() {
    let mut s = ready();
    let id = region(&mut s, "/r", CHUNK);
    let one = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/r", "one", one), 10).unwrap();
    s.execute(&restore("/r", "one", false), 11).unwrap();
    s.execute(&remove_op("/r", false), 12).unwrap();
    s.check_invariants().unwrap();
    s.execute(&MetaOp::SnapshotRemove { path: "/r".into(), name: "one".into() }, 13).unwrap();
    s.check_invariants().unwrap();
}

#[test]
fn the_orphan_sweep_keeps_recorded_copies_and_gives_up_unrecorded_ones() {
    let mut s = ready();
    let id = region(&mut s, "/r", CHUNK);
    let kept = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/r", "one", kept.clone()), 10).unwrap();
    let stray = alloc(&mut s).0;
    let held = Default::default();
    let judge = |s: &MetaState, recent: bool, k| judge(s, &held, &mut |_| recent, k);
    assert_eq!(judge(&s, false, ChunkKey::hashed(id, 0, 1)), Verdict::Keep);
    assert_eq!(judge(&s, false, kept[0].key(id, 0)), Verdict::Keep);
    // A copy not recorded yet is kept while its version is freshly reserved,
    assert_eq!(judge(&s, true, ChunkKey::hashed(id, 0, stray)), Verdict::Keep);
    // then given up, its version retired so that no checkpoint records it.
    assert_eq!(judge(&s, false, ChunkKey::hashed(id, 0, stray)), Verdict::Orphan { retire: Some(stray) });
}

// ---- against a model ----

#[derive(Clone, Debug)]
enum Step {
    /// Chunk `.0` of the region gets bytes `.1`.
    Write(usize, u8),
    Checkpoint(u8),
    Restore(u8),
    RemoveCheckpoint(u8),
    RemoveRegion,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..4usize, 0..3u8).prop_map(|(i, b)| Step::Write(i, b)),
        3 => (0..3u8).prop_map(Step::Checkpoint),
        2 => (0..3u8).prop_map(Step::Restore),
        2 => (0..3u8).prop_map(Step::RemoveCheckpoint),
        1 => Just(Step::RemoveRegion),
    ]
}

/// The workers as a map of stored chunk objects to their bytes (one byte
/// stands for a chunk's contents).
type Store = BTreeMap<ChunkKey, u8>;

/// Deletes what the state just made garbage.
fn collect(s: &mut MetaState, store: &mut Store) {
    let g = s.take_garbage();
    for k in g.keys {
        store.remove(&k);
    }
    for i in g.inodes {
        store.retain(|k, _| k.inode != i);
    }
}

proptest! {
    /// Every checkpoint reads back the bytes the region had when it was
    /// taken, and the live region its own, whatever was written, taken,
    /// restored and removed since; and a checkpoint stores only the chunks
    /// that changed since the previous one.
    #[test]
    fn checkpoints_read_back_what_the_region_held(steps in prop::collection::vec(step(), 1..40)) {
        const CHUNKS: u64 = 4;
        let mut s = ready();
        let id = region(&mut s, "/r", CHUNKS * CHUNK);
        let mut store: Store = (0..CHUNKS).map(|i| (ChunkKey::hashed(id, i, 1), 0u8)).collect();
        let mut live: Option<Vec<u8>> = Some(vec![0; CHUNKS as usize]);
        // name -> (bytes per chunk, when taken)
        let mut model: BTreeMap<String, (Vec<u8>, u64)> = BTreeMap::new();
        let mut now = 10;
        for st in steps {
            now += 1;
            let name = |n: u8| format!("c{n}");
            match (st, live.as_mut()) {
                (Step::Write(i, b), Some(l)) => {
                    l[i] = b;
                    store.insert(ChunkKey::hashed(id, i as u64, 1), b);
                }
                (Step::Checkpoint(n), Some(l)) if !model.contains_key(&name(n)) => {
                    // The newest earlier checkpoint's copies are shared where the bytes match.
                    let newest = model.iter().max_by_key(|(_, (_, t))| *t).map(|(k, _)| k.clone());
                    let earlier = newest.map(|k| s.stat(&format!("/r/.snapshots/{k}")).unwrap().chunks);
                    let v = alloc(&mut s).0;
                    let mut chunks = Vec::new();
                    let mut copied = 0;
                    for i in 0..CHUNKS {
                        let shared = earlier.as_ref().map(|e| e[i as usize]).filter(|r| store.get(&r.key(id, i)) == Some(&l[i as usize]));
                        chunks.push(shared.unwrap_or_else(|| {
                            copied += 1;
                            store.insert(ChunkKey::hashed(id, i, v), l[i as usize]);
                            copy(v, CHUNK, u32::from(l[i as usize]))
                        }));
                    }
                    let before = s.snapshot_usage().1;
                    s.execute(&ckpt(id, "/r", &name(n), chunks), now).unwrap();
                    prop_assert_eq!(s.snapshot_usage().1 - before, copied * CHUNK);
                    model.insert(name(n), (l.clone(), now));
                }
                (Step::Restore(n), Some(l)) if model.contains_key(&name(n)) => {
                    s.execute(&restore("/r", &name(n), false), now).unwrap();
                    let c = s.stat(&format!("/r/.snapshots/{}", name(n))).unwrap();
                    for i in 0..CHUNKS {
                        let b = store[&c.chunks[i as usize].key(id, i)];
                        store.insert(ChunkKey::hashed(id, i, 1), b);
                    }
                    s.execute(&restore("/r", &name(n), true), now).unwrap();
                    *l = model[&name(n)].0.clone();
                }
                (Step::RemoveCheckpoint(n), _) if model.contains_key(&name(n)) => {
                    s.execute(&MetaOp::SnapshotRemove { path: "/r".into(), name: name(n) }, now).unwrap();
                    model.remove(&name(n));
                }
                (Step::RemoveRegion, Some(_)) => {
                    s.execute(&remove_op("/r", false), now).unwrap();
                    live = None;
                }
                _ => continue,
            }
            collect(&mut s, &mut store);
            s.check_invariants().unwrap();
            for (n, (bytes, _)) in &model {
                let c = s.stat(&format!("/r/.snapshots/{n}")).unwrap();
                for i in 0..CHUNKS {
                    prop_assert_eq!(store.get(&c.chunks[i as usize].key(id, i)), Some(&bytes[i as usize]), "{} chunk {}", n, i);
                }
            }
            if let Some(l) = &live {
                for i in 0..CHUNKS {
                    prop_assert_eq!(store.get(&ChunkKey::hashed(id, i, 1)), Some(&l[i as usize]));
                }
            }
        }
    }
}

#[test]
fn a_region_beneath_an_attachment_is_checkpointed_in_the_pool() {
    use std::collections::BTreeMap;
    use tierpool_meta::{Attachment, WriteMode};
    let mut s = ready();
    mkdir(&mut s, "/in");
    let attachment =
        Attachment { uri: "file:///data".into(), mode: WriteMode::Back, readonly: false, options: BTreeMap::new() };
    s.execute(&MetaOp::Attach { path: "/in".into(), attachment }, 3).unwrap();
    let id = region(&mut s, "/in/r", CHUNK);
    assert_eq!(s.stat("/in/r").unwrap().origin, None, "a region is never written below");
    let one = fresh(&mut s, CHUNK);
    s.execute(&ckpt(id, "/in/r", "one", one.clone()), 10).unwrap();
    assert_eq!(s.stat("/in/r/.snapshots/one").unwrap().chunks, one);
    s.execute(&restore("/in/r", "one", false), 11).unwrap();
    s.execute(&restore("/in/r", "one", true), 12).unwrap();
    s.check_invariants().unwrap();
}
