//! The figures a pool reports: per worker and for the whole pool.

use serde::{Deserialize, Serialize};
use tierpool_meta::WorkerRecord;
use tierpool_types::{BufferStats, TierStats};

/// What a worker reports with each heartbeat: its tiers and its traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    pub tiers: TierStats,
    /// Chunk bytes stored since the worker started.
    pub bytes_written: u64,
    /// Chunk bytes served since the worker started.
    pub bytes_read: u64,
    /// Chunk bytes copied here from other workers by moves of partitions,
    /// since the worker started.
    pub bytes_moved_in: u64,
    /// Payload bytes of large frames this worker read and wrote, and the
    /// nanoseconds that took, since it started (`None`: not measured).
    pub transfer: Option<(u64, u64)>,
    /// The chunk buffers it keeps for reuse.
    pub buffers: BufferStats,
    /// Connections it accepted since it started.
    pub connections: Connections,
}

/// Connections a server accepted: all of them, and those through its local
/// socket (from peers on its machine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connections {
    pub accepted: u64,
    pub local: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub record: WorkerRecord,
    pub alive: bool,
    /// Partitions this worker owns.
    pub partitions: u32,
    /// Being emptied: it takes no partitions and gives its own away.
    pub draining: bool,
    /// Last reported statistics; `None` if it has not reported since the coordinator started.
    pub stats: Option<WorkerStats>,
    /// Percent of the fastest worker's bandwidth it delivers, as its
    /// weight counts it (100: healthy).
    pub speed: u8,
    /// Bytes a second its links achieved over the last window (`None`:
    /// too little traffic to say).
    pub bandwidth: Option<u64>,
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
    pub migration: MigrationStatus,
    pub replication: ReplicationStatus,
    /// The attached under-stores.
    pub attachments: Vec<AttachmentStatus>,
    /// Small files the metadata holds inline.
    pub inline: InlineStatus,
    /// Snapshots and what they keep.
    pub snapshots: SnapshotStatus,
    /// Transactions.
    pub transactions: TransactionStatus,
    /// The coordinator's metadata log.
    pub metadata_log: MetadataLogStatus,
    /// The change feed mounts follow.
    pub change_feed: ChangeFeedStatus,
}

/// What `statfs` and the pool's upkeep need of a [`PoolStatus`]
/// (`CoordRequest::Usage`), without the figures that walk the namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolUsage {
    pub inodes: u64,
    pub workers: Vec<WorkerStatus>,
    /// The attached under-stores, when asked for (empty otherwise).
    pub attachments: Vec<AttachmentStatus>,
}

/// The change feed (`CoordRequest::Changes`): what it keeps, and who follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeFeedStatus {
    /// Changes are kept from this lsn on, up to `next` (the next op's).
    pub from: u64,
    pub next: u64,
    /// Ops that changed something kept, and their items (inodes and entries).
    pub ops: u64,
    pub items: u64,
    /// Readers waiting for a change now (a mount following the feed waits
    /// most of the time).
    pub followers: u64,
}

/// The metadata log: how it is fsynced and how far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataLogStatus {
    /// `--log-sync`: 0 fsyncs before every acknowledgement; otherwise an
    /// acknowledged change is written (safe from the coordinator's process
    /// dying) and fsynced within this many milliseconds.
    pub sync_every_ms: u64,
    /// The last change logged, and the last one fsynced.
    pub lsn: u64,
    pub synced_lsn: u64,
    /// fsyncs since the coordinator started (group commit: far fewer than changes).
    pub syncs: u64,
    /// Of those, the ones a change waiting alone issued itself (with
    /// `sync_every_ms` 0) rather than the log's syncer thread.
    pub writer_syncs: u64,
}

/// Transactions open now, and the task ids of committed ones remembered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionStatus {
    pub open: u64,
    pub tasks: u64,
    /// Region pages of committed transactions not yet on the workers.
    pub pages_pending: u64,
}

/// Small files held inline by the metadata, and the coordinator's limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineStatus {
    pub files: u64,
    pub bytes: u64,
    /// Largest file kept inline (`--inline-max`; 0: none is).
    pub max_file: u64,
    /// Most bytes kept inline in all (`--inline-total`).
    pub max_bytes: u64,
}

/// Snapshots, and the bytes of chunk versions only they keep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStatus {
    pub count: u64,
    /// Stored bytes no live file names any more (what removing every
    /// snapshot would free, once per copy).
    pub kept_bytes: u64,
}

/// One attached under-store and what its files owe it (`CoordRequest::Owed`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedStatus {
    pub path: String,
    pub uri: String,
    /// Files with changes not yet in the under-store, and their bytes.
    pub dirty_files: u64,
    pub dirty_bytes: u64,
    /// Of those, the files in write-back mode, and their bytes.
    pub write_back_files: u64,
    pub write_back_bytes: u64,
}

/// One attached under-store and how much of it the pool holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentStatus {
    pub path: String,
    pub uri: String,
    /// `through`, `back` or `pool-only`.
    pub mode: String,
    pub readonly: bool,
    pub files: u64,
    /// Files with changes not yet in the under-store, and their bytes.
    pub dirty_files: u64,
    pub dirty_bytes: u64,
    /// Of those, the files in write-back mode (their own or the
    /// attachment's), which the background write-back owes, and their bytes.
    pub write_back_files: u64,
    pub write_back_bytes: u64,
    /// Files with a write mode of their own.
    pub own_mode_files: u64,
    /// Bytes of its files the pool holds, and bytes only below.
    pub bytes_in_pool: u64,
    pub bytes_below: u64,
}

/// Copies of chunks: what the pool keeps, and what is missing while
/// workers are down or replicas are being repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationStatus {
    /// Most copies of each chunk the pool keeps (its `--replicas`).
    pub replicas: u8,
    /// Copies a chunk can have with the workers there are (fewer than
    /// `replicas` with fewer workers).
    pub possible: u8,
    /// Workers down (silent past their grace period).
    pub workers_down: Vec<tierpool_types::WorkerId>,
    /// Replica slots (partition replicas) with no owner now: lost with a
    /// worker and not yet copied again, or not placeable.
    pub replicas_missing: u32,
    /// Chunks with fewer live copies than their file keeps (at least one).
    pub chunks_under: u64,
    /// Their bytes.
    pub bytes_under: u64,
    /// Chunks with no live copy: unreadable until a worker comes back.
    pub chunks_lost: u64,
    /// What replicas are kept apart by, beyond distinct workers.
    pub spread: tierpool_types::Spread,
    /// Some chunk has fewer copies than it should, or none.
    pub degraded: bool,
}

/// Partitions moving toward the table the pool's weights ask for (after a
/// join, a drain or a rebalance).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationStatus {
    /// Whether any partition is still to move.
    pub active: bool,
    /// Partitions being copied now.
    pub partitions_moving: u32,
    /// Partitions not yet where they should be (moving ones included).
    pub partitions_left: u32,
    /// Partitions moved since the current migration started.
    pub partitions_done: u32,
    /// Chunk bytes copied by the moves finished since it started.
    pub bytes_moved: u64,
    /// `bytes_moved` plus the bytes of the partitions left (as the
    /// metadata counts them).
    pub bytes_total: u64,
    /// Milliseconds since it started (0 when none is active).
    pub elapsed_ms: u64,
    /// Bytes a second moved so far.
    pub rate: u64,
    /// Seconds left at that rate; `None` before there is a rate.
    pub eta_secs: Option<u64>,
    /// Moves given up (a worker died or failed) since the coordinator started.
    pub moves_failed: u64,
}
