//! Snapshots: named, read-only copies of a file or tree that share every
//! chunk with the live data, read at `PATH/.snapshots/NAME/...` with the
//! ordinary `stat`, `list` and reads.

use crate::client::{unexpected, unexpected_meta, Client};
use crate::under::{attached_in, join, open_store, relative, UnderProgress};
use std::collections::BTreeSet;
use tierpool_meta::{normalize, InodeInfo, InodeKind, MetaOp, MetaReply, SnapshotSummary, SNAPSHOTS};
use tierpool_proto::{CoordRequest, CoordResponse};
use tierpool_types::{Error, ErrorKind, Result};
use tierpool_under::UnderStore;

impl Client {
    /// Takes snapshot `name` of the file or tree at `path` (atomically,
    /// moving no data); returns what `snapshots` shows of it.
    /// Of a region, a checkpoint ([`checkpoint`](Self::checkpoint)).
    pub async fn snapshot_create(&self, path: &str, name: &str) -> Result<SnapshotSummary> {
        self.snapshot_create_with(path, name, &|_| {}).await
    }

    /// [`snapshot_create`](Self::snapshot_create). A snapshot keeps only
    /// what the pool holds: beneath (or holding) an attached under-store,
    /// the chunks still below are loaded first, as `load` does (`progress`
    /// hears of each file).
    pub async fn snapshot_create_with(
        &self,
        path: &str,
        name: &str,
        progress: &(dyn Fn(&UnderProgress) + Send + Sync),
    ) -> Result<SnapshotSummary> {
        if self.is_region(path).await? {
            self.checkpoint(path, name).await?;
        } else {
            let stores = self.store_trees(path).await?;
            let mut tries = 0;
            loop {
                for t in &stores {
                    self.load(t, progress).await?;
                }
                match self.meta(MetaOp::SnapshotCreate { path: path.into(), name: name.into() }).await {
                    // A chunk let go of again meanwhile (the pool making room): load again.
                    Err(e) if e.kind == ErrorKind::Stale && !stores.is_empty() && tries < 3 => tries += 1,
                    r => break r.map(|_| ())?,
                }
            }
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
        self.snapshot_restore_with(path, name, &|_| {}).await
    }

    /// [`snapshot_restore`](Self::snapshot_restore). Beneath an attached
    /// under-store that mirrors names (`through`, `back`), what the
    /// restore will drop is removed below first and the snapshot's
    /// directories made there, as a removal or a new directory would be;
    /// after it, the restored files are written below (or kept for the
    /// write-back) as their write modes say. `progress` hears of each file.
    pub async fn snapshot_restore_with(
        &self,
        path: &str,
        name: &str,
        progress: &(dyn Fn(&UnderProgress) + Send + Sync),
    ) -> Result<InodeInfo> {
        if self.is_region(path).await? {
            self.restore_region(path, name).await?;
            return self.stat(path).await;
        }
        let attached = attached_in(&self.attachments().await?, path)?;
        if let Some((a, rel)) = attached.as_ref().filter(|(a, _)| a.attachment.mode.mirrors_names()) {
            if !a.attachment.readonly {
                // Names change below first, as a removal or a new directory does.
                self.restore_names_below(path, name, &open_store(&a.attachment)?, rel).await.map_err(|e| {
                    let m = format!(
                        "{path}: not restored from snapshot {name}: {} (entries the restore drops may be gone from \
                         the under-store already; restoring again finishes it)",
                        e.message
                    );
                    Error::new(e.kind, m)
                })?;
            }
        }
        let root = match self.meta(MetaOp::SnapshotRestore { path: path.into(), name: name.into() }).await? {
            MetaReply::Info(i) => i,
            other => return Err(unexpected_meta(other)),
        };
        if attached.is_some() {
            // Each restored file written below, or kept for the write-back, as its mode says.
            self.sync_where(path, &|_| true, false, progress).await.map_err(|e| {
                let m = format!(
                    "{path}: restored from snapshot {name}, but not all of its files are in the under-store yet: \
                     {}; `tierpool sync {path}` writes them",
                    e.message
                );
                Error::new(e.kind, m)
            })?;
        }
        Ok(root)
    }

    /// Before snapshot `name` is restored at `path`, in the store `store`
    /// where `path` is at key `rel`: what the restore will drop removed
    /// (deepest first; a directory with what the store has in it), the
    /// snapshot's directories made.
    async fn restore_names_below(&self, path: &str, name: &str, store: &UnderStore, rel: &str) -> Result<()> {
        let then = self.names_under(&join(path, &format!("{SNAPSHOTS}/{name}"))).await?;
        let now = match self.names_under(path).await {
            Err(e) if e.kind == ErrorKind::NotFound => BTreeSet::new(),
            other => other?,
        };
        for (sub, is_dir) in now.iter().rev().filter(|n| !then.contains(*n)) {
            store.delete(&join(rel, sub), *is_dir).await?;
        }
        for (sub, _) in then.iter().filter(|(_, is_dir)| *is_dir) {
            store.mkdir(&join(rel, sub)).await?;
        }
        Ok(())
    }

    /// The trees of attached stores that the snapshot of `path` takes:
    /// `path` if it is beneath one, else those attached beneath it.
    async fn store_trees(&self, path: &str) -> Result<Vec<String>> {
        let all = self.attachments().await?;
        if attached_in(&all, path)?.is_some() {
            return Ok(vec![path.to_owned()]);
        }
        let beneath = |a: &str| normalize(a).is_ok_and(|comps| relative(path, &comps).is_some());
        Ok(all.into_iter().filter(|a| beneath(&a.path)).map(|a| a.path).collect())
    }

    /// Every entry at or beneath `path`, relative to it (`""`: `path`
    /// itself), and whether it is a directory; in order, parents first.
    async fn names_under(&self, path: &str) -> Result<BTreeSet<(String, bool)>> {
        let mut out = BTreeSet::new();
        let mut stack = vec![String::new()];
        while let Some(sub) = stack.pop() {
            let at = join(path, &sub);
            let info = self.stat(&at).await?;
            let is_dir = info.kind == InodeKind::Dir;
            if is_dir {
                for e in self.list(&at).await? {
                    stack.push(if sub.is_empty() { e.name } else { format!("{sub}/{}", e.name) });
                }
            }
            out.insert((sub, is_dir));
        }
        Ok(out)
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
