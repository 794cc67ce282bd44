//! Behaviour tests of the tier manager: named examples, fault injection at
//! the disk I/O seam, golden files of earlier versions, and a property test
//! against a `BTreeMap` model.

mod behaviour;
mod disk_full;
mod faults;
mod golden;
mod model;
mod no_wait;
mod reclaim;

use crate::{TierConfig, TierManager};
use bytes::Bytes;
use std::path::{Path, PathBuf};
use tierpool_types::{ByteSize, ChunkAttrs, ChunkKey, InodeId, Priority, Result};

pub const KIB: u64 = 1024;

pub fn key(inode: u64, index: u64) -> ChunkKey {
    ChunkKey::hashed(InodeId(inode), index, 0)
}

pub fn attrs(priority: u8, pinned: bool) -> ChunkAttrs {
    ChunkAttrs { priority: Priority::new(priority).unwrap(), pinned }
}

/// `len` bytes that differ with `seed`.
pub fn chunk(len: u64, seed: u8) -> Bytes {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<u8>>().into()
}

pub fn config(dir: &Path, mem: u64, disk: u64, promote_after_reads: u32) -> TierConfig {
    TierConfig {
        mem_budget: ByteSize(mem),
        disk_dir: dir.to_path_buf(),
        disk_budget: ByteSize(disk),
        promote_after_reads,
        disk_reads: 4,
    }
}

/// A manager in a fresh directory.
pub fn open(mem: u64, disk: u64, promote_after_reads: u32) -> (tempfile::TempDir, TierManager) {
    let dir = tempfile::tempdir().unwrap();
    let m = TierManager::open(config(dir.path(), mem, disk, promote_after_reads)).unwrap();
    (dir, m)
}

pub fn put(m: &TierManager, k: ChunkKey, data: &Bytes, a: ChunkAttrs) -> Result<()> {
    let r = m.put(k, data.clone(), crc32c::crc32c(data), a);
    m.check_invariants();
    r
}

/// Every file under `dir` whose name ends with `suffix`.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p, suffix));
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
    out
}
