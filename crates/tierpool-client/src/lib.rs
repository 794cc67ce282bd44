//! The tierpool client library.
//!
//! A [`Client`] resolves a path to its inode and chunk checksums through the
//! coordinator, then moves chunk bytes directly to and from the workers that
//! own the chunks' partitions, several chunks in flight at once.
//!
//! Guarantees a caller can rely on:
//! - every chunk read is checked against the checksum recorded at commit: a
//!   read returns the committed bytes or an error, never other bytes;
//! - `put` publishes a file only after all its chunks are stored, by one
//!   atomic metadata commit, so readers see the old or the new file whole;
//! - a chunk that its worker no longer has is reported as `Lost`, naming the file.

mod already_below;
mod batch;
mod checkpoints;
mod client;
mod coalesce;
mod dir_placing;
mod inode;
mod lease;
mod per_worker;
mod placing;
mod read;
mod read_many;
mod region;
mod region_handle;
mod replicas;
mod replication;
mod snapshots;
#[cfg(test)]
mod test_files;
mod transaction;
mod under;
pub mod view;
mod worker_lanes;
mod write;
mod write_many;
mod write_modes;

pub use batch::IN_FLIGHT;
pub use checkpoints::{CheckpointReport, Progress};
pub use client::{hostname, Client, ClientConfig, Coalesced, DEFAULT_COALESCE};
pub use inode::{InodeChange, Made, NewFileAt, Owner, Renamed};
pub use lease::{WriteLease, RENEW};
pub use placing::Placing;
pub use read::{check_readable, chunk_count, ChunkStream};
pub use region::RegionOptions;
pub use region_handle::{PoolBackend, Region};
pub use replication::Replicated;
pub use tierpool_cache::CacheStats;
pub use tierpool_meta::{
    check_name, DirEntry, DirName, InodeInfo, InodeKind, MetaOp, NewNode, SnapshotSummary, WriteMode,
};
pub use tierpool_net::auth::{Secret, SECRET_FILE_ENV};
pub use tierpool_net::{runtime_ended, Background, Step};
pub use tierpool_proto::{ChangesAnswer, ChunkPlace};
pub use tierpool_proto::{
    FsckEntry, MigrationStatus, OwedStatus, PoolStatus, PoolUsage, ReplicationStatus, WorkerStatus,
};
pub use tierpool_types::ChunkRef;
pub use transaction::{Committed, Transaction};
pub use under::{open_store, MetaSync, UnderProgress, UnderReport};
pub use write::{FileWriter, PutOptions};
pub use write_modes::ModeReport;

/// How messages name a kind of inode.
pub fn kind_name(kind: InodeKind) -> &'static str {
    match kind {
        InodeKind::File => "file",
        InodeKind::Dir => "directory",
        InodeKind::Region => "region",
        InodeKind::Symlink => "symbolic link",
        InodeKind::Fifo => "named pipe",
        InodeKind::Socket => "socket",
        InodeKind::CharDevice => "character device",
        InodeKind::BlockDevice => "block device",
    }
}
