//! The tier manager's behaviours, one named example each.

use super::{attrs, chunk, config, files, key, open, put, KIB};
use crate::{TierKind, TierManager};
use bytes::Bytes;
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId};

const DEFAULT: ChunkAttrs = ChunkAttrs { priority: tierpool_types::Priority::MIN, pinned: false };

fn where_(m: &TierManager, idx: &[u64]) -> Vec<Option<TierKind>> {
    idx.iter().map(|i| m.locate(key(1, *i))).collect()
}

#[test]
fn demotes_lru_first() {
    let (_d, m) = open(3 * KIB, 100 * KIB, 10);
    for i in 0..3 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    m.get(key(1, 0)).unwrap();
    put(&m, key(1, 3), &chunk(KIB, 3), DEFAULT).unwrap();
    use TierKind::*;
    assert_eq!(where_(&m, &[0, 1, 2, 3]), [Some(Mem), Some(Disk), Some(Mem), Some(Mem)]);
    assert_eq!(m.get(key(1, 1)).unwrap(), chunk(KIB, 1));
    let s = m.stats();
    assert_eq!((s.demotions, s.mem_used, s.disk_used, s.mem_chunks, s.disk_chunks), (1, 3 * KIB, KIB, 3, 1));
}

#[test]
fn evicts_lower_priority_before_lru() {
    let (_d, m) = open(3 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(4, false)).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), attrs(2, false)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), attrs(3, false)).unwrap();
    put(&m, key(4, 0), &chunk(KIB, 3), attrs(3, false)).unwrap();
    assert_eq!(m.locate(key(2, 0)), Some(TierKind::Disk), "lowest priority goes first");
    put(&m, key(5, 0), &chunk(KIB, 4), attrs(3, false)).unwrap();
    assert_eq!(m.locate(key(3, 0)), Some(TierKind::Disk), "then the LRU of the next priority");
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem), "the oldest chunk has the highest priority");
}

#[test]
fn pinned_demoted_last() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(1, true)).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), attrs(5, false)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), attrs(5, false)).unwrap();
    assert_eq!(m.locate(key(2, 0)), Some(TierKind::Disk));
    put(&m, key(4, 0), &chunk(KIB, 3), attrs(5, true)).unwrap();
    assert_eq!(m.locate(key(3, 0)), Some(TierKind::Disk), "unpinned goes before any pinned");
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem));
    put(&m, key(5, 0), &chunk(KIB, 4), attrs(5, true)).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk), "only pinned left: lowest priority first");
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
}

#[test]
fn set_attrs_reorders_present_chunks() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), DEFAULT).unwrap();
    m.set_attrs(InodeId(1), attrs(1, true));
    put(&m, key(3, 0), &chunk(KIB, 2), DEFAULT).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem));
    assert_eq!(m.locate(key(2, 0)), Some(TierKind::Disk));
}

#[test]
fn promotes_after_repeated_reads() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 3);
    for i in 0..3 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    for _ in 0..2 {
        assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
        assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    }
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    use TierKind::*;
    assert_eq!(where_(&m, &[0, 1, 2]), [Some(Mem), Some(Disk), Some(Mem)]);
    let s = m.stats();
    assert_eq!((s.promotions, s.demotions), (1, 2));
    m.check_invariants();
}

#[test]
fn promotion_never_demotes_higher_ranked_chunks() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(2, false)).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), attrs(3, false)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), attrs(3, false)).unwrap();
    put(&m, key(4, 0), &chunk(KIB, 3), attrs(5, true)).unwrap();
    // MEM: inode 3 (priority 3) and inode 4 (pinned); DISK: inodes 1 and 2.
    for _ in 0..3 {
        assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    }
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk), "priority 2 must not push out priority 3");
    m.get(key(2, 0)).unwrap();
    assert_eq!(m.locate(key(2, 0)), Some(TierKind::Mem), "same priority, more recent: promoted");
    assert_eq!(m.locate(key(3, 0)), Some(TierKind::Disk));
    assert_eq!(m.locate(key(4, 0)), Some(TierKind::Mem));
}

#[test]
fn reopens_disk_chunks_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 2 * KIB, 100 * KIB, 10);
    let m = TierManager::open(cfg.clone()).unwrap();
    for i in 0..6 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    drop(m); // as if killed: nothing is flushed on drop
    let bucket = dir.path().join("00");
    std::fs::write(bucket.join("9-9-9-g99.chunk.tmp"), b"partial").unwrap();
    std::fs::write(bucket.join("8-8-8-g98.chunk"), b"TPCK\x01 garbled").unwrap();
    let m = TierManager::open(cfg).unwrap();
    let s = m.stats();
    assert_eq!((s.mem_chunks, s.disk_chunks, s.disk_used), (0, 4, 4 * KIB));
    for i in 0..4 {
        assert_eq!(m.get(key(1, i)).unwrap(), chunk(KIB, i as u8));
    }
    assert_eq!(m.get(key(1, 5)).unwrap_err().kind, ErrorKind::NotFound, "MEM chunks die with the process");
    assert!(files(dir.path(), ".tmp").is_empty(), "partial files are removed");
    assert!(bucket.join("8-8-8-g98.chunk").exists(), "a garbled file is skipped and left alone");
    m.check_invariants();
}

#[test]
fn detects_corrupted_disk_chunk() {
    for offset in [0, 20, 56, 56 + 700] {
        let (dir, m) = open(0, 100 * KIB, 10);
        put(&m, key(7, 3), &chunk(KIB, 9), DEFAULT).unwrap();
        let Ok([path]) = <[_; 1]>::try_from(files(dir.path(), ".chunk")) else { panic!("one chunk file expected") };
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[offset] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
        let e = m.get(key(7, 3)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Corrupt, "byte {offset}: {e}");
        assert!(e.message.contains("7:3@0"), "{}", e.message);
    }
}

#[test]
fn detects_truncated_disk_chunk() {
    let (dir, m) = open(0, 100 * KIB, 10);
    put(&m, key(7, 3), &chunk(KIB, 9), DEFAULT).unwrap();
    let Ok([path]) = <[_; 1]>::try_from(files(dir.path(), ".chunk")) else { panic!("one chunk file expected") };
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
    assert_eq!(m.get(key(7, 3)).unwrap_err().kind, ErrorKind::Corrupt);
}

#[test]
fn pool_full_keeps_existing_data() {
    let (_d, m) = open(2 * KIB, 4 * KIB, 10);
    for i in 0..6 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    let e = put(&m, key(1, 6), &chunk(KIB, 6), DEFAULT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull);
    assert!(e.message.starts_with("pool full: worker memory (2KiB of 2KiB used) and disk (4KiB of 4KiB used)"), "{e}");
    assert!(e.message.contains("chunk 1:6@0 of 1024 bytes"), "{e}");
    let e = put(&m, key(1, 7), &chunk(2 * KIB, 7), DEFAULT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull, "a bigger chunk does not fit either");
    for i in 0..6 {
        assert_eq!(m.get(key(1, i)).unwrap(), chunk(KIB, i as u8));
    }
    let s = m.stats();
    assert_eq!((s.mem_used, s.disk_used, s.mem_chunks + s.disk_chunks), (2 * KIB, 4 * KIB, 6));
}

#[test]
fn chunk_larger_than_memory_goes_straight_to_disk() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(3 * KIB, 1), DEFAULT).unwrap();
    assert_eq!(m.locate(key(1, 1)), Some(TierKind::Disk));
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem), "nothing demoted for a chunk that cannot fit");
    assert_eq!(m.get(key(1, 1)).unwrap(), chunk(3 * KIB, 1));
    assert_eq!(m.locate(key(1, 1)), Some(TierKind::Disk), "never promoted beyond the budget");
}

#[test]
fn chunk_versions_are_write_once() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(7, 3), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(7, 4), &chunk(KIB, 1), DEFAULT).unwrap();
    assert_eq!(m.locate(key(7, 3)), Some(TierKind::Disk));
    let before = m.stats();
    for (k, tier) in [(key(7, 3), "disk"), (key(7, 4), "memory")] {
        put(&m, k, &chunk(KIB, k.index as u8 - 3), DEFAULT).unwrap();
        assert_eq!(m.stats(), before, "putting the same bytes again into {tier} changes nothing");
        let e = put(&m, k, &chunk(KIB / 2, 9), DEFAULT).unwrap_err();
        let (was, now) = (crc32c::crc32c(&chunk(KIB, k.index as u8 - 3)), crc32c::crc32c(&chunk(KIB / 2, 9)));
        let want = format!(
            "chunk {k} is already stored with other bytes (1024 bytes, crc {was:08x}; this put has 512 bytes, crc {now:08x}); chunk versions are write-once"
        );
        assert_eq!((e.kind, e.message), (ErrorKind::AlreadyExists, want), "{tier}");
        let e = put(&m, k, &chunk(KIB, 9), DEFAULT).unwrap_err();
        assert_eq!(e.kind, ErrorKind::AlreadyExists, "same length, other bytes, in {tier}");
        assert_eq!(m.get(k).unwrap(), chunk(KIB, k.index as u8 - 3));
    }
    assert_eq!(m.stats(), before);
    assert_eq!(m.locate(key(7, 3)), Some(TierKind::Disk), "no rewrite, no promotion by a put");
}

#[test]
fn a_region_chunk_written_in_place_is_compared_by_its_new_bytes() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    m.create_zeroed(key(1, 0), KIB, DEFAULT).unwrap();
    m.write_ranges(key(1, 0), &[(3, b"abc")]).unwrap();
    let mut now = vec![0u8; KIB as usize];
    now[3..6].copy_from_slice(b"abc");
    assert_eq!(
        put(&m, key(1, 0), &vec![0u8; KIB as usize].into(), DEFAULT).unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    put(&m, key(1, 0), &now.into(), DEFAULT).unwrap();
}

#[test]
fn put_refuses_bytes_that_do_not_match_their_checksum() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    let data = chunk(KIB, 0);
    let right = crc32c::crc32c(&data);
    let e = m.put(key(7, 3), data.clone(), right ^ 1, DEFAULT).unwrap_err();
    let want =
        format!("chunk 7:3@0: checksum mismatch: its 1024 bytes have crc {right:08x}, the put says {:08x}", right ^ 1);
    assert_eq!((e.kind, e.message), (ErrorKind::Corrupt, want));
    assert_eq!(m.locate(key(7, 3)), None, "nothing is stored under a wrong checksum");
    m.put(key(7, 3), data, right, DEFAULT).unwrap();
}

#[test]
fn a_range_write_into_a_disk_chunk_frees_its_old_file() {
    let (dir, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    m.write_ranges(key(1, 0), &[(0, b"x")]).unwrap();
    let mut want = chunk(KIB, 0).to_vec();
    want[0] = b'x';
    assert_eq!(m.get(key(1, 0)).unwrap(), want);
    use TierKind::*;
    assert_eq!(where_(&m, &[0, 1]), [Some(Mem), Some(Disk)]);
    let s = m.stats();
    assert_eq!((s.mem_used, s.disk_used, s.mem_chunks, s.disk_chunks), (KIB, KIB, 1, 1));
    assert_eq!(files(dir.path(), ".chunk").len(), 1, "the old file is gone");
}

#[test]
fn deletes_whole_inodes_from_both_tiers() {
    let (dir, m) = open(2 * KIB, 100 * KIB, 10);
    for inode in 1..=3 {
        for i in 0..3 {
            put(&m, key(inode, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
        }
    }
    assert_eq!(m.delete_inodes(&[InodeId(1), InodeId(3)]).unwrap(), 6);
    assert_eq!(m.get(key(3, 2)).unwrap_err().kind, ErrorKind::NotFound);
    assert!(m.delete(key(2, 1)).unwrap());
    assert!(!m.delete(key(2, 1)).unwrap());
    let s = m.stats();
    assert_eq!(s.mem_chunks + s.disk_chunks, 2);
    assert_eq!(files(dir.path(), ".chunk").len() as u64, s.disk_chunks);
}

#[test]
fn missing_chunk_error_names_the_key() {
    let (_d, m) = open(KIB, KIB, 1);
    let e = m.get(key(42, 7)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("42:7@0"), "{e}");
}

/// A value of `k` that says which key and which write it is.
fn tagged(k: ChunkKey, write: u8) -> Bytes {
    let mut v = vec![write; (KIB + u64::from(write % 4) * 700) as usize];
    v[0] = k.inode.0 as u8;
    v[1] = k.index as u8;
    v.into()
}

#[test]
fn concurrent_readers_never_see_wrong_bytes() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TierManager>();
    let (_d, m) = open(8 * KIB, 64 * KIB, 2);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let m = &m;
            s.spawn(move || {
                for round in 0..400u64 {
                    let k = key(round % 3, round % 5);
                    match (round + u64::from(t)) % 5 {
                        0 => match put(m, k, &tagged(k, (round as u8) ^ t), DEFAULT) {
                            Err(e) if e.kind == ErrorKind::AlreadyExists => {}
                            r => r.unwrap(),
                        },
                        1 => drop(m.delete(k).unwrap()),
                        _ => match m.get(k) {
                            Ok(data) => assert_eq!(data, tagged(k, data[2]), "{k}"),
                            Err(e) => assert_eq!(e.kind, ErrorKind::NotFound, "{e}"),
                        },
                    }
                }
            });
        }
    });
    m.check_invariants();
}

#[test]
fn writes_ranges_in_place_and_demotes_with_a_fresh_checksum() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    m.write_ranges(key(1, 0), &[(10, b"abc"), (1000, b"xyz!")]).unwrap();
    let mut want = chunk(KIB, 0).to_vec();
    want[10..13].copy_from_slice(b"abc");
    want[1000..1004].copy_from_slice(b"xyz!");
    assert_eq!(m.get(key(1, 0)).unwrap(), want);
    assert_eq!(m.read_range(key(1, 0), 9, 5).unwrap(), want[9..14]);
    // Two more chunks push it to DISK, where its bytes are verified on read.
    put(&m, key(2, 0), &chunk(KIB, 1), DEFAULT).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), DEFAULT).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    assert_eq!(m.get(key(1, 0)).unwrap(), want);
    // A write into a DISK chunk brings it back to MEM.
    m.write_ranges(key(1, 0), &[(0, b"Z")]).unwrap();
    want[0] = b'Z';
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Mem));
    assert_eq!(m.get(key(1, 0)).unwrap(), want);
}

#[test]
fn range_errors_name_the_chunk() {
    let (_d, m) = open(4 * KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    let e = m.write_ranges(key(1, 0), &[(0, b"ok"), (1023, b"no")]).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::InvalidArgument, "chunk 1:0@0: bytes 1023..1025 are past its end (1024 bytes)")
    );
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0), "all or nothing");
    assert_eq!(m.read_range(key(1, 0), 1000, 25).unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(m.write_ranges(key(9, 0), &[(0, b"x")]).unwrap_err().kind, ErrorKind::NotFound);
}

#[test]
fn zeroed_chunks_reserve_space_once() {
    let (_d, m) = open(2 * KIB, 2 * KIB, 10);
    m.create_zeroed(key(1, 0), KIB, DEFAULT).unwrap();
    assert_eq!(m.get(key(1, 0)).unwrap(), vec![0u8; KIB as usize]);
    m.write_ranges(key(1, 0), &[(5, b"kept")]).unwrap();
    m.create_zeroed(key(1, 0), KIB, DEFAULT).unwrap();
    assert_eq!(&m.read_range(key(1, 0), 5, 4).unwrap()[..], b"kept", "an existing chunk is left alone");
    for i in 1..4 {
        m.create_zeroed(key(1, i), KIB, DEFAULT).unwrap();
    }
    let e = m.create_zeroed(key(1, 4), KIB, DEFAULT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull);
}

#[test]
fn the_inventory_pages_through_both_tiers_in_key_order() {
    let (_d, m) = open(2 * KIB, 100 * KIB, 10);
    for i in 0..6 {
        put(&m, key(1, i), &chunk(KIB, i as u8), DEFAULT).unwrap();
    }
    assert_eq!(m.stats().mem_chunks, 2, "four chunks were demoted to disk");
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = m.inventory(after, 4);
        let Some((last, _)) = page.last().copied() else { break };
        seen.extend(page);
        after = Some(last);
    }
    let want: Vec<_> = (0..6).map(|i| (key(1, i), KIB)).collect();
    assert_eq!(seen, want);
}

#[test]
fn a_stop_writes_memory_to_disk_most_valuable_first_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = super::config(dir.path(), 4 * KIB, 3 * KIB, 10);
    let m = TierManager::open(cfg.clone()).unwrap();
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(1, false)).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), attrs(5, false)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), attrs(3, true)).unwrap();
    put(&m, key(4, 0), &chunk(KIB, 3), attrs(3, false)).unwrap();
    m.mark_reclaimable(&[key(4, 0)]);
    let steps = std::cell::Cell::new(0);
    let done = m.close_and_spill(&|_| steps.set(steps.get() + 1)).unwrap();
    m.check_invariants();
    // DISK has room for the three live chunks; the reclaimable one is dropped.
    assert_eq!((done.chunks, done.bytes, done.left_chunks, done.stuck), (3, 3 * KIB, 0, false));
    assert!(steps.get() >= 1);
    assert_eq!(m.locate(key(4, 0)), None, "garbage is not written");
    let e = put(&m, key(5, 0), &chunk(KIB, 4), DEFAULT).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert!(e.message.contains("worker is stopping"), "{e}");
    assert_eq!(m.write_ranges(key(1, 0), &[(0, b"x")]).unwrap_err().kind, ErrorKind::Unavailable);
    assert_eq!(m.get(key(2, 0)).unwrap(), chunk(KIB, 1), "reads go on");
    drop(m);
    let m = TierManager::open(cfg).unwrap();
    for (i, seed) in [(1, 0), (2, 1), (3, 2)] {
        assert_eq!(m.get(key(i, 0)).unwrap(), chunk(KIB, seed));
        assert_eq!(m.locate(key(i, 0)), Some(TierKind::Disk));
    }
}

#[test]
fn a_stop_with_a_small_disk_keeps_the_most_valuable_chunks() {
    let (_d, m) = open(4 * KIB, 2 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), attrs(1, false)).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), attrs(5, false)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), attrs(3, true)).unwrap();
    let done = m.close_and_spill(&|_| {}).unwrap();
    m.check_invariants();
    assert_eq!((done.chunks, done.left_chunks, done.left_bytes, done.stuck), (2, 1, KIB, true));
    use TierKind::*;
    assert_eq!(
        [m.locate(key(1, 0)), m.locate(key(2, 0)), m.locate(key(3, 0))],
        [Some(Mem), Some(Disk), Some(Disk)],
        "pinned first, then the higher priority"
    );
}

#[test]
fn keep_on_disk_moves_a_chunk_out_of_memory_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = super::config(dir.path(), 4 * KIB, 2 * KIB, 10);
    let m = TierManager::open(cfg.clone()).unwrap();
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(2, 0), &chunk(KIB, 1), DEFAULT).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 2), DEFAULT).unwrap();
    m.mark_reclaimable(&[key(2, 0)]);
    m.keep_on_disk(key(1, 0)).unwrap();
    m.keep_on_disk(key(1, 0)).unwrap();
    m.keep_on_disk(key(2, 0)).unwrap();
    m.check_invariants();
    assert!(m.is_reclaimable(key(2, 0)), "a mark moves with its chunk");
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    // DISK is full of one live and one reclaimable chunk: the latter makes room.
    m.keep_on_disk(key(3, 0)).unwrap();
    m.check_invariants();
    assert_eq!(m.locate(key(2, 0)), None);
    put(&m, key(4, 0), &chunk(KIB, 3), DEFAULT).unwrap();
    let e = m.keep_on_disk(key(4, 0)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull, "{e}");
    assert_eq!(m.locate(key(4, 0)), Some(TierKind::Mem), "nothing changed");
    assert_eq!(m.keep_on_disk(key(9, 0)).unwrap_err().kind, ErrorKind::NotFound);
    drop(m);
    let m = TierManager::open(cfg).unwrap();
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(m.get(key(3, 0)).unwrap(), chunk(KIB, 2));
    assert_eq!(m.locate(key(4, 0)), None);
}

#[test]
fn clients_reads_and_writes_are_uses_copies_and_moves_are_not() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    let ids = [InodeId(1), InodeId(2), InodeId(3), InodeId(4)];
    assert_eq!(m.last_use(&ids), vec![None; 4], "nothing used yet");
    put(&m, key(1, 0), &chunk(KIB, 1), DEFAULT).unwrap();
    // Demoted to DISK by the next put, copied for another worker: not uses.
    let data = chunk(KIB, 2);
    m.replace(key(2, 0), data.clone(), crc32c::crc32c(&data)).unwrap();
    put(&m, key(3, 0), &chunk(KIB, 3), DEFAULT).unwrap();
    assert_eq!(m.locate(key(1, 0)), Some(TierKind::Disk));
    m.get_for_copy(key(1, 0)).unwrap();
    let before = m.last_use(&ids);
    assert!(before[0].is_some() && before[1].is_none() && before[2].is_some() && before[3].is_none(), "{before:?}");
    assert!(before[0] >= before[2], "inode 1 was written before inode 3: {before:?}");
    // A read from DISK, a range read and a range write are uses.
    std::thread::sleep(std::time::Duration::from_millis(5));
    m.get(key(1, 0)).unwrap();
    m.read_range(key(2, 0), 0, 10).unwrap();
    let after = m.last_use(&ids);
    assert!(after[0] < after[2] && after[1] < after[2], "read after inode 3 was written: {after:?}");
    std::thread::sleep(std::time::Duration::from_millis(5));
    m.write_ranges(key(3, 0), &[(0, b"xy")]).unwrap();
    let last = m.last_use(&ids);
    assert!(last[2] < last[0] && last[2] < last[1], "written after the reads: {last:?}");
    m.delete_inodes(&[InodeId(1)]).unwrap();
    assert_eq!(m.last_use(&ids)[0], None, "forgotten with its chunks");
}
