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

mod client;
mod read;
mod region;
mod region_handle;
mod write;

pub use client::{Client, ClientConfig};
pub use read::{chunk_count, ChunkStream};
pub use region::RegionOptions;
pub use region_handle::{PoolBackend, Region};
pub use tierpool_cache::CacheStats;
pub use tierpool_meta::{DirEntry, InodeInfo, InodeKind};
pub use tierpool_proto::{PoolStatus, WorkerStatus};
pub use write::{FileWriter, PutOptions};
