//! Where DISK chunk files live and what the index keeps of each: shared by
//! the store (`disk`) and its start-up scan (`disk_scan`), which depend on
//! this module and never on each other's internals.
//!
//! Layout: `root/<bucket>/<inode>-<index>-<version>-g<gen>.chunk`, where the
//! bucket is the low byte of the CRC-32C of the key, in two hex digits. The
//! name is a function of the key and generation alone, so a file whose header
//! names another key or generation is recognised as misplaced. Changing the
//! naming would orphan every file written before: it is as fixed as the
//! chunk format (`format`).

use std::io;
use std::path::{Path, PathBuf};
use tierpool_types::{Checksum, ChunkKey, Error, ErrorKind};

/// Number of bucket directories under the root.
pub(crate) const BUCKETS: u32 = 256;

/// What the index knows of one DISK chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DiskEntry {
    pub len: u64,
    pub checksum: Checksum,
    pub gen: u64,
    /// Reads since the chunk came to DISK (drives promotion).
    pub reads: u32,
}

/// The file of generation `gen` of `key` under `root`.
pub(crate) fn path_of(root: &Path, key: ChunkKey, gen: u64) -> PathBuf {
    let mut b = [0u8; 24];
    b[0..8].copy_from_slice(&key.inode.0.to_le_bytes());
    b[8..16].copy_from_slice(&key.index.to_le_bytes());
    b[16..24].copy_from_slice(&key.version.to_le_bytes());
    let bucket = crc32c::crc32c(&b) & 0xff;
    root.join(format!("{bucket:02x}")).join(format!("{}-{}-{}-g{gen}.chunk", key.inode.0, key.index, key.version))
}

/// Maps an I/O error of the DISK tier to the shared error type.
pub(crate) fn io_error(e: io::Error, what: &str, path: &Path) -> Error {
    let kind = if e.kind() == io::ErrorKind::StorageFull { ErrorKind::PoolFull } else { ErrorKind::Io };
    Error::new(kind, format!("disk tier: {what} {}: {e}", path.display()))
}

/// Maps an error of writing a chunk file: ENOSPC is `PoolFull`, saying plainly
/// that the file system under `root` is full (the tier manager adds how much
/// it holds); anything else is an I/O error naming the chunk and file.
pub(crate) fn write_error(e: io::Error, root: &Path, key: ChunkKey, dest: &Path) -> Error {
    if e.kind() != io::ErrorKind::StorageFull {
        return io_error(e, &format!("writing chunk {key} to"), dest);
    }
    // "No space left on device (os error 28)": the errno adds nothing for a person.
    let text = e.to_string();
    let cause = text.split(" (os error").next().unwrap_or(&text);
    Error::new(ErrorKind::PoolFull, format!("the disk under {} is out of space ({cause})", root.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::InodeId;

    #[test]
    fn enospc_is_pool_full_in_plain_words() {
        let key = ChunkKey::hashed(InodeId(1), 2, 3);
        let e = write_error(io::Error::from_raw_os_error(28), Path::new("/w/chunks"), key, Path::new("/w/chunks/x"));
        let want = "the disk under /w/chunks is out of space (No space left on device)";
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::PoolFull, want));
        let e = write_error(io::Error::other("bad sector"), Path::new("/w/chunks"), key, Path::new("/w/chunks/x"));
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Io, "disk tier: writing chunk 1:2@3 to /w/chunks/x: bad sector")
        );
    }

    #[test]
    fn names_files_by_bucket_key_and_generation() {
        let key = ChunkKey::hashed(InodeId(42), 3, 7);
        assert_eq!(path_of(Path::new("/r"), key, 1), Path::new("/r/b6/42-3-7-g1.chunk"));
    }
}
