//! Golden files of the DISK tier, written by earlier versions of this crate,
//! must keep opening and reading back exactly (see `store::format`).

use crate::store::disk::DiskEntry;
use crate::store::{ChunkStore, DiskStore};
use crate::{TierKind, TierManager};
use tierpool_types::{ChunkKey, InodeId};

/// `tests/golden/chunk-v1.chunk`, see the README beside it.
const CHUNK_V1: &[u8] = include_bytes!("../../tests/golden/chunk-v1.chunk");

fn golden_key() -> ChunkKey {
    ChunkKey::hashed(InodeId(42), 3, 7)
}

/// The golden chunk's data: byte `i` is `i * 31 % 251`.
fn golden_data() -> Vec<u8> {
    (0..5000u32).map(|i| (i * 31 % 251) as u8).collect()
}

/// A fresh DISK directory holding only the golden file, where version 1 put it.
fn disk_dir_with_golden_v1() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("b6");
    std::fs::create_dir_all(&bucket).unwrap();
    std::fs::write(bucket.join("42-3-7-g1.chunk"), CHUNK_V1).unwrap();
    dir
}

#[test]
fn disk_store_indexes_and_reads_the_version_1_golden_chunk() {
    let dir = disk_dir_with_golden_v1();
    let s = DiskStore::open(dir.path(), u64::MAX).unwrap();
    assert_eq!(s.entry(golden_key()), Some(DiskEntry { len: 5000, checksum: 0x1e33_c15e, gen: 1, reads: 0 }));
    assert_eq!((s.used(), s.len()), (5000, 1));
    assert_eq!(s.get(golden_key()).unwrap(), golden_data());
}

#[test]
fn tier_manager_serves_the_version_1_golden_chunk() {
    let dir = disk_dir_with_golden_v1();
    let m = TierManager::open(super::config(dir.path(), 0, 1 << 20, 10)).unwrap();
    assert_eq!(m.locate(golden_key()), Some(TierKind::Disk));
    let s = m.stats();
    assert_eq!((s.disk_used, s.disk_chunks, s.mem_chunks), (5000, 1, 0));
    assert_eq!(m.get(golden_key()).unwrap(), golden_data());
    assert_eq!(m.read_range(golden_key(), 4990, 10).unwrap(), golden_data()[4990..]);
    // Files written from now on get generations above the golden file's.
    let other = ChunkKey::hashed(InodeId(42), 4, 7);
    m.put(other, bytes::Bytes::from_static(b"new"), crc32c::crc32c(b"new"), Default::default()).unwrap();
    let names: Vec<String> = super::files(dir.path(), ".chunk")
        .iter()
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
        .collect();
    assert!(names.contains(&"42-4-7-g2.chunk".to_owned()), "{names:?}");
    assert!(dir.path().join("b6/42-3-7-g1.chunk").exists(), "the golden chunk stays where it was");
}

/// `tests/golden/chunk-v2.chunk`: a chunk placed in partition 300.
const CHUNK_V2: &[u8] = include_bytes!("../../tests/golden/chunk-v2.chunk");

#[test]
fn disk_store_indexes_and_reads_the_version_2_golden_chunk_under_its_home() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a9")).unwrap();
    std::fs::write(dir.path().join("a9/42-5-9-g2.chunk"), CHUNK_V2).unwrap();
    let s = DiskStore::open(dir.path(), u64::MAX).unwrap();
    let key = ChunkKey { inode: InodeId(42), index: 5, version: 9, home: Some(300) };
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 253) as u8).collect();
    assert_eq!(s.get(key).unwrap(), data);
    assert_eq!(s.entry(ChunkKey::hashed(InodeId(42), 5, 9)), None, "the key names its home");
}
