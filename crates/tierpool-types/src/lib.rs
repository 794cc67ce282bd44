//! Identifiers, byte sizes, chunk attributes and the error type shared by every
//! tierpool crate.
//!
//! This crate holds plain data only: no I/O, no async, no clock. Everything here
//! may cross the wire or be written to disk, so every type is `serde`-serialisable
//! and changes to them must keep the formats in `tierpool-proto` versioned. One
//! holder is the exception, shared by the crates whose state must not cross a
//! `fork()`: [`PerProcess`].

mod error;
mod ids;
mod per_process;
mod placement;
mod size;
mod span;
mod stats;

pub use error::{panic_message, Error, ErrorKind, Result};
pub use ids::{ChunkAttrs, ChunkKey, ChunkRef, InodeId, Priority, WorkerId};
pub use per_process::PerProcess;
pub use placement::{Placement, Spread};
pub use size::ByteSize;
pub use span::Span;
pub use stats::{BufferStats, TierStats};

/// The unit of dirty tracking and of transaction conflict detection.
pub const PAGE_SIZE: u64 = 4096;
/// Chunk size used when a file does not ask for another one.
pub const DEFAULT_CHUNK_SIZE: u64 = 4 << 20;
/// Largest chunk size a file may ask for; bounds every data frame on the wire.
pub const MAX_CHUNK_SIZE: u64 = 64 << 20;
/// Partition count of a new pool unless configured otherwise.
pub const DEFAULT_PARTITIONS: u32 = 4096;

/// Checks that a chunk size is a positive multiple of [`PAGE_SIZE`] no larger
/// than [`MAX_CHUNK_SIZE`].
pub fn validate_chunk_size(size: u64) -> Result<u64> {
    if size == 0 || !size.is_multiple_of(PAGE_SIZE) || size > MAX_CHUNK_SIZE {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "chunk size {} must be a multiple of 4KiB between 4KiB and {}",
                ByteSize(size),
                ByteSize(MAX_CHUNK_SIZE)
            ),
        ));
    }
    Ok(size)
}

/// CRC-32C of a chunk's bytes, as stored in file metadata and chunk headers.
pub type Checksum = u32;
