//! A disk out of space (ENOSPC, injected at the I/O seam) is "pool full":
//! nothing stored is lost, reads go on, and the DISK tier is capped at what it
//! holds until chunks are deleted or the retry interval passes.

use super::{chunk, files, key, open, put, KIB};
use crate::store::disk_io::{fail_nth, fail_nth_with, Fault};
use crate::TierKind::{Disk, Mem};
use crate::TierManager;
use std::path::Path;
use std::time::Duration;
use tierpool_types::{ChunkAttrs, ErrorKind};

const DEFAULT: ChunkAttrs = ChunkAttrs { priority: tierpool_types::Priority::MIN, pinned: false };

fn out_of_space(dir: &Path, held: &str, budget: &str) -> String {
    format!(
        "pool full: the disk under {} is out of space (No space left on device); {held} of chunks stored, budget {budget}",
        dir.display()
    )
}

/// Puts that need DISK fail with `PoolFull` without a disk operation: an
/// armed I/O fault would otherwise turn them into `Io` errors.
fn assert_fails_fast(m: &TierManager, index: u64) {
    fail_nth(1);
    let e = put(m, key(9, index), &chunk(KIB, 9), DEFAULT).unwrap_err();
    fail_nth(0);
    assert_eq!(e.kind, ErrorKind::PoolFull, "{e}");
    assert!(e.message.contains("is out of space) cannot hold chunk 9:"), "{e}");
}

#[test]
fn enospc_while_demoting_is_pool_full_and_loses_nothing() {
    let (dir, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    fail_nth_with(1, Fault::NoSpace);
    let e = put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap_err();
    assert_eq!((e.kind, e.message), (ErrorKind::PoolFull, out_of_space(dir.path(), "1KiB", "100KiB")));
    assert_eq!([0, 1, 2].map(|i| m.locate(key(1, i))), [Some(Disk), Some(Mem), None]);
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!(m.get(key(1, 1)).unwrap(), chunk(KIB, 1));
    let s = m.stats();
    assert_eq!((s.disk_full, s.disk_capacity, s.disk_used, s.mem_used), (true, KIB, KIB, KIB));
    assert_eq!(files(dir.path(), ".chunk").len(), 1, "no file of the failed demotion is left");
    assert!(files(dir.path(), ".tmp").is_empty());
    m.check_invariants();
}

#[test]
fn a_full_disk_fails_later_puts_fast_until_a_delete_frees_space() {
    let (dir, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    fail_nth_with(1, Fault::NoSpace);
    put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap_err();
    assert_fails_fast(&m, 0);
    let e = put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap_err();
    let want = format!(
        "pool full: worker memory (1KiB of 1KiB used) and disk (1KiB of 100KiB used; the disk under {} is out of space) cannot hold chunk 1:2@0 of 1024 bytes",
        dir.path().display()
    );
    assert_eq!(e.message, want);
    assert!(!m.delete(key(9, 9)).unwrap());
    assert!(m.stats().disk_full, "deleting nothing frees nothing");
    assert!(m.delete(key(1, 0)).unwrap());
    let s = m.stats();
    assert_eq!((s.disk_full, s.disk_capacity), (false, 100 * KIB));
    put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap();
    assert_eq!([1, 2].map(|i| m.locate(key(1, i))), [Some(Disk), Some(Mem)]);
}

#[test]
fn a_full_disk_still_takes_what_fits_in_room_of_reclaimable_chunks() {
    let (_d, m) = open(KIB, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    fail_nth_with(1, Fault::NoSpace);
    put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap_err();
    m.mark_reclaimable(&[key(1, 0)]);
    put(&m, key(1, 2), &chunk(KIB, 2), DEFAULT).unwrap();
    assert_eq!([0, 1, 2].map(|i| m.locate(key(1, i))), [None, Some(Disk), Some(Mem)]);
    let s = m.stats();
    assert_eq!((s.disk_full, s.disk_capacity, s.disk_used, s.reclaimed), (true, KIB, KIB, 1), "still capped");
}

#[test]
fn enospc_on_a_direct_disk_put_then_the_cap_expires() {
    let (dir, m) = open(0, 100 * KIB, 10);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    fail_nth_with(1, Fault::NoSpace);
    let e = put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap_err();
    assert_eq!((e.kind, e.message), (ErrorKind::PoolFull, out_of_space(dir.path(), "1KiB", "100KiB")));
    assert_eq!(m.locate(key(1, 1)), None);
    assert_fails_fast(&m, 0);
    m.set_disk_full_retry(Duration::ZERO);
    assert!(!m.stats().disk_full, "the retry interval passed");
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    assert_eq!(m.get(key(1, 1)).unwrap(), chunk(KIB, 1));
    assert_eq!(m.stats().disk_capacity, 100 * KIB);
}

#[test]
fn enospc_while_promoting_keeps_the_chunk_on_disk_and_caps_the_tier() {
    let (_d, m) = open(KIB, 100 * KIB, 1);
    put(&m, key(1, 0), &chunk(KIB, 0), DEFAULT).unwrap();
    put(&m, key(1, 1), &chunk(KIB, 1), DEFAULT).unwrap();
    fail_nth_with(2, Fault::NoSpace); // the read succeeds, demoting 1:1 to make room fails
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0));
    assert_eq!([0, 1].map(|i| m.locate(key(1, i))), [Some(Disk), Some(Mem)]);
    let s = m.stats();
    assert_eq!((s.disk_full, s.disk_capacity, s.promotions), (true, KIB, 0));
    assert_eq!(m.get(key(1, 0)).unwrap(), chunk(KIB, 0), "reads go on; no promotion while full");
    assert_eq!(m.stats().promotions, 0);
    m.check_invariants();
}

#[test]
fn the_disk_store_reports_enospc_as_pool_full() {
    use crate::store::{ChunkStore, DiskStore};
    let dir = tempfile::tempdir().unwrap();
    let mut s = DiskStore::open(dir.path(), u64::MAX).unwrap();
    fail_nth_with(2, Fault::NoSpace); // the rename into place
    let e = s.put(key(1, 0), chunk(10, 0), crc32c::crc32c(&chunk(10, 0))).unwrap_err();
    let want = format!("the disk under {} is out of space (No space left on device)", dir.path().display());
    assert_eq!((e.kind, e.message), (ErrorKind::PoolFull, want));
    assert_eq!((s.used(), s.len()), (0, 0));
    assert!(files(dir.path(), "").iter().all(|p| p.is_dir()), "no file left behind");
}
