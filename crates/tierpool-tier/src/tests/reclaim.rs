//! Reclaimable chunks: readable until room is needed, then dropped before any
//! live chunk moves or a put fails.

use super::{chunk, files, key, open, put, KIB};
use crate::TierKind::{self, Disk, Mem};
use crate::TierManager;
use tierpool_types::{ChunkAttrs, ErrorKind, InodeId};

const DEFAULT: ChunkAttrs = ChunkAttrs { priority: tierpool_types::Priority::MIN, pinned: false };

fn where_(m: &TierManager, idx: &[u64]) -> Vec<Option<TierKind>> {
    idx.iter().map(|i| m.locate(key(1, *i))).collect()
}

/// (reclaimable chunks, reclaimable bytes, reclaimed, demotions)
fn counts(m: &TierManager) -> (u64, u64, u64, u64) {
    let s = m.stats();
    (s.reclaimable_chunks, s.reclaimable_bytes, s.reclaimed, s.demotions)
}

#[test]
fn reclaimable_chunks_stay_readable_and_are_counted_as_used() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB / 2, 1), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1]), [Some(Disk), Some(Mem)]);
    assert_eq!(m.mark_reclaimable(&[key(1, 0), key(1, 1), key(1, 0), key(1, 9)]), 2, "distinct stored keys");
    assert!(m.is_reclaimable(key(1, 0)) && m.is_reclaimable(key(1, 1)) && !m.is_reclaimable(key(1, 9)));
    assert_eq!(counts(&m), (2, KIB + KIB / 2, 0, 1));
    let s = m.stats();
    assert_eq!((s.mem_used, s.disk_used, s.mem_chunks, s.disk_chunks), (KIB / 2, KIB, 1, 1));
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(m.get(key(1, 1)).unwrap(), chunk(KIB / 2, 1));
    put(&m, key(1, 1), &chunk(KIB / 2, 1), DEFAULT).unwrap();
    assert!(m.is_reclaimable(key(1, 1)), "a retried put keeps the mark");
    m.check_invariants();
}

#[test]
fn a_put_drops_reclaimable_memory_before_demoting_a_live_chunk() {
    let (dir, m) = open(3 * KIB, 100 * KIB, 10);
    for i in 0..3 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    m.mark_reclaimable(&[key(1, 2)]); // the most recently used: last in eviction order
    put(&m, key(1, 3), &chunk(KIB, 3), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2, 3]), [Some(Mem), Some(Mem), None, Some(Mem)]);
    assert_eq!(counts(&m), (0, 0, 1, 0));
    assert!(files(dir.path(), ".chunk").is_empty(), "dropped, not demoted");
}

#[test]
fn reclaimable_chunks_are_dropped_oldest_mark_first_and_only_as_needed() {
    let (_d, m) = open(3 * KIB, 100 * KIB, 10);
    for i in 0..3 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    m.mark_reclaimable(&[key(1, 1)]);
    m.mark_reclaimable(&[key(1, 0)]);
    put(&m, key(1, 3), &chunk(KIB, 3), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2, 3]), [Some(Mem), None, Some(Mem), Some(Mem)]);
    assert_eq!(counts(&m), (1, KIB, 1, 0));
}

#[test]
fn a_put_drops_reclaimable_disk_chunks_to_demote_into_their_room() {
    let (dir, m) = open(KIB, 2 * KIB, 10);
    for i in 0..3 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    assert_eq!(where_(&m, &[0, 1, 2]), [Some(Disk), Some(Disk), Some(Mem)]);
    assert_eq!(put(&m, key(1, 3), &chunk(KIB, 3), DEFAULT).unwrap_err().kind, ErrorKind::PoolFull);
    m.mark_reclaimable(&[key(1, 0)]);
    put(&m, key(1, 3), &chunk(KIB, 3), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2, 3]), [None, Some(Disk), Some(Disk), Some(Mem)]);
    assert_eq!(counts(&m), (0, 0, 1, 3));
    assert_eq!(files(dir.path(), ".chunk").len(), 2, "the dropped chunk's file is gone");
    assert_eq!(m.get(key(1, 2)).unwrap(), chunk(KIB, 2));
}

#[test]
fn pool_full_only_when_dropping_every_reclaimable_chunk_is_not_enough() {
    let (_d, m) = open(KIB, KIB, 10);
    put(&m, key(1, 0), &chunk(KIB / 2, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB / 2, 1), DEFAULT).unwrap();
    put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2]), [Some(Disk), Some(Disk), Some(Mem)]);
    m.mark_reclaimable(&[key(1, 0)]);
    let e = put(&m, key(1, 3), &chunk(KIB / 2 + 1, 3), DEFAULT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull, "{e}");
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB / 2, 0), "a failed put drops nothing");
    assert_eq!(counts(&m).2, 0);
    put(&m, key(1, 3), &chunk(KIB / 2, 3), DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2, 3]), [None, Some(Disk), Some(Mem), Some(Disk)], "in the dropped chunk's room");
}

#[test]
fn an_inode_mark_covers_the_chunks_stored_at_the_time_only() {
    let (_d, m) = open(4 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    assert_eq!(m.mark_reclaimable_inodes(&[InodeId(1), InodeId(3), InodeId(1)]), 1);
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    assert_eq!(m.mark_reclaimable(&[key(1, 7)]), 0, "an absent key is not remembered");
    put(&m, key(1, 7), &chunk(KIB, 7), DEFAULT).unwrap();
    let marked: Vec<bool> = [key(1, 0), key(1, 1), key(1, 7), key(2, 0)].map(|k| m.is_reclaimable(k)).to_vec();
    assert_eq!(marked, [true, false, false, false]);
}

#[test]
fn deletes_clear_marks() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 2), DEFAULT).unwrap();
    m.mark_reclaimable_inodes(&[InodeId(1), InodeId(2)]);
    assert!(m.delete(key(1, 0)).unwrap());
    assert_eq!(m.delete_inodes(&[InodeId(2)]).unwrap(), 1);
    assert_eq!(counts(&m), (1, KIB, 0, 2));
    put(&m, key(1, 0), &chunk(KIB, 9), DEFAULT).unwrap();
    assert!(!m.is_reclaimable(key(1, 0)), "a version stored again after its delete is live");
    m.check_invariants();
}

#[test]
fn a_promotion_drops_reclaimable_memory_instead_of_demoting() {
    let (_d, m) = open(KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    m.mark_reclaimable(&[key(1, 1)]);
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(where_(&m, &[0, 1]), [Some(Mem), None]);
    assert_eq!((counts(&m), m.stats().promotions), ((0, 0, 1, 1), 1));
}

#[test]
fn reclaimable_disk_chunks_are_never_promoted() {
    let (_d, m) = open(KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    m.mark_reclaimable(&[key(1, 0)]);
    for _ in 0..3 {
        assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    }
    assert_eq!(where_(&m, &[0, 1]), [Some(Disk), Some(Mem)]);
    assert_eq!(m.stats().promotions, 0);
}

#[test]
fn a_range_write_keeps_the_mark_when_the_chunk_changes_tier() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    m.create_zeroed(key(1, 0), KIB, DEFAULT).unwrap();
    m.create_zeroed(key(1, 1), KIB, DEFAULT).unwrap();
    m.mark_reclaimable(&[key(1, 0)]);
    assert_eq!(m.locate(key(1, 0)), Some(Disk));
    m.write_ranges(key(1, 0), &[(0, b"x")]).unwrap();
    assert_eq!(where_(&m, &[0, 1]), [Some(Mem), Some(Disk)]);
    assert!(m.is_reclaimable(key(1, 0)));
    assert_eq!(counts(&m), (1, KIB, 0, 2));
    m.check_invariants();
}

#[test]
fn a_zeroed_chunk_takes_the_room_of_reclaimable_ones() {
    let (_d, m) = open(KIB, KIB, 10);
    m.create_zeroed(key(1, 0), KIB, DEFAULT).unwrap();
    m.create_zeroed(key(1, 1), KIB, DEFAULT).unwrap();
    assert_eq!(m.create_zeroed(key(1, 2), KIB, DEFAULT).unwrap_err().kind, ErrorKind::PoolFull);
    m.mark_reclaimable(&[key(1, 0)]);
    m.create_zeroed(key(1, 2), KIB, DEFAULT).unwrap();
    assert_eq!(where_(&m, &[0, 1, 2]), [None, Some(Disk), Some(Mem)]);
    m.check_invariants();
}
