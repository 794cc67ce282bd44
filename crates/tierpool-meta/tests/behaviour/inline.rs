//! `CommitInline` and `UpdateInline`: small files whose bytes the state
//! holds, by examples and against a model of a file's bytes as writers
//! grow, rewrite and cut it across the inline size (the state's chunk list, with stored versions
//! looked up in a fake store and inline ones in the state, must always
//! read as the model's bytes).

use crate::common::*;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, MetaState, INLINE_MAX};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, ErrorKind, InodeId};

fn inline_op(path: &str, inode: InodeId, data: &[u8]) -> MetaOp {
    MetaOp::CommitInline {
        path: path.into(),
        inode,
        data: Bytes::copy_from_slice(data),
        chunk_size: CHUNK,
        attrs: ChunkAttrs::default(),
        mode: 0o600,
        overwrite: true,
    }
}

fn info(s: &mut MetaState, op: MetaOp) -> InodeInfo {
    match s.execute(&op, 7).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn stored(version: u64, data: &[u8]) -> ChunkRef {
    ChunkRef { version, len: data.len() as u64, checksum: crc32c::crc32c(data), home: None }
}

#[test]
fn a_small_file_is_committed_with_its_bytes_and_stat_returns_them() {
    let mut s = ready();
    let id = alloc(&mut s);
    let i = info(&mut s, inline_op("/a", id, b"hello"));
    assert_eq!((i.size, i.mode, i.chunks.len()), (5, 0o600, 1));
    assert!(i.chunks[0].is_inline() && !i.chunks[0].is_stored());
    assert_eq!(i.chunks[0], ChunkRef::inline(b"hello"));
    assert_eq!(i.inline.as_deref(), Some(&b"hello"[..]));
    assert_eq!(s.stat("/a").unwrap().inline.as_deref(), Some(&b"hello"[..]));
    assert_eq!(s.stat_inode(id, false).unwrap().inline, None, "a stat without chunks carries no bytes");
    assert_eq!(s.inline_usage(), (1, 5));
    // Nothing of it is on the workers: no garbage when it goes.
    s.take_garbage();
    s.execute(&remove_op("/a", false), 8).unwrap();
    assert_eq!(s.inline_usage(), (0, 0));
    assert!(s.take_garbage().keys.is_empty());
    s.check_invariants().unwrap();
}

#[test]
fn an_empty_file_written_whole_holds_nothing_inline() {
    let mut s = ready();
    let id = alloc(&mut s);
    let i = info(&mut s, inline_op("/e", id, b""));
    assert_eq!((i.size, i.chunks.len(), i.inline), (0, 0, None));
    assert_eq!(s.inline_usage(), (0, 0));
}

#[test]
fn replacing_or_rewriting_the_first_chunk_lets_go_of_the_bytes() {
    let mut s = ready();
    let a = alloc(&mut s);
    info(&mut s, inline_op("/f", a, b"one"));
    let b = alloc(&mut s);
    info(&mut s, inline_op("/f", b, b"three"));
    assert_eq!(s.inline_usage(), (1, 5), "the replaced file's bytes went with it");
    // Appending a chunk keeps chunk 0 inline.
    let tail = stored(40, &[7u8; 10]);
    let i = info(&mut s, MetaOp::UpdateFile { inode: b, size: CHUNK + 10, truncate: None, chunks: vec![(1, tail)] });
    assert!(i.chunks[0].is_inline());
    assert_eq!(i.inline.as_deref(), Some(&b"three"[..]));
    // A rewrite of chunk 0 on the workers: no longer inline.
    s.take_garbage();
    let head = stored(41, b"THREE");
    let i = info(&mut s, MetaOp::UpdateFile { inode: b, size: CHUNK + 10, truncate: None, chunks: vec![(0, head)] });
    assert_eq!((i.chunks[0], i.inline), (head, None));
    assert_eq!(s.inline_usage(), (0, 0));
    assert!(s.take_garbage().keys.is_empty(), "an inline chunk is nobody's garbage");
    s.check_invariants().unwrap();
}

#[test]
fn a_cut_through_inline_bytes_needs_them_rewritten_and_a_cut_to_zero_drops_them() {
    let mut s = ready();
    let id = alloc(&mut s);
    info(&mut s, inline_op("/f", id, b"0123456789"));
    let (kind, msg) = fails(&mut s, MetaOp::UpdateFile { inode: id, size: 4, truncate: Some(4), chunks: vec![] });
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.contains("send a shortened version"), "{msg}");
    // Growing needs nothing: the bytes after the inline ones read as zeros.
    let i = info(&mut s, MetaOp::UpdateFile { inode: id, size: 100, truncate: Some(100), chunks: vec![] });
    assert_eq!((i.size, i.inline.as_deref()), (100, Some(&b"0123456789"[..])));
    let i = info(&mut s, MetaOp::UpdateFile { inode: id, size: 0, truncate: Some(0), chunks: vec![] });
    assert_eq!((i.size, i.chunks.len(), i.inline), (0, 0, None));
    assert_eq!(s.inline_usage(), (0, 0));
    s.check_invariants().unwrap();
}

#[test]
fn bad_inline_commits_and_updates_are_refused() {
    let mut s = ready();
    let id = alloc(&mut s);
    let big = vec![1u8; (INLINE_MAX + 1) as usize];
    let mut op = inline_op("/big", id, &big);
    if let MetaOp::CommitInline { chunk_size, .. } = &mut op {
        *chunk_size = 1 << 20;
    }
    let (kind, msg) = fails(&mut s, op);
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.contains("too many to keep inline"), "{msg}");
    let (kind, _) = fails(&mut s, inline_op("/big", id, &vec![1u8; CHUNK as usize + 1]));
    assert_eq!(kind, ErrorKind::InvalidArgument, "more than a chunk");
    let (kind, _) = fails(&mut s, inline_op("/nodir/x", id, b"x"));
    assert_eq!(kind, ErrorKind::NotFound);
    // A writer cannot claim a chunk is inline.
    let f = commit(&mut s, "/f", 10);
    let chunks = vec![(0, ChunkRef::inline(b"0123456789"))];
    let (kind, msg) = fails(&mut s, MetaOp::UpdateFile { inode: f.id, size: 10, truncate: None, chunks });
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(msg.contains("cannot be sent inline"), "{msg}");
}

fn update_inline(inode: InodeId, version: u64, data: &[u8]) -> MetaOp {
    MetaOp::UpdateInline { inode, version, data: Bytes::copy_from_slice(data) }
}

#[test]
fn an_existing_file_takes_small_contents_inline_at_a_fresh_version_each_time() {
    let mut s = ready();
    let f = commit(&mut s, "/f", CHUNK + 10);
    s.take_garbage();
    let i = info(&mut s, update_inline(f.id, 50, b"small now"));
    assert_eq!((i.size, i.chunks.len()), (9, 1));
    assert_eq!(i.chunks[0], ChunkRef { version: ChunkRef::INLINE_BIT | 50, ..ChunkRef::inline(b"small now") });
    assert_eq!(i.inline.as_deref(), Some(&b"small now"[..]));
    let gone = s.take_garbage().keys;
    assert_eq!(gone, vec![f.chunks[0].key(f.id, 0), f.chunks[1].key(f.id, 1)], "both stored chunks are replaced");
    assert_eq!(s.inline_usage(), (1, 9));
    // Again, at another version: the bytes held are the new ones, and none are garbage.
    let i = info(&mut s, update_inline(f.id, 51, b"smaller"));
    assert_eq!(
        (i.size, i.chunks[0].version, i.inline.as_deref()),
        (7, ChunkRef::INLINE_BIT | 51, Some(&b"smaller"[..]))
    );
    assert_eq!(s.inline_usage(), (1, 7));
    assert!(s.take_garbage().keys.is_empty());
    // Emptied: no chunk, nothing held.
    let i = info(&mut s, update_inline(f.id, 52, b""));
    assert_eq!((i.size, i.chunks.len(), i.inline), (0, 0, None));
    assert_eq!(s.inline_usage(), (0, 0));
    // A file made by name, with no chunk yet, takes them too.
    let node = tierpool_meta::NewNode::File { chunk_size: CHUNK };
    let e = info(&mut s, MetaOp::MakeAt { parent: InodeId::ROOT, name: "e".into(), node, mode: 0o644 });
    assert_eq!(info(&mut s, update_inline(e.id, 53, b"e")).inline.as_deref(), Some(&b"e"[..]));
    s.check_invariants().unwrap();
}

#[test]
fn bad_inline_updates_are_refused() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 10);
    let big = vec![1u8; CHUNK as usize + 1];
    let (kind, msg) = fails(&mut s, update_inline(f.id, 5, &big));
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert_eq!(msg, format!("inode {}: {} bytes are too many to keep inline (at most {CHUNK} here)", f.id, CHUNK + 1));
    for v in [0, 1, ChunkRef::INLINE_BIT, ChunkRef::INLINE_BIT | 5] {
        let (kind, msg) = fails(&mut s, update_inline(f.id, v, b"x"));
        assert_eq!(kind, ErrorKind::InvalidArgument);
        assert_eq!(msg, format!("inode {}: {v} is not a version an inline chunk can take", f.id));
    }
    s.execute(&mkdir_op("/d", false), 8).unwrap();
    let d = s.stat("/d").unwrap().id;
    let (kind, _) = fails(&mut s, update_inline(d, 5, b"x"));
    assert_eq!(kind, ErrorKind::IsADirectory);
    let (kind, _) = fails(&mut s, update_inline(InodeId(999_999), 5, b"x"));
    assert_eq!(kind, ErrorKind::NotFound);
    assert_eq!(s.stat("/f").unwrap(), f, "nothing changed");
    s.check_invariants().unwrap();
}

/// What a writer does to the file `/f`.
#[derive(Clone, Debug)]
enum Step {
    /// Replaces it with `len` bytes of `fill`, written whole.
    Put { len: u64, fill: u8 },
    /// Writes `len` bytes of `fill` at `offset`, as the mount does: every
    /// chunk touched is sent as a new version with its whole new contents,
    /// or, with `whole` and a result that fits, the whole file inline.
    Write { offset: u64, len: u64, fill: u8, whole: bool },
    /// Cuts or extends it to `size` (`whole`: as for `Write`).
    Truncate { size: u64, whole: bool },
}

/// Files of at most this many bytes are put inline here.
const LIMIT: u64 = 1000;

fn step() -> impl Strategy<Value = Step> {
    let size = prop_oneof![0..=LIMIT + 10, LIMIT - 10..=LIMIT + 10, 0..=3 * CHUNK];
    prop_oneof![
        (size.clone(), any::<u8>()).prop_map(|(len, fill)| Step::Put { len, fill }),
        (0..=2 * CHUNK, 1..=CHUNK + 100, any::<u8>(), any::<bool>())
            .prop_map(|(offset, len, fill, whole)| Step::Write { offset, len, fill, whole }),
        (size, any::<bool>()).prop_map(|(size, whole)| Step::Truncate { size, whole }),
    ]
}

/// The state's view of `/f` read back: stored versions from `store`,
/// inline ones from the state, zeros for holes and past each chunk's bytes.
fn read_back(s: &MetaState, store: &BTreeMap<ChunkKey, Vec<u8>>) -> Vec<u8> {
    let i = s.stat("/f").unwrap();
    let mut out = Vec::new();
    for (index, r) in i.chunks.iter().enumerate() {
        let share = (i.size - index as u64 * CHUNK).min(CHUNK) as usize;
        let mut bytes = if r.is_hole() {
            Vec::new()
        } else if r.is_inline() {
            assert_eq!(index, 0);
            i.inline.clone().expect("an inline chunk comes with its bytes").to_vec()
        } else {
            store[&r.key(i.id, index as u64)].clone()
        };
        assert_eq!(crc32c::crc32c(&bytes), r.checksum);
        bytes.resize(share, 0);
        out.extend(bytes);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_file_crossing_the_inline_size_keeps_its_bytes(steps in prop::collection::vec(step(), 1..25)) {
        let mut s = ready();
        let mut store: BTreeMap<ChunkKey, Vec<u8>> = BTreeMap::new();
        let mut model: Vec<u8> = Vec::new();
        let mut inode = None;
        let mut version = 1_000_000u64;
        for st in steps {
            match st {
                Step::Put { len, fill } => {
                    let id = alloc(&mut s);
                    let data = vec![fill; len as usize];
                    if len <= LIMIT {
                        info(&mut s, inline_op("/f", id, &data));
                    } else {
                        let chunks: Vec<&[u8]> = data.chunks(CHUNK as usize).collect();
                        for (i, c) in chunks.iter().enumerate() {
                            store.insert(ChunkKey::hashed(id, i as u64, 1), c.to_vec());
                        }
                        let mut op = commit_op("/f", id, len, true);
                        if let MetaOp::CommitFile { checksums, .. } = &mut op {
                            *checksums = chunks.iter().map(|c| crc32c::crc32c(c)).collect();
                        }
                        info(&mut s, op);
                    }
                    (model, inode) = (data, Some(id));
                }
                Step::Write { offset, len, fill, whole } => {
                    let Some(id) = inode else { continue };
                    let end = (offset + len) as usize;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[offset as usize..end].fill(fill);
                    version += 1;
                    if whole && model.len() as u64 <= LIMIT {
                        info(&mut s, update_inline(id, version, &model));
                    } else {
                        let mut chunks = Vec::new();
                        for index in offset / CHUNK..=(end as u64 - 1) / CHUNK {
                            let from = (index * CHUNK) as usize;
                            let data = &model[from..(from + CHUNK as usize).min(model.len())];
                            version += 1;
                            store.insert(ChunkKey::hashed(id, index, version), data.to_vec());
                            chunks.push((index, stored(version, data)));
                        }
                        info(&mut s, MetaOp::UpdateFile { inode: id, size: model.len() as u64, truncate: None, chunks });
                    }
                }
                Step::Truncate { size, whole } => {
                    let Some(id) = inode else { continue };
                    let cut = (size as usize) < model.len();
                    model.resize(size as usize, 0);
                    version += 1;
                    if whole && size <= LIMIT {
                        info(&mut s, update_inline(id, version, &model));
                    } else {
                        let mut chunks = Vec::new();
                        if cut && size % CHUNK != 0 {
                            let index = size / CHUNK;
                            let data = &model[(index * CHUNK) as usize..];
                            version += 1;
                            store.insert(ChunkKey::hashed(id, index, version), data.to_vec());
                            chunks.push((index, stored(version, data)));
                        }
                        info(&mut s, MetaOp::UpdateFile { inode: id, size, truncate: Some(size), chunks });
                    }
                }
            }
            s.check_invariants().unwrap();
            if inode.is_some() {
                prop_assert_eq!(read_back(&s, &store), model.clone());
                let first_inline = s.stat("/f").unwrap().chunks.first().is_some_and(|r| r.is_inline());
                let held = s.inline_usage();
                prop_assert_eq!(held.0, u64::from(first_inline));
            }
        }
    }
}
