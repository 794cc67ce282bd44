//! The calls that must not block (`try_put_in_mem`, `try_get_in_mem`):
//! they serve what MEM alone can, and decline the rest changing nothing.

use super::{attrs, chunk, key, open, put, KIB};
use crate::TierKind;
use tierpool_types::{ChunkAttrs, ErrorKind};

const DEFAULT: ChunkAttrs = ChunkAttrs { priority: tierpool_types::Priority::MIN, pinned: false };

#[test]
fn a_chunk_that_fits_in_mem_is_stored_and_read_without_blocking() {
    let (_d, m) = open(4 * KIB, 100 * KIB, 10);
    let data = chunk(KIB, 1);
    m.try_put_in_mem(key(1, 0), &data, crc32c::crc32c(&data), DEFAULT).expect("MEM has room").unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem));
    assert_eq!(m.try_get_in_mem(key(1, 0)), Some(data));
    assert_eq!(m.try_get_in_mem(key(1, 1)), None, "an absent chunk is left to the blocking call");
}

#[test]
fn a_chunk_in_mem_comes_with_its_checksum_as_stored_until_changed_in_place() {
    let (_d, m) = open(4 * KIB, 100 * KIB, 10);
    let data = chunk(KIB, 1);
    // The checksum given at the put is served, not one of the bytes now.
    m.try_put_in_mem(key(1, 0), &data, crc32c::crc32c(&data), DEFAULT).expect("MEM has room").unwrap();
    assert_eq!(m.try_get_in_mem_summed(key(1, 0)), Some((data.clone(), Some(crc32c::crc32c(&data)))));
    m.write_ranges(key(1, 0), &[(3, b"new")]).unwrap();
    let mut now = data.to_vec();
    now[3..6].copy_from_slice(b"new");
    assert_eq!(m.try_get_in_mem_summed(key(1, 0)), Some((now.into(), None)), "unknown once changed in place");
    assert_eq!(m.try_get_in_mem_summed(key(1, 1)), None);
}

#[test]
fn a_put_that_would_demote_is_declined_and_changes_nothing() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    for i in 0..2 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    let before = m.stats();
    let data = chunk(KIB, 9);
    assert!(m.try_put_in_mem(key(2, 0), &data, crc32c::crc32c(&data), DEFAULT).is_none());
    assert_eq!(m.stats(), before);
    assert_eq!(m.locate(key(2, 0)), None);
    put(&m, key(2, 0), &data, DEFAULT).unwrap();
    assert_eq!(m.stats().demotions, 1, "the blocking put makes the room");
}

#[test]
fn room_held_by_reclaimable_chunks_is_taken_without_blocking() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    for i in 0..2 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    m.mark_reclaimable(&[key(1, 0)]);
    let data = chunk(KIB, 9);
    m.try_put_in_mem(key(2, 0), &data, crc32c::crc32c(&data), DEFAULT).expect("no DISK needed").unwrap();
    m.check_invariants();
    let s = m.stats();
    assert_eq!((s.reclaimed, s.demotions, s.disk_chunks), (1, 0, 0));
    assert_eq!(m.locate(key(1, 0)), None, "the reclaimable chunk was dropped");
}

#[test]
fn a_stored_key_is_answered_as_the_blocking_put_answers_it() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(3, false)).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), attrs(3, false)).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    let (same, other) = (chunk(KIB, 0), chunk(KIB, 7));
    let before = m.stats();
    m.try_put_in_mem(key(1, 0), &same, crc32c::crc32c(&same), DEFAULT).expect("nothing to write").unwrap();
    let e = m.try_put_in_mem(key(1, 0), &other, crc32c::crc32c(&other), DEFAULT).expect("nothing to write");
    assert_eq!(e.unwrap_err().kind, ErrorKind::AlreadyExists);
    assert_eq!(m.stats(), before);
    assert_eq!(m.try_get_in_mem(key(1, 0)), None, "a DISK chunk is read by the blocking call");
    assert_eq!(m.get(key(1, 0)).unwrap(), same);
}

#[test]
fn bytes_that_do_not_match_their_checksum_are_refused() {
    let (_d, m) = open(4 * KIB, 100 * KIB, 10);
    let data = chunk(KIB, 1);
    let e = m.try_put_in_mem(key(1, 0), &data, crc32c::crc32c(&data) ^ 1, DEFAULT).expect("checked first");
    assert_eq!(e.unwrap_err().kind, ErrorKind::Corrupt);
    assert_eq!(m.locate(key(1, 0)), None);
}
