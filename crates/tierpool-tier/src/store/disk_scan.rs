//! Re-indexing the DISK tier at start: reads only the header of each chunk
//! file (plus its length from the file system), never the data.
//!
//! - `*.tmp` files are writes cut short by a crash: removed.
//! - A file with a short or garbled header, a length that disagrees with its
//!   header, or a name that is not the one its header implies: skipped with a
//!   warning and left in place for inspection (never indexed: its key or
//!   bytes cannot be trusted).
//! - Two files of one key (a crash between writing a replacement and
//!   unlinking the old file): the higher generation wins, the other is removed.
//! - Chunks beyond the byte budget (the budget shrank since the last run):
//!   removed with a warning, so that accounting never exceeds the budget.
//!
//! Depends on `layout` for file names and index entries, never on `disk`
//! (which calls `scan`): the dependency points one way.

use super::disk_io;
use super::format::{Header, HEADER_LEN};
use super::layout::{io_error, path_of, DiskEntry, BUCKETS};
use std::collections::BTreeMap;
use std::path::Path;
use tierpool_types::ChunkKey;

#[derive(Debug, Default)]
pub(crate) struct Found {
    pub index: BTreeMap<ChunkKey, DiskEntry>,
    /// Highest generation of any readable header (0 if none).
    pub max_gen: u64,
}

pub(crate) fn scan(root: &Path, budget: u64) -> tierpool_types::Result<Found> {
    let mut found = Found::default();
    for b in 0..BUCKETS {
        let dir = root.join(format!("{b:02x}"));
        disk_io::create_dir_all(&dir).map_err(|e| io_error(e, "creating directory", &dir))?;
        let files = disk_io::list_dir(&dir).map_err(|e| io_error(e, "listing directory", &dir))?;
        for path in files {
            scan_file(root, &path, &mut found);
        }
    }
    enforce_budget(root, budget, &mut found);
    if !found.index.is_empty() {
        let bytes: u64 = found.index.values().map(|e| e.len).sum();
        tracing::info!(chunks = found.index.len(), bytes, root = %root.display(), "re-indexed disk tier");
    }
    Ok(found)
}

fn scan_file(root: &Path, path: &Path, found: &mut Found) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        tracing::warn!(path = %path.display(), "skipping file with a non UTF-8 name in the disk tier");
        return;
    };
    if name.ends_with(".tmp") {
        tracing::debug!(path = %path.display(), "removing partial chunk file");
        remove_or_warn(path, "partial chunk file");
        return;
    }
    if !name.ends_with(".chunk") {
        tracing::warn!(path = %path.display(), "skipping unexpected file in the disk tier");
        return;
    }
    let h = match read_header(root, path) {
        Ok(h) => h,
        Err(why) => {
            tracing::warn!(path = %path.display(), "skipping chunk file: {why}");
            return;
        }
    };
    found.max_gen = found.max_gen.max(h.gen);
    let entry = DiskEntry { len: h.len, checksum: h.checksum, gen: h.gen, reads: 0 };
    match found.index.get(&h.key) {
        Some(old) if old.gen > h.gen => remove_or_warn(path, "superseded chunk file"),
        Some(old) => {
            remove_or_warn(&path_of(root, h.key, old.gen), "superseded chunk file");
            found.index.insert(h.key, entry);
        }
        None => {
            found.index.insert(h.key, entry);
        }
    }
}

/// The header of a chunk file if the file is whole and where it belongs,
/// else why not.
fn read_header(root: &Path, path: &Path) -> Result<Header, String> {
    let mut buf = [0u8; HEADER_LEN];
    let (n, file_len) = disk_io::read_prefix(path, &mut buf).map_err(|e| format!("cannot read it: {e}"))?;
    if n < HEADER_LEN {
        return Err(format!("truncated header ({n} of {HEADER_LEN} bytes)"));
    }
    let h = Header::decode(&buf)?;
    if Some(file_len) != h.len.checked_add(HEADER_LEN as u64) {
        return Err(format!("chunk {} should have {} data bytes, file has {file_len} bytes", h.key, h.len));
    }
    if path != path_of(root, h.key, h.gen) {
        return Err(format!("header names chunk {} generation {}, which lives elsewhere", h.key, h.gen));
    }
    Ok(h)
}

fn enforce_budget(root: &Path, budget: u64, found: &mut Found) {
    let mut used = 0u64;
    let mut over = Vec::new();
    for (key, e) in &found.index {
        if used + e.len <= budget {
            used += e.len;
        } else {
            over.push((*key, e.gen));
        }
    }
    for (key, gen) in over {
        tracing::warn!(chunk = %key, "disk tier budget exceeded at start: dropping chunk file");
        remove_or_warn(&path_of(root, key, gen), "chunk file over budget");
        found.index.remove(&key);
    }
}

fn remove_or_warn(path: &Path, what: &str) {
    if let Err(e) = disk_io::remove_file(path) {
        tracing::warn!(path = %path.display(), "cannot remove {what}: {e}");
    }
}
