//! Snapshots: named, read-only copies of a file or tree that share every
//! chunk with the live data, read at `PATH/.snapshots/NAME/...` with the
//! ordinary `stat`, `list` and reads.

use crate::client::{unexpected, unexpected_meta, Client};
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, SnapshotSummary};
use tierpool_proto::{CoordRequest, CoordResponse};
use tierpool_types::{Error, ErrorKind, Result};

impl Client {
    /// Takes snapshot `name` of the file or tree at `path` (atomically,
    /// moving no data); returns what `snapshots` shows of it.
    /// Of a region, a checkpoint ([`checkpoint`](Self::checkpoint)).
    pub async fn snapshot_create(&self, path: &str, name: &str) -> Result<SnapshotSummary> {
        if self.is_region(path).await? {
            self.checkpoint(path, name).await?;
        } else {
            self.meta(MetaOp::SnapshotCreate { path: path.into(), name: name.into() }).await?;
        }
        let all = self.snapshots(Some(path)).await?;
        all.into_iter().find(|s| s.name == name).ok_or_else(|| {
            Error::new(ErrorKind::NotFound, format!("{path}@{name}: was removed as soon as it was taken"))
        })
    }

    /// Removes snapshot `name` of `path`: what only it kept is freed.
    pub async fn snapshot_remove(&self, path: &str, name: &str) -> Result<()> {
        self.meta(MetaOp::SnapshotRemove { path: path.into(), name: name.into() }).await.map(|_| ())
    }

    /// Puts snapshot `name` back at `path`, replacing what is there, in one
    /// step; returns the restored root.
    /// Of a region, its chunks are copied back ([`restore_region`](Self::restore_region)).
    pub async fn snapshot_restore(&self, path: &str, name: &str) -> Result<InodeInfo> {
        if self.is_region(path).await? {
            self.restore_region(path, name).await?;
            return self.stat(path).await;
        }
        match self.meta(MetaOp::SnapshotRestore { path: path.into(), name: name.into() }).await? {
            MetaReply::Info(i) => Ok(i),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Whether `path` is a live region (`false` if it is anything else or nothing).
    pub async fn is_region(&self, path: &str) -> Result<bool> {
        match self.stat(path).await {
            Ok(i) => Ok(i.kind == tierpool_meta::InodeKind::Region),
            Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::ReadOnly) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The snapshots of `path` (of every path: `None`), by path and name.
    pub async fn snapshots(&self, path: Option<&str>) -> Result<Vec<SnapshotSummary>> {
        match self.coord(CoordRequest::Snapshots { path: path.map(str::to_owned) }).await? {
            CoordResponse::Snapshots(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }
}
