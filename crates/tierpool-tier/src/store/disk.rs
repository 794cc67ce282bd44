//! The DISK store: one file per chunk under `root/<bucket>/`, indexed in
//! memory by key.
//!
//! Files are spread over 256 bucket directories by a hash of the key (see
//! `layout`, shared with the start-up scan in `disk_scan`). Every
//! write gets a fresh generation number, part of the file name and header, so
//! a file is never rewritten in place: a replace writes a new file and then
//! unlinks the old one. A reader that captured a path ([`ReadTicket`]) outside
//! any lock therefore sees either that complete file or no file, never bytes
//! of another value. Writes are two-phase: [`DiskStore::stage`] writes the
//! file, [`DiskStore::commit`] indexes it; a staged file that is not wanted is
//! [`DiskStore::discard`]ed.
//!
//! Invariants: `index` holds one entry per chunk, whose file is
//! `path_of(key, gen)`; `used` is the sum of the entries' lengths; `next_gen`
//! is above every generation seen on disk.

use super::disk_scan;
use super::format::{Header, HEADER_LEN};
use super::layout::{io_error, path_of, write_error};
use super::{disk_io, inode_range, not_found, ChunkMeta, ChunkStore};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use tierpool_types::{Checksum, ChunkKey, Error, ErrorKind, InodeId, Result};

pub use super::layout::DiskEntry;

/// Everything needed to read a chunk without the store: taken under the
/// owner's lock, used outside it.
#[derive(Clone, Debug)]
pub struct ReadTicket {
    pub key: ChunkKey,
    pub path: PathBuf,
    pub len: u64,
    pub checksum: Checksum,
    pub gen: u64,
}

/// A chunk file written but not yet indexed.
#[derive(Debug)]
#[must_use = "a staged file must be committed or discarded"]
pub struct Staged {
    key: ChunkKey,
    entry: DiskEntry,
}

impl Staged {
    pub fn key(&self) -> ChunkKey {
        self.key
    }

    pub fn len(&self) -> u64 {
        self.entry.len
    }

    pub fn is_empty(&self) -> bool {
        self.entry.len == 0
    }
}

#[derive(Debug)]
pub struct DiskStore {
    root: PathBuf,
    index: BTreeMap<ChunkKey, DiskEntry>,
    used: u64,
    next_gen: u64,
}

impl DiskStore {
    /// Opens the store at `root`, creating it if needed, indexing the chunk
    /// files found there (at most `budget` bytes of them) and removing
    /// leftover temporary files.
    pub fn open(root: &Path, budget: u64) -> Result<DiskStore> {
        let found = disk_scan::scan(root, budget)?;
        let used = found.index.values().map(|e| e.len).sum();
        Ok(DiskStore { root: root.to_path_buf(), index: found.index, used, next_gen: found.max_gen + 1 })
    }

    /// The file of generation `gen` of `key`.
    pub fn path_of(&self, key: ChunkKey, gen: u64) -> PathBuf {
        path_of(&self.root, key, gen)
    }

    /// The directory the store lives in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes a new file for the chunk; the index is unchanged until
    /// [`DiskStore::commit`]. `PoolFull` if the file system is out of space
    /// (ENOSPC), `Io` for other failures; either way no file is left.
    pub fn stage(&mut self, key: ChunkKey, data: &[u8], checksum: Checksum) -> Result<Staged> {
        let gen = self.next_gen;
        self.next_gen += 1;
        let len = data.len() as u64;
        let header = Header { key, gen, len, checksum }.encode();
        let dest = self.path_of(key, gen);
        let mut tmp = dest.clone().into_os_string();
        tmp.push(".tmp");
        disk_io::write_atomic(Path::new(&tmp), &dest, &[&header, data])
            .map_err(|e| write_error(e, &self.root, key, &dest))?;
        Ok(Staged { key, entry: DiskEntry { len, checksum, gen, reads: 0 } })
    }

    /// Removes a staged file that will not be indexed (best effort: a left
    /// file of an absent key is only found again by a later restart scan).
    pub fn discard(&self, staged: Staged) {
        let path = self.path_of(staged.key, staged.entry.gen);
        if let Err(e) = disk_io::remove_file(&path) {
            tracing::warn!(chunk = %staged.key, path = %path.display(), "cannot remove unused chunk file: {e}");
        }
    }

    /// Indexes a staged file. The key must not be indexed already (remove
    /// the old copy first with [`DiskStore::remove`]).
    pub fn commit(&mut self, staged: Staged) {
        debug_assert!(!self.index.contains_key(&staged.key), "commit over an indexed chunk {}", staged.key);
        self.used += staged.entry.len;
        if let Some(old) = self.index.insert(staged.key, staged.entry) {
            self.used -= old.len;
        }
    }

    /// Unlinks the chunk's file, then forgets it. If the unlink fails the
    /// chunk stays indexed and the error is returned.
    pub fn remove(&mut self, key: ChunkKey) -> Result<Option<DiskEntry>> {
        let Some(entry) = self.index.get(&key) else { return Ok(None) };
        let path = self.path_of(key, entry.gen);
        disk_io::remove_file(&path).map_err(|e| io_error(e, &format!("removing chunk {key} file"), &path))?;
        let entry = self.index.remove(&key);
        self.used -= entry.map_or(0, |e| e.len);
        Ok(entry)
    }

    /// Up to `limit` keys after `after` (from the first without it), in key
    /// order, with their lengths.
    pub fn keys_after(&self, after: Option<ChunkKey>, limit: usize) -> Vec<(ChunkKey, u64)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = after.map_or(Unbounded, Excluded);
        self.index.range((from, Unbounded)).take(limit).map(|(k, e)| (*k, e.len)).collect()
    }

    pub fn entry(&self, key: ChunkKey) -> Option<DiskEntry> {
        self.index.get(&key).copied()
    }

    pub fn ticket(&self, key: ChunkKey) -> Option<ReadTicket> {
        let e = self.index.get(&key)?;
        Some(ReadTicket { key, path: self.path_of(key, e.gen), len: e.len, checksum: e.checksum, gen: e.gen })
    }

    /// Counts a read of generation `gen` of the chunk; returns the new count,
    /// or `None` if that generation is no longer indexed.
    pub fn count_read(&mut self, key: ChunkKey, gen: u64) -> Option<u32> {
        let e = self.index.get_mut(&key).filter(|e| e.gen == gen)?;
        e.reads = e.reads.saturating_add(1);
        Some(e.reads)
    }

    /// Reads and verifies a chunk file. `NotFound` if the file is gone (a
    /// concurrent delete or replace); `Corrupt`, naming the key, if its
    /// header, length or checksum does not match the ticket.
    pub fn read(t: &ReadTicket) -> Result<Bytes> {
        let hint = HEADER_LEN.saturating_add(usize::try_from(t.len).unwrap_or(0));
        let buf = disk_io::read_all(&t.path, hint).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => not_found(t.key),
            _ => io_error(e, &format!("reading chunk {}", t.key), &t.path),
        })?;
        verify(t, &buf)?;
        Ok(Bytes::from(buf).slice(HEADER_LEN..))
    }
}

fn verify(t: &ReadTicket, buf: &[u8]) -> Result<()> {
    let corrupt = |why: String| {
        let msg = format!("chunk {} is corrupt on disk ({}): {why}", t.key, t.path.display());
        tracing::warn!("{msg}");
        Error::new(ErrorKind::Corrupt, msg)
    };
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
        return Err(corrupt(format!("file of {} bytes is shorter than its header", buf.len())));
    };
    let h = Header::decode(head).map_err(corrupt)?;
    if h.key != t.key || h.gen != t.gen {
        return Err(corrupt(format!("header names chunk {} generation {}", h.key, h.gen)));
    }
    let data = &buf[HEADER_LEN..];
    if h.len != t.len || data.len() as u64 != t.len {
        return Err(corrupt(format!("expected {} bytes, header says {}, file has {}", t.len, h.len, data.len())));
    }
    let crc = crc32c::crc32c(data);
    if crc != t.checksum || h.checksum != t.checksum {
        return Err(corrupt(format!("checksum mismatch: expected {:08x}, data has {crc:08x}", t.checksum)));
    }
    Ok(())
}

impl ChunkStore for DiskStore {
    fn put(&mut self, key: ChunkKey, data: Bytes, checksum: Checksum) -> Result<()> {
        let staged = self.stage(key, &data, checksum)?;
        if let Err(e) = self.remove(key) {
            self.discard(staged);
            return Err(e);
        }
        self.commit(staged);
        Ok(())
    }

    fn get(&self, key: ChunkKey) -> Result<Bytes> {
        DiskStore::read(&self.ticket(key).ok_or_else(|| not_found(key))?)
    }

    fn meta(&self, key: ChunkKey) -> Option<ChunkMeta> {
        self.index.get(&key).map(|e| ChunkMeta { len: e.len, checksum: e.checksum })
    }

    fn delete(&mut self, key: ChunkKey) -> Result<bool> {
        Ok(self.remove(key)?.is_some())
    }

    fn keys_of(&self, inode: InodeId) -> Vec<ChunkKey> {
        self.index.range(inode_range(inode)).map(|(k, _)| *k).collect()
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn len(&self) -> u64 {
        self.index.len() as u64
    }
}
