//! What a pool reports, in the one shape every surface shows: `status
//! --json`, `stat --json`, `ls --json`, `replicas --json`, `fsck --json`
//! and the dicts of the Python package are these structures serialised. Field names are part of the product:
//! add fields, never rename them.

use crate::{chunk_count, FsckEntry, InodeInfo, InodeKind, PoolStatus, Replicated, ReplicationStatus};
use serde::Serialize;

/// The pool as `status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusView {
    pub coordinator: String,
    pub partitions: u32,
    pub table_epoch: u64,
    pub inodes: u64,
    /// Removed files whose chunks are still to be deleted.
    pub pending_gc: u64,
    /// Replaced chunk versions still to be deleted.
    pub pending_chunks: u64,
    /// Orphaned chunks (left by writers that died before committing)
    /// deleted since the coordinator started.
    pub orphans: OrphansView,
    /// Client sessions holding files open or being written.
    pub held_sessions: u64,
    /// Partitions moving between workers (after a join, a drain, a rebalance).
    pub migration: MigrationView,
    /// Copies of chunks: what the pool keeps and what is missing.
    pub replication: ReplicationView,
    pub workers: Vec<WorkerView>,
    /// The attached under-stores: `path`, `uri`, `mode`, `readonly`,
    /// `files`, `dirty_files` and `dirty_bytes` (changes not yet below),
    /// `write_back_files` and `write_back_bytes` (of those, the ones in
    /// `back` mode, their own or the attachment's: what the background
    /// write-back owes), `own_mode_files` (files with a write mode of
    /// their own), `bytes_in_pool`, `bytes_below`.
    pub attachments: Vec<tierpool_proto::AttachmentStatus>,
    /// Small files the metadata holds inline: `files`, `bytes`, and the
    /// coordinator's limits `max_file` (`--inline-max`) and `max_bytes`
    /// (`--inline-total`).
    pub inline: tierpool_proto::InlineStatus,
    /// Snapshots: `count`, and `kept_bytes` of chunk versions only they
    /// keep (what removing them all would free, per copy).
    pub snapshots: tierpool_proto::SnapshotStatus,
    /// Transactions: `open` now, and `tasks`, the task ids of committed
    /// ones the pool remembers (each commits once).
    pub transactions: tierpool_proto::TransactionStatus,
    /// The coordinator's metadata log: `sync_every_ms` (its `--log-sync`;
    /// 0: fsynced before every acknowledgement), `lsn` (the last change),
    /// `synced_lsn` (the last one fsynced), `syncs` (fsyncs since it started)
    /// and `writer_syncs` (those a change waiting alone issued itself).
    pub metadata_log: tierpool_proto::MetadataLogStatus,
    /// The change feed mounts follow: changes kept `from` an lsn to `next`,
    /// in `ops` ops and `items` items, and the `followers` waiting now.
    pub change_feed: tierpool_proto::ChangeFeedStatus,
}

/// Copies of chunks: what the pool keeps, and what is short of copies
/// while workers are down or their replicas are being copied again.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplicationView {
    /// Most copies of each chunk the pool keeps (its `--replicas`).
    pub replicas: u8,
    /// Copies a chunk can have with the workers there are (fewer than
    /// `replicas` when the pool has fewer workers).
    pub possible: u8,
    /// Ids of the workers down (silent past the coordinator's `--dead-after`).
    pub workers_down: Vec<u32>,
    /// Partition replicas with no worker now: lost with a worker and not
    /// yet copied again, or with no worker to go to.
    pub replicas_missing: u32,
    /// Chunks with fewer live copies than their file keeps (at least one).
    pub chunks_under: u64,
    /// Their bytes.
    pub bytes_under: u64,
    /// Chunks with no live copy: unreadable until a worker comes back.
    pub chunks_lost: u64,
    /// Some chunk has fewer copies than it should, or none.
    pub degraded: bool,
    /// What replicas are kept apart by: `host` or `rack`.
    pub spread: &'static str,
}

impl ReplicationView {
    pub fn new(r: &ReplicationStatus) -> ReplicationView {
        ReplicationView {
            replicas: r.replicas,
            possible: r.possible,
            workers_down: r.workers_down.iter().map(|w| w.0).collect(),
            replicas_missing: r.replicas_missing,
            chunks_under: r.chunks_under,
            bytes_under: r.bytes_under,
            chunks_lost: r.chunks_lost,
            degraded: r.degraded,
            spread: r.spread.name(),
        }
    }
}

/// What a change of copies per chunk did (`tierpool replicas`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplicatedView {
    /// Files and regions whose copies changed.
    pub files: u64,
    /// Chunks copied to new workers, or whose extra copies were dropped.
    pub chunks: u64,
    /// Bytes of those chunks.
    pub bytes: u64,
}

impl ReplicatedView {
    pub fn new(r: &Replicated) -> ReplicatedView {
        ReplicatedView { files: r.files, chunks: r.chunks, bytes: r.bytes }
    }
}

/// A file or region short of copies, as `fsck` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FsckView {
    pub path: String,
    /// Copies each of its chunks should have.
    pub replicas: u8,
    /// Its chunks that hold data.
    pub chunks: u64,
    /// Chunks with fewer live copies than `replicas` (at least one).
    pub under: u64,
    /// Chunks with no live copy.
    pub lost: u64,
}

impl FsckView {
    pub fn new(e: &FsckEntry) -> FsckView {
        FsckView { path: e.path.clone(), replicas: e.replicas, chunks: e.chunks, under: e.under, lost: e.lost }
    }
}

/// How far the moving of partitions toward their goal is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigrationView {
    /// Whether any partition is still to move.
    pub active: bool,
    /// Partitions being copied now.
    pub partitions_moving: u32,
    /// Partitions not yet where they should be (moving ones included).
    pub partitions_left: u32,
    /// Partitions moved since the migration started.
    pub partitions_done: u32,
    /// Bytes copied by the moves finished since it started.
    pub bytes_moved: u64,
    /// `bytes_moved` plus the bytes still to move.
    pub bytes_total: u64,
    pub elapsed_secs: f64,
    /// Bytes a second so far.
    pub rate: u64,
    /// Seconds left at that rate (`null` before there is one).
    pub eta_secs: Option<u64>,
    /// Moves given up (a worker died or failed) since the coordinator started.
    pub moves_failed: u64,
}

/// Orphans deleted, in chunks and bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OrphansView {
    pub chunks: u64,
    pub bytes: u64,
}

/// One worker in a [`StatusView`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerView {
    pub id: u32,
    pub address: String,
    pub host: String,
    pub rack: String,
    pub alive: bool,
    pub partitions: u32,
    /// Being emptied: its partitions move to the others and it takes none.
    pub draining: bool,
    pub mem: TierView,
    pub disk: TierView,
    /// The worker's disk was found out of space: writes that need it fail
    /// with "pool full" until space comes back.
    pub disk_full: bool,
    /// Bytes of garbage still stored (replaced versions, removed files),
    /// part of `used`: dropped first whenever room is needed.
    pub reclaimable: u64,
    pub reclaimable_chunks: u64,
    /// Garbage chunks dropped to make room since the worker started.
    pub reclaimed: u64,
    /// Chunks moved from MEM to DISK since the worker started.
    pub demotions: u64,
    /// Chunks moved from DISK to MEM since the worker started.
    pub promotions: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Chunk bytes copied to it by moves of partitions since it started.
    pub bytes_moved_in: u64,
    /// Percent of the fastest worker's bandwidth it delivers, as its share
    /// of partitions counts it (100: healthy).
    pub speed: u8,
    /// Bytes a second its links carried data at over the coordinator's
    /// window (`null`: too little traffic to say).
    pub bandwidth: Option<u64>,
    /// The chunk buffers it reads chunks being written into, kept for
    /// reuse: their size, how many it keeps spare at most (`keep`), how
    /// many spare and in use together at most (`limit`, with `--prefault`;
    /// else `null`), how many are spare and in use (`lent`) now, and how
    /// many chunks found one spare (`reused`) or not (`fresh`).
    pub buffers: tierpool_types::BufferStats,
    /// Connections it accepted since it started (`accepted`), and how many
    /// of them came through its local socket from this machine (`local`).
    pub connections: tierpool_proto::Connections,
}

/// One tier of a worker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierView {
    /// Budget in bytes.
    pub capacity: u64,
    /// Bytes of chunks held.
    pub used: u64,
    pub chunks: u64,
}

impl StatusView {
    pub fn new(coordinator: &str, s: &PoolStatus) -> StatusView {
        let workers = (s.workers.iter())
            .map(|w| {
                let stats = w.stats.clone().unwrap_or_default();
                let st = &stats.tiers;
                WorkerView {
                    id: w.record.id.0,
                    address: w.record.addr.clone(),
                    host: w.record.host.clone(),
                    rack: w.record.rack.clone(),
                    alive: w.alive,
                    partitions: w.partitions,
                    draining: w.draining,
                    speed: w.speed,
                    bandwidth: w.bandwidth,
                    mem: TierView { capacity: w.record.mem_capacity, used: st.mem_used, chunks: st.mem_chunks },
                    disk: TierView { capacity: w.record.disk_capacity, used: st.disk_used, chunks: st.disk_chunks },
                    disk_full: st.disk_full,
                    reclaimable: st.reclaimable_bytes,
                    reclaimable_chunks: st.reclaimable_chunks,
                    reclaimed: st.reclaimed,
                    demotions: st.demotions,
                    promotions: st.promotions,
                    bytes_written: stats.bytes_written,
                    bytes_read: stats.bytes_read,
                    bytes_moved_in: stats.bytes_moved_in,
                    buffers: stats.buffers.clone(),
                    connections: stats.connections,
                }
            })
            .collect();
        StatusView {
            coordinator: coordinator.to_string(),
            partitions: s.partitions,
            table_epoch: s.table_epoch,
            inodes: s.inodes,
            pending_gc: s.pending_gc,
            pending_chunks: s.pending_chunks,
            orphans: OrphansView { chunks: s.orphan_chunks, bytes: s.orphan_bytes },
            held_sessions: s.held_sessions,
            migration: MigrationView::new(&s.migration),
            replication: ReplicationView::new(&s.replication),
            workers,
            attachments: s.attachments.clone(),
            inline: s.inline.clone(),
            snapshots: s.snapshots.clone(),
            transactions: s.transactions.clone(),
            metadata_log: s.metadata_log.clone(),
            change_feed: s.change_feed.clone(),
        }
    }
}

impl MigrationView {
    fn new(m: &crate::MigrationStatus) -> MigrationView {
        MigrationView {
            active: m.active,
            partitions_moving: m.partitions_moving,
            partitions_left: m.partitions_left,
            partitions_done: m.partitions_done,
            bytes_moved: m.bytes_moved,
            bytes_total: m.bytes_total,
            elapsed_secs: m.elapsed_ms as f64 / 1000.0,
            rate: m.rate,
            eta_secs: m.eta_secs,
            moves_failed: m.moves_failed,
        }
    }
}

/// A file, directory, region or link as `stat` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InfoView {
    pub path: String,
    pub inode: u64,
    /// `file`, `dir`, `region`, `symlink`, `fifo`, `socket`, `char_device` or `block_device`.
    pub kind: &'static str,
    pub size: u64,
    pub chunk_size: u64,
    pub chunks: u64,
    /// Permission bits in octal, e.g. `"644"`.
    pub mode: String,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub atime_ns: u64,
    pub mtime_ns: u64,
    pub ctime_ns: u64,
    pub priority: u8,
    pub pinned: bool,
    /// Copies of each chunk kept (of a directory: what new entries in it keep).
    pub replicas: u8,
    /// Where new chunks are written: `hash`, `local`, `round-robin` or
    /// `local-only` (of a directory: what new entries in it take).
    pub placement: &'static str,
    /// Where a symbolic link points (`null` for other kinds).
    pub target: Option<String>,
    /// Of a file of an attached under-store: its object and how much of
    /// it the pool holds (`null` for other files and kinds).
    pub under: Option<UnderView>,
    /// A small file whose bytes the metadata holds, not the workers.
    pub inline: bool,
}

/// A file's under-store object as `stat --json` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnderView {
    /// The object's path relative to the attachment's root.
    pub key: String,
    /// Chunks whose bytes the pool holds; the others are read from below.
    pub chunks_in_pool: u64,
    pub chunks_below: u64,
    /// The file has changes the under-store does not have yet.
    pub dirty: bool,
    pub etag: String,
    /// Its own write mode (`through`, `back`, `pool-only`); `null`: its
    /// attachment's.
    pub write_mode: Option<&'static str>,
}

impl UnderView {
    pub fn new(i: &InodeInfo) -> Option<UnderView> {
        let o = i.origin.as_ref()?;
        let below = i.chunks.iter().filter(|r| r.is_below()).count() as u64;
        Some(UnderView {
            key: o.key.clone(),
            chunks_in_pool: i.chunks.iter().filter(|r| r.is_stored() || r.is_inline()).count() as u64,
            chunks_below: below,
            dirty: o.dirty,
            etag: o.etag.clone(),
            write_mode: o.mode.map(|m| m.name()),
        })
    }
}

/// A directory entry as `ls --json` shows it: the entry's [`InfoView`]
/// (with its name as `path`) and its name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EntryView {
    #[serde(flatten)]
    pub info: InfoView,
    pub name: String,
}

/// The stable name of a kind in [`InfoView::kind`].
pub fn kind_id(k: InodeKind) -> &'static str {
    match k {
        InodeKind::File => "file",
        InodeKind::Dir => "dir",
        InodeKind::Region => "region",
        InodeKind::Symlink => "symlink",
        InodeKind::Fifo => "fifo",
        InodeKind::Socket => "socket",
        InodeKind::CharDevice => "char_device",
        InodeKind::BlockDevice => "block_device",
    }
}

impl InfoView {
    pub fn new(path: &str, i: &InodeInfo) -> InfoView {
        InfoView {
            path: path.to_string(),
            inode: i.id.0,
            kind: kind_id(i.kind),
            size: i.size,
            chunk_size: i.chunk_size,
            chunks: chunk_count(i),
            mode: format!("{:o}", i.mode),
            uid: i.uid,
            gid: i.gid,
            nlink: i.nlink,
            atime_ns: i.atime,
            mtime_ns: i.mtime,
            ctime_ns: i.ctime,
            priority: i.attrs.priority.get(),
            pinned: i.attrs.pinned,
            replicas: i.replicas,
            placement: i.placement.name(),
            target: (i.kind == InodeKind::Symlink).then(|| i.target.clone()),
            under: UnderView::new(i),
            inline: i.chunks.first().is_some_and(|r| r.is_inline()),
        }
    }
}

impl EntryView {
    pub fn new(e: &crate::DirEntry) -> EntryView {
        EntryView { info: InfoView::new(&e.name, &e.info), name: e.name.clone() }
    }
}
