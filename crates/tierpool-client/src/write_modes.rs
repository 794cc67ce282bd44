//! Write modes of files' own: a file beneath an attachment may write
//! through, back or not at all, whatever its attachment does (the rules
//! are the metadata's, see `tierpool_meta`'s `state/write_modes.rs`).

use crate::client::{unexpected_meta, Client};
use tierpool_meta::{MetaOp, MetaReply, Origin, WriteMode};
use tierpool_proto::AttachedDir;
use tierpool_types::{Error, Result};

/// What setting a write mode did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModeReport {
    /// Files whose mode changed.
    pub files: u64,
    /// Of those, files with changes not yet below that now write through:
    /// written to the under-store before the call returned.
    pub written: u64,
}

impl Client {
    /// Gives the file at `path` (with `recursive`, every file beneath the
    /// directory at `path`) its own write mode, or with `None` its
    /// attachment's again. A file replaced at its path later (a new put)
    /// keeps the mode. Each file meets its new mode at once: one with
    /// changes not yet below is written there now if it writes through,
    /// moved to its workers' disks if it writes back (the write-back takes
    /// it from there); in the pool only, it stays as it is. A file that
    /// cannot be written below (the store down) fails the call after the
    /// others were handled; its mode is set all the same.
    pub async fn set_write_mode(&self, path: &str, mode: Option<WriteMode>, recursive: bool) -> Result<ModeReport> {
        let op = MetaOp::SetWriteMode { path: path.to_string(), mode, recursive };
        let changed = match self.meta(op).await? {
            MetaReply::WriteModes { files } => files,
            other => return Err(unexpected_meta(other)),
        };
        let mut report = ModeReport { files: changed.len() as u64, written: 0 };
        if changed.is_empty() {
            return Ok(report);
        }
        let changed: std::collections::HashSet<_> = changed.into_iter().collect();
        let files =
            if recursive { self.files_under(path).await? } else { vec![(path.to_string(), self.stat(path).await?)] };
        // One file that cannot be written below does not hold back the others.
        let mut first_error = None;
        for (p, info) in files.into_iter().filter(|(_, i)| changed.contains(&i.id)) {
            if !info.origin.as_ref().is_some_and(|o| o.dirty) {
                continue;
            }
            match self.persist(&p, info, false).await {
                Ok(wrote) => report.written += u64::from(wrote),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            // The modes are set; the file named is not below yet (`sync` writes it).
            Some(e) => Err(e.context("the write mode is set, but a file could not meet it yet")),
            None => Ok(report),
        }
    }

    /// The write mode the file at `path` follows, and whether it is its
    /// own; `InvalidArgument` for a path that is not a file beneath an
    /// attachment.
    pub async fn write_mode(&self, path: &str) -> Result<(WriteMode, bool)> {
        let info = self.stat(path).await?;
        let attached = self.attachments().await?;
        match info.origin.as_ref().and_then(|o| Some((mode_among(&attached, o)?, o.mode.is_some()))) {
            Some(found) => Ok(found),
            None => Err(Error::invalid(format!(
                "{path}: is not a file beneath an attached under-store (write modes apply to files there)"
            ))),
        }
    }
}

/// The write mode a file of origin `o` follows among the attachments
/// `attached`: its own, or its attachment's (`None` if that is gone).
pub(crate) fn mode_among(attached: &[AttachedDir], o: &Origin) -> Option<WriteMode> {
    attached.iter().find(|a| a.inode == o.attach).map(|a| o.mode_in(&a.attachment))
}
