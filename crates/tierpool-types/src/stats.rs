//! What a worker's tiers report: capacity, use and traffic. Plain data
//! shared by the tier manager that fills it and every surface that shows it.

use serde::{Deserialize, Serialize};

/// A snapshot of both tiers' capacity, use and traffic.
///
/// Reclaimable chunks (marked by the coordinator the moment they become garbage) are still stored:
/// they are counted in `mem_used`/`disk_used` and the chunk counts. What live
/// data takes is `mem_used + disk_used - reclaimable_bytes`; the rest comes
/// back as soon as a change needs room.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierStats {
    pub mem_capacity: u64,
    pub mem_used: u64,
    pub mem_chunks: u64,
    /// The DISK budget in force: the configured one, or while `disk_full`
    /// the bytes the tier held when its file system ran out of space.
    pub disk_capacity: u64,
    pub disk_used: u64,
    pub disk_chunks: u64,
    /// The DISK file system was found out of space (ENOSPC) and no chunk has
    /// been deleted from it since, nor has the retry interval passed: puts
    /// that need more DISK room fail with `PoolFull` without trying.
    pub disk_full: bool,
    /// Bytes of reclaimable chunks, in either tier (part of the `used` figures).
    pub reclaimable_bytes: u64,
    /// Reclaimable chunks, in either tier (part of the chunk counts).
    pub reclaimable_chunks: u64,
    /// Chunks moved MEM -> DISK since start.
    pub demotions: u64,
    /// Chunks moved DISK -> MEM since start.
    pub promotions: u64,
    /// Reclaimable chunks dropped to make room since start.
    pub reclaimed: u64,
}

/// A worker's chunk buffers kept for reuse (see `tierpool_net::ChunkBuffers`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferStats {
    /// Bytes of each buffer (the pool's chunk size).
    pub size: u64,
    /// Spare buffers kept at most.
    pub keep: u64,
    /// Buffers spare and in use together beyond which none is kept
    /// (`None`: no such bound; with `--prefault`, MEM's room for them).
    pub limit: Option<u64>,
    /// Spare buffers ready now.
    pub spare: u64,
    /// Buffers in use now (chunks held in MEM, or being written).
    pub lent: u64,
    /// Chunks read into a spare buffer since start.
    pub reused: u64,
    /// Chunks that found no spare buffer and took fresh memory.
    pub fresh: u64,
    /// Bytes of buffers shorter than a chunk (small chunks, requests
    /// carrying many) kept spare at most.
    pub small_room: u64,
    /// Bytes of such buffers spare now.
    pub small_spare: u64,
    /// Bytes of such buffers in use now (their capacities).
    pub small_lent: u64,
    /// Bodies shorter than a chunk read into a spare buffer since start.
    pub small_reused: u64,
    /// Bodies shorter than a chunk that took fresh memory.
    pub small_fresh: u64,
}
