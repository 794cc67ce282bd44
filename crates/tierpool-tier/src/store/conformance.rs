//! The one behaviour suite every [`ChunkStore`] must pass.

use super::{ChunkStore, DiskStore, MemStore};
use bytes::Bytes;
use tierpool_types::{ChunkKey, ErrorKind, InodeId};

fn key(inode: u64, index: u64) -> ChunkKey {
    ChunkKey::hashed(InodeId(inode), index, 1)
}

fn put(s: &mut impl ChunkStore, k: ChunkKey, data: &[u8]) {
    s.put(k, Bytes::copy_from_slice(data), crc32c::crc32c(data)).unwrap();
}

fn puts_and_gets(s: &mut impl ChunkStore) {
    put(s, key(1, 0), b"hello");
    put(s, key(1, 1), b"");
    assert_eq!(s.get(key(1, 0)).unwrap(), &b"hello"[..]);
    assert_eq!(s.get(key(1, 1)).unwrap(), &b""[..]);
    let meta = s.meta(key(1, 0)).unwrap();
    assert_eq!((meta.len, meta.checksum), (5, crc32c::crc32c(b"hello")));
    let e = s.get(key(1, 2)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("1:2@1"), "{}", e.message);
    assert!(s.meta(key(1, 2)).is_none());
}

fn replaces(s: &mut impl ChunkStore) {
    put(s, key(2, 0), &[7; 100]);
    put(s, key(2, 0), &[8; 30]);
    assert_eq!(s.get(key(2, 0)).unwrap(), &[8u8; 30][..]);
    assert_eq!((s.used(), s.len()), (30, 1));
}

fn deletes(s: &mut impl ChunkStore) {
    put(s, key(3, 0), &[1; 10]);
    assert!(s.delete(key(3, 0)).unwrap());
    assert!(!s.delete(key(3, 0)).unwrap());
    assert_eq!(s.get(key(3, 0)).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!((s.used(), s.len()), (0, 0));
    assert!(s.is_empty());
}

fn deletes_an_inode_range(s: &mut impl ChunkStore) {
    for inode in [4, 5, 6] {
        for index in [0, 1, u64::MAX] {
            put(s, ChunkKey::hashed(InodeId(inode), index, u64::MAX), &[inode as u8; 3]);
        }
    }
    assert_eq!(s.keys_of(InodeId(5)).len(), 3);
    assert_eq!(s.delete_inode(InodeId(5)).unwrap(), 3);
    assert_eq!(s.delete_inode(InodeId(5)).unwrap(), 0);
    assert!(s.keys_of(InodeId(5)).is_empty());
    assert_eq!(s.keys_of(InodeId(4)).len(), 3);
    assert_eq!(s.keys_of(InodeId(6)).len(), 3);
    assert_eq!((s.used(), s.len()), (18, 6));
}

fn counts_used_bytes(s: &mut impl ChunkStore) {
    let mut want = 0;
    for i in 0..20u64 {
        put(s, key(7, i), &vec![i as u8; i as usize * 13]);
        want += i * 13;
        assert_eq!((s.used(), s.len()), (want, i + 1));
    }
    for i in (0..20u64).step_by(2) {
        s.delete(key(7, i)).unwrap();
        want -= i * 13;
    }
    assert_eq!((s.used(), s.len()), (want, 10));
    for i in (1..20u64).step_by(2) {
        assert_eq!(s.get(key(7, i)).unwrap(), vec![i as u8; i as usize * 13]);
    }
}

/// A named case of the suite.
type Case<S> = (&'static str, fn(&mut S));

/// Runs every case on a fresh store from `make`.
fn suite<S: ChunkStore>(mut make: impl FnMut() -> S) {
    let cases: [Case<S>; 5] = [
        ("puts_and_gets", puts_and_gets),
        ("replaces", replaces),
        ("deletes", deletes),
        ("deletes_an_inode_range", deletes_an_inode_range),
        ("counts_used_bytes", counts_used_bytes),
    ];
    for (name, case) in cases {
        eprintln!("conformance case {name}");
        case(&mut make());
    }
}

#[test]
fn mem_store_conforms() {
    suite(MemStore::new);
}

#[test]
fn disk_store_conforms() {
    let dirs: std::cell::RefCell<Vec<tempfile::TempDir>> = Default::default();
    suite(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskStore::open(dir.path(), u64::MAX).unwrap();
        dirs.borrow_mut().push(dir);
        store
    });
}

#[test]
fn disk_store_reopens_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = DiskStore::open(dir.path(), u64::MAX).unwrap();
    put(&mut s, key(1, 0), b"first");
    put(&mut s, key(1, 0), b"second");
    put(&mut s, key(2, 0), b"other");
    drop(s);
    let s = DiskStore::open(dir.path(), u64::MAX).unwrap();
    assert_eq!(s.get(key(1, 0)).unwrap(), &b"second"[..]);
    assert_eq!(s.get(key(2, 0)).unwrap(), &b"other"[..]);
    assert_eq!((s.used(), s.len()), (11, 2));
}
