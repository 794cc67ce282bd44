//! Changes answered before their fsync (`CoordRequest::Written`, what the
//! mount asks): the marker that makes the next start skip inode ids a
//! crash of the machine may have taken back, and the machine's boot id,
//! which `SyncLog` answers with so that a client can tell that changes
//! answered under another boot may have been lost with that machine.
//!
//! Invariant: no change of a run is answered before its fsync until
//! `meta/periodic-sync` is on disk (fsynced, with its directory).

use crate::service::{Coordinator, PERIODIC_MARKER};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use tierpool_types::{Error, Result};

/// The boot id of this machine's kernel (empty if it has none to tell).
/// `$TIERPOOL_BOOT_ID_FILE` names another file to read it from: tests play
/// a restart of the machine with it.
pub(crate) fn machine() -> String {
    let path = std::env::var_os("TIERPOOL_BOOT_ID_FILE")
        .map_or_else(|| PathBuf::from("/proc/sys/kernel/random/boot_id"), PathBuf::from);
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default()
}

impl Coordinator {
    /// Before the first change of this run answered before its fsync: the
    /// marker that makes the next start skip the ids such changes handed out.
    pub(crate) fn note_answers_before_fsync(&self) -> Result<()> {
        if self.answered_unsynced.load(Ordering::Acquire) {
            return Ok(());
        }
        let marker = self.cfg.dir.join("meta").join(PERIODIC_MARKER);
        let io = |e: std::io::Error| Error::from(e).context(marker.display());
        std::fs::File::create(&marker).and_then(|f| f.sync_all()).map_err(io)?;
        std::fs::File::open(marker.parent().expect("in meta/")).and_then(|d| d.sync_all()).map_err(io)?;
        self.answered_unsynced.store(true, Ordering::Release);
        Ok(())
    }
}
