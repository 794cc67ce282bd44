//! Failures injected at the disk I/O seam leave the tiers as they were.

use super::{chunk, files, key, open, put, KIB};
use crate::store::disk_io::fail_nth;
use crate::TierKind;
use tierpool_types::{ChunkAttrs, ErrorKind};

#[test]
fn failed_demotion_write_keeps_chunk_in_memory() {
    // Demoting one chunk is two disk operations: write the temp file, rename it.
    for nth in [1, 2] {
        let (dir, m) = open(2 * KIB, 100 * KIB, 10);
        put(&m, key(1, 0), &chunk(KIB, 0), ChunkAttrs::default()).unwrap();
        put(&m, key(1, 1), &chunk(KIB, 1), ChunkAttrs::default()).unwrap();
        fail_nth(nth);
        let e = put(&m, key(1, 2), &chunk(KIB, 2), ChunkAttrs::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io, "{e}");
        assert!(e.message.contains("demoting chunk 1:0@0"), "{e}");
        assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem));
        assert_eq!(m.locate(key(1, 2)), None);
        let s = m.stats();
        assert_eq!((s.mem_used, s.mem_chunks, s.disk_used, s.disk_chunks, s.demotions), (2 * KIB, 2, 0, 0, 0));
        assert!(files(dir.path(), "").iter().all(|p| p.is_dir()), "no file left behind");
        put(&m, key(1, 2), &chunk(KIB, 2), ChunkAttrs::default()).unwrap();
        assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
        assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    }
}

#[test]
fn failed_second_demotion_undoes_the_first() {
    let (dir, m) = open(2 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), ChunkAttrs::default()).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), ChunkAttrs::default()).unwrap();
    fail_nth(3); // write+rename of the first victim succeed, the second write fails
    put(&m, key(1, 2), &chunk(2 * KIB, 2), ChunkAttrs::default()).unwrap_err();
    assert_eq!(m.stats().mem_chunks, 2);
    assert_eq!(m.stats().disk_chunks, 0);
    assert!(files(dir.path(), ".chunk").is_empty(), "the first victim's file is discarded");
}

#[test]
fn failed_unlink_on_rewrite_keeps_the_old_value() {
    let (dir, m) = open(0, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), ChunkAttrs::default()).unwrap();
    fail_nth(4); // read of the old file, write, rename of the new one; unlink of the old one fails
    m.write_ranges(key(1, 0), &[(0, b"x")]).unwrap_err();
    m.check_invariants();
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(files(dir.path(), ".chunk").len(), 1);
    fail_nth(1);
    m.delete(key(1, 0)).unwrap_err();
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0), "a failed delete keeps the chunk");
}

#[test]
fn failed_promotion_keeps_the_chunk_on_disk() {
    let (_d, m) = open(KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), ChunkAttrs::default()).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), ChunkAttrs::default()).unwrap();
    fail_nth(2); // the read succeeds, demoting 1:1 to make room fails
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    assert_eq!(m.locate(key(1, 1)), Some(TierKind::Mem));
    m.check_invariants();
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem), "the next read promotes it");
}

#[test]
fn failed_read_reports_io_error() {
    let (_d, m) = open(0, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), ChunkAttrs::default()).unwrap();
    fail_nth(1);
    assert_eq!(m.get(key(1, 0)).unwrap_err().kind, ErrorKind::Io);
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
}
