//! `FileState` against a byte vector, with the real metadata state machine
//! as the coordinator and a map as the workers: after any sequence of
//! writes, cuts, sends (completed in any order, or failed) and publishes
//! (by chunks, or of a small file with its bytes, inline), reads through
//! the state equal the model, a fresh open after a publish
//! reads what was published, and garbage collection never deletes a
//! version that is still referenced.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, MetaState, NewNode};

const CS: u64 = 4096;
/// Files of at most this many bytes may be published inline here.
const INLINE: u64 = 3000;

struct Harness {
    meta: MetaState,
    store: HashMap<ChunkKey, Bytes>,
    state: FileState,
    /// Sends handed out and not yet answered: (index, version, bytes).
    inflight: Vec<(u64, u64, Bytes)>,
    next_version: u64,
    model: Vec<u8>,
    published: Vec<u8>,
    now: u64,
}

impl Harness {
    fn new() -> Harness {
        let mut meta = MetaState::new();
        meta.execute(&MetaOp::Init { partitions: 4 }, 1).unwrap();
        let op = MetaOp::MakeAt {
            parent: InodeId::ROOT,
            name: "f".into(),
            node: NewNode::File { chunk_size: CS },
            mode: 0o644,
        };
        let MetaReply::Info(info) = meta.execute(&op, 2).unwrap() else { panic!("no info") };
        let state = FileState::new(info.id, CS, 0, Vec::new());
        Harness {
            meta,
            store: HashMap::new(),
            state,
            inflight: Vec::new(),
            next_version: 2, // 1 is no version an inline chunk takes
            model: Vec::new(),
            published: Vec::new(),
            now: 10,
        }
    }

    fn fetch(&self, index: u64, r: ChunkRef) -> Bytes {
        if r.is_inline() {
            let info = self.meta.stat("/f").unwrap();
            assert_eq!((index, info.chunks.first()), (0, Some(&r)), "an inline chunk read is the published one");
            return info.inline.expect("an inline chunk comes with its bytes");
        }
        let key = r.key(self.state.inode(), index);
        let data = self.store.get(&key).unwrap_or_else(|| panic!("chunk {key} is not stored")).clone();
        assert_eq!((data.len() as u64, crc32c::crc32c(&data)), (r.len, r.checksum), "chunk {key}");
        data
    }

    fn write(&mut self, offset: u64, data: &[u8], eager: bool) {
        for (i, r) in self.state.loads_for_write(offset, data.len() as u64) {
            let bytes = self.fetch(i, r);
            self.state.install(i, &bytes);
        }
        let full = self.state.write(offset, data);
        let end = offset as usize + data.len();
        if self.model.len() < end {
            self.model.resize(end, 0);
        }
        self.model[offset as usize..end].copy_from_slice(data);
        if eager {
            for i in full {
                self.send(i);
            }
        }
    }

    fn truncate(&mut self, size: u64) {
        if let Some((i, r)) = self.state.load_for_cut(size) {
            let bytes = self.fetch(i, r);
            self.state.install(i, &bytes);
        }
        self.state.truncate(size);
        self.model.resize(size as usize, 0);
    }

    fn send(&mut self, index: u64) {
        let version = self.next_version;
        if let Some(data) = self.state.send(index, version) {
            self.next_version += 1;
            self.inflight.push((index, version, data));
        }
    }

    /// Answers the `k`-th send in flight: stored, or failed.
    fn answer(&mut self, k: usize, ok: bool) {
        if self.inflight.is_empty() {
            return;
        }
        let (index, version, data) = self.inflight.remove(k % self.inflight.len());
        if ok {
            let r = ChunkRef { version, len: data.len() as u64, checksum: crc32c::crc32c(&data), home: None };
            self.store.insert(ChunkKey::hashed(self.state.inode(), index, version), data);
            self.state.sent(index, r);
        } else {
            self.state.send_failed(index, version);
        }
    }

    fn publish(&mut self, inline: bool) {
        while !self.inflight.is_empty() {
            self.answer(0, true);
        }
        if let Some(data) = self.state.small_contents(INLINE).filter(|_| inline) {
            self.now += 1;
            let op = MetaOp::UpdateInline { inode: self.state.inode(), version: self.next_version, data: data.into() };
            self.next_version += 1;
            let MetaReply::Info(info) = self.meta.execute(&op, self.now).unwrap() else { panic!("no info") };
            self.state.published_inline(info.size, info.chunks);
            assert!(!self.state.changed() && self.state.dirty_chunks().is_empty());
            for k in self.state.take_garbage() {
                self.store.remove(&k);
            }
            self.published = self.model.clone();
            return;
        }
        loop {
            for i in self.state.dirty_chunks() {
                self.send(i);
            }
            while !self.inflight.is_empty() {
                self.answer(0, true);
            }
            if self.state.dirty_chunks().is_empty() {
                break;
            }
        }
        let c = self.state.commit().expect("nothing local after sending everything");
        self.now += 1;
        let op = MetaOp::UpdateFile { inode: self.state.inode(), size: c.size, truncate: c.cut, chunks: c.chunks };
        let MetaReply::Info(info) = self.meta.execute(&op, self.now).unwrap() else { panic!("no info") };
        self.state.published(info.size, info.chunks);
        for k in self.state.take_garbage() {
            self.store.remove(&k);
        }
        self.published = self.model.clone();
    }

    /// What the workers' garbage collector would do now.
    fn collect(&mut self) {
        let keys: Vec<ChunkKey> = self.meta.pending_chunks().iter().copied().collect();
        for k in &keys {
            self.store.remove(k);
        }
        self.meta.execute(&MetaOp::GcChunksDone { keys }, self.now).unwrap();
    }

    fn read(state: &FileState, h: &Harness, offset: u64, len: u64) -> Vec<u8> {
        let end = (offset + len).min(state.size());
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let index = pos / CS;
            let from = (pos - index * CS) as usize;
            let to = ((end - index * CS) as usize).min(CS as usize);
            match state.source(index, from, to) {
                Source::Local(b) => out.extend_from_slice(&b),
                Source::Zero => out.resize(out.len() + to - from, 0),
                Source::Stored(r) => {
                    let data = h.fetch(index, r);
                    let mut chunk = data.to_vec();
                    chunk.resize(CS as usize, 0);
                    out.extend_from_slice(&chunk[from..to]);
                }
            }
            pos = index * CS + to as u64;
        }
        out
    }

    fn check(&self) {
        assert_eq!(self.state.size(), self.model.len() as u64);
        let got = Harness::read(&self.state, self, 0, self.model.len() as u64 + 10);
        assert!(got == self.model, "the open file reads what was written");
        let info: InodeInfo = self.meta.stat("/f").unwrap();
        assert_eq!(info.size, self.published.len() as u64);
        let fresh = FileState::new(info.id, CS, info.size, info.chunks);
        let got = Harness::read(&fresh, self, 0, info.size);
        assert!(got == self.published, "a fresh open reads what was published");
        self.meta.check_invariants().unwrap();
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, len: u64, seed: u8, eager: bool },
    Truncate(u64),
    SendOldest,
    Answer { k: usize, ok: bool },
    Publish { inline: bool },
    Collect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Small files too, to be published inline.
        6 => (prop_oneof![0..6 * CS, 0..INLINE], prop_oneof![1..2 * CS + 100, 1..500u64], any::<u8>(), any::<bool>())
            .prop_map(|(offset, len, seed, eager)| Op::Write { offset, len, seed, eager }),
        2 => prop_oneof![0..7 * CS, 0..INLINE + 200].prop_map(Op::Truncate),
        2 => Just(Op::SendOldest),
        3 => (any::<usize>(), prop::bool::weighted(0.8)).prop_map(|(k, ok)| Op::Answer { k, ok }),
        2 => any::<bool>().prop_map(|inline| Op::Publish { inline }),
        1 => Just(Op::Collect),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn an_open_file_reads_like_a_byte_vector(ops in prop::collection::vec(op(), 1..40)) {
        let mut h = Harness::new();
        for op in ops {
            match op {
                Op::Write { offset, len, seed, eager } => {
                    let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add((i % 251) as u8) | 1).collect();
                    h.write(offset, &data, eager);
                }
                Op::Truncate(size) => h.truncate(size),
                Op::SendOldest => {
                    if let Some(i) = h.state.oldest_dirty() {
                        h.send(i);
                    }
                }
                Op::Answer { k, ok } => h.answer(k, ok),
                Op::Publish { inline } => h.publish(inline),
                Op::Collect => h.collect(),
            }
            h.check();
            let held: u64 = h.state.dirty_chunks().iter().map(|i| h.state.local[i].len() as u64).sum();
            prop_assert_eq!(h.state.dirty_bytes(), held);
        }
        h.publish(true);
        h.collect();
        h.check();
        // Nothing is left behind: the workers hold exactly the published chunks.
        let info = h.meta.stat("/f").unwrap();
        let mut held: Vec<ChunkKey> = h.store.keys().copied().collect();
        held.sort();
        let want: Vec<ChunkKey> =
            (info.chunks.iter().enumerate()).filter(|(_, r)| r.is_stored()).map(|(i, r)| r.key(info.id, i as u64)).collect();
        prop_assert_eq!(held, want);
    }
}

#[test]
fn a_small_file_held_here_whole_is_published_with_its_bytes() {
    let mut s = FileState::new(InodeId(7), CS, 0, Vec::new());
    assert_eq!(s.small_contents(INLINE), None, "nothing changed");
    s.write(0, b"abc");
    s.write(10, b"xyz");
    assert_eq!(s.small_contents(INLINE).unwrap(), b"abc\0\0\0\0\0\0\0xyz");
    assert_eq!(s.small_contents(5), None, "past the limit");
    s.truncate(20);
    assert_eq!(s.small_contents(INLINE).unwrap().len(), 20, "zeros past the bytes written");
    s.truncate(0);
    assert_eq!(s.small_contents(INLINE).unwrap(), b"");
    // A chunk on its way to a worker, or stored by this writer: by chunks.
    s.write(0, b"abc");
    s.send(0, 9).unwrap();
    assert_eq!(s.small_contents(INLINE), None);
    let r9 = ChunkRef { version: 9, len: 3, checksum: crc32c::crc32c(b"abc"), home: None };
    s.sent(0, r9);
    assert_eq!(s.small_contents(INLINE), None);
    // Written again, it is held whole here: the stored version is garbage once published inline.
    assert_eq!(s.loads_for_write(1, 1), vec![(0, r9)]);
    s.install(0, b"abc");
    s.write(1, b"B");
    assert_eq!(s.small_contents(INLINE).unwrap(), b"aBc");
    let inline = ChunkRef { version: ChunkRef::INLINE_BIT | 10, ..ChunkRef::inline(b"aBc") };
    s.published_inline(3, vec![inline]);
    assert_eq!((s.changed(), s.dirty_bytes(), s.source(0, 0, 3)), (false, 0, Source::Stored(inline)));
    assert_eq!(s.take_garbage(), vec![ChunkKey::hashed(InodeId(7), 0, 9)]);
}

#[test]
fn a_sequential_writer_fills_and_hands_out_whole_chunks() {
    let mut s = FileState::new(InodeId(5), CS, 0, Vec::new());
    assert_eq!(s.write(0, &[1; 3000]), Vec::<u64>::new());
    assert_eq!(s.write(3000, &[2; 6000]), vec![0, 1], "chunks 0 and 1 were filled to their end");
    assert!(s.is_full(0) && s.is_full(1) && !s.is_full(2));
    assert_eq!((s.dirty_bytes(), s.oldest_dirty()), (9000, Some(0)));
    let data = s.send(0, 77).unwrap();
    assert_eq!((data.len(), s.dirty_bytes()), (4096, 9000 - 4096));
    let r77 = ChunkRef { version: 77, len: 4096, checksum: crc32c::crc32c(&data), home: None };
    s.sent(0, r77);
    assert_eq!(s.commit(), None, "chunks 1 and 2 are still held here");
    for (i, v) in [(1, 78), (2, 79)] {
        let d = s.send(i, v).unwrap();
        s.sent(i, ChunkRef { version: v, len: d.len() as u64, checksum: 1, home: None });
    }
    let c = s.commit().unwrap();
    assert_eq!((c.size, c.cut, c.chunks.len()), (9000, None, 3));
    assert!(s.take_garbage().is_empty());
    // a chunk changed while on its way: the version in flight is garbage
    assert_eq!(s.loads_for_write(0, 10), vec![(0, r77)], "a part of a stored chunk needs its bytes");
    s.install(0, &data);
    s.write(0, &[3; 10]);
    s.send(0, 80);
    s.write(5, &[4; 10]);
    s.sent(0, ChunkRef { version: 80, len: 4096, checksum: 2, home: None });
    assert_eq!(s.take_garbage(), vec![ChunkKey::hashed(InodeId(5), 0, 80)]);
    assert_eq!(s.dirty_chunks(), vec![0]);
}

#[test]
fn a_chunk_written_out_of_order_is_sent_once_complete() {
    let mut s = FileState::new(InodeId(6), CS, 0, Vec::new());
    assert_eq!(s.write(3000, &[1; 1096]), Vec::<u64>::new(), "reaches the end, but bytes 0..3000 are unknown");
    assert_eq!(s.write(1000, &[2; 1000]), Vec::<u64>::new());
    assert_eq!(s.write(0, &[3; 1000]), Vec::<u64>::new(), "2000..3000 still missing");
    assert_eq!(s.write(2000, &[4; 1000]), vec![0], "now every byte is known");
    assert_eq!(s.write(100, &[5; 10]), Vec::<u64>::new(), "a rewrite inside a complete chunk waits");
    assert_eq!(s.write(4000, &[6; 96]), vec![0], "a rewrite up to its end sends it again");
}

#[test]
fn covered_ranges_merge() {
    let mut r = Vec::new();
    for (a, b) in [(10, 20), (30, 40), (0, 5), (5, 10), (19, 31)] {
        cover(&mut r, a, b);
    }
    assert_eq!(r, vec![(0, 40)]);
    cover(&mut r, 50, 60);
    assert_eq!(r, vec![(0, 40), (50, 60)]);
    assert!(!is_complete(&r, 60) && is_complete(&[(0, 60)], 60));
}
