//! The figures a pool reports: per worker and for the whole pool.

use serde::{Deserialize, Serialize};
use tierpool_meta::WorkerRecord;
use tierpool_types::TierStats;

/// What a worker reports with each heartbeat: its tiers and its traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    pub tiers: TierStats,
    /// Chunk bytes stored since the worker started.
    pub bytes_written: u64,
    /// Chunk bytes served since the worker started.
    pub bytes_read: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub record: WorkerRecord,
    pub alive: bool,
    /// Partitions this worker owns.
    pub partitions: u32,
    /// Last reported statistics; `None` if it has not reported since the coordinator started.
    pub stats: Option<WorkerStats>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub partitions: u32,
    pub table_epoch: u64,
    pub inodes: u64,
    pub pending_gc: u64,
    pub workers: Vec<WorkerStatus>,
    /// Replaced chunk versions awaiting deletion.
    pub pending_chunks: u64,
    /// Orphaned chunks (and their bytes) deleted since the coordinator started.
    pub orphan_chunks: u64,
    pub orphan_bytes: u64,
    /// Client sessions holding inodes open or being written.
    pub held_sessions: u64,
}
