//! The pool's status as the coordinator reports it: the whole of it
//! (`Status`, which walks the namespace for some figures: what attachments
//! and snapshots hold, chunks short of copies while a worker is down), and
//! the light part `statfs` and the pool's upkeep ask every few seconds
//! (`Usage`), whose cost under the lock grows with the workers only, and
//! with the files under attachments when asked for.
//!
//! Locks are taken in the shell's order (`inner`, then `stats`).

use crate::service::{Coordinator, Inner};
use std::time::Duration;
use tierpool_meta::MetaState;
use tierpool_proto::{
    AttachmentStatus, ChangeFeedStatus, CoordResponse, InlineStatus, MetadataLogStatus, OwedStatus, PoolStatus,
    PoolUsage, SnapshotStatus, TransactionStatus, WorkerRequest, WorkerResponse, WorkerStatus,
};
use tierpool_types::Result;

/// How long a status waits for a worker's current statistics.
const STATS_TIMEOUT: Duration = Duration::from_millis(500);

impl Coordinator {
    /// Asks every live worker for its current statistics (in parallel, each
    /// bounded by a short timeout), so a status shows the tiers as they are
    /// now rather than as of the last heartbeat. A worker that does not answer
    /// in time keeps its heartbeat figures.
    pub(crate) async fn refresh_stats(&self) {
        let live = self.live_workers();
        let mut asks = tokio::task::JoinSet::new();
        for (id, pool) in live.into_iter().filter_map(|id| Some((id, self.worker_pool(id)?))) {
            asks.spawn(async move {
                let r = tokio::time::timeout(STATS_TIMEOUT, pool.call(&WorkerRequest::Stats, &[], true)).await;
                (id, r)
            });
        }
        while let Some(Ok((id, r))) = asks.join_next().await {
            if let Ok(Ok((WorkerResponse::Stats(stats), _))) = r {
                self.stats.lock().insert(id, *stats);
            }
        }
    }

    /// `CoordRequest::Status`, its figures as of now (after `refresh_stats`).
    pub(crate) fn status(&self) -> PoolStatus {
        let now = self.now();
        let mut g = self.inner.lock();
        let held_sessions = g.engine.held_sessions(now) as u64;
        let migration = crate::migrate::status(g.engine.migration(now));
        let swept = *self.swept.lock();
        let s = g.engine.state();
        PoolStatus {
            partitions: s.table().partitions(),
            table_epoch: s.table().epoch(),
            inodes: s.inode_count(),
            pending_gc: s.pending_gc().len() as u64,
            workers: self.worker_statuses(&g, now),
            pending_chunks: s.pending_chunks().len() as u64,
            orphan_chunks: swept.chunks,
            orphan_bytes: swept.bytes,
            held_sessions,
            migration,
            replication: crate::replication::status(&g.engine, now),
            attachments: attachment_statuses(s),
            inline: {
                let (files, bytes) = s.inline_usage();
                InlineStatus { files, bytes, max_file: self.cfg.inline_max, max_bytes: self.cfg.inline_total }
            },
            snapshots: {
                let (count, kept_bytes) = s.snapshot_usage();
                SnapshotStatus { count, kept_bytes }
            },
            transactions: TransactionStatus {
                open: g.engine.open_transactions() as u64,
                tasks: s.task_count() as u64,
                pages_pending: s.pending_pages().values().flatten().map(|r| r.pages.len() as u64).sum(),
            },
            metadata_log: {
                // Writers' first: they are counted after `syncs` is.
                let writer_syncs = self.log.writer_syncs();
                MetadataLogStatus {
                    sync_every_ms: self.log.sync_mode().period_ms(),
                    lsn: g.lsn,
                    synced_lsn: self.log.synced(),
                    syncs: self.log.syncs(),
                    writer_syncs,
                }
            },
            change_feed: {
                let (from, next, ops, items) = g.feed.extent();
                let followers = self.followers.load(std::sync::atomic::Ordering::Relaxed);
                ChangeFeedStatus { from, next, ops, items, followers }
            },
        }
    }

    /// Each worker as the status shows it, heartbeat figures included.
    fn worker_statuses(&self, g: &Inner, now: Duration) -> Vec<WorkerStatus> {
        let s = g.engine.state();
        let shares = s.table().shares();
        let stats = self.stats.lock();
        (s.workers().values())
            .map(|w| WorkerStatus {
                record: w.clone(),
                alive: g.engine.is_alive(w.id, now),
                partitions: shares.get(&w.id).copied().unwrap_or(0),
                draining: s.draining().contains(&w.id),
                stats: stats.get(&w.id).cloned(),
                speed: s.speeds().get(&w.id).copied().unwrap_or(100),
                bandwidth: g.engine.bandwidth(w.id, now),
            })
            .collect()
    }

    /// `CoordRequest::Usage`: what it costs under the lock grows with the
    /// workers, and with the files under attachments only if asked for.
    pub(crate) async fn usage(&self, fresh: bool, attachments: bool) -> Result<CoordResponse> {
        if fresh {
            self.refresh_stats().await;
        }
        let g = self.inner.lock();
        let s = g.engine.state();
        Ok(CoordResponse::Usage(PoolUsage {
            inodes: s.inode_count(),
            workers: self.worker_statuses(&g, self.now()),
            attachments: if attachments { attachment_statuses(s) } else { Vec::new() },
        }))
    }
}

impl Coordinator {
    /// `CoordRequest::Owed`: a walk of the files that owe their under-store.
    pub(crate) fn owed(&self) -> CoordResponse {
        let g = self.inner.lock();
        let figures = g.engine.state().owed_figures();
        CoordResponse::Owed(
            (figures.into_iter())
                .map(|(path, a, f)| OwedStatus {
                    path,
                    uri: a.uri,
                    dirty_files: f.dirty_files,
                    dirty_bytes: f.dirty_bytes,
                    write_back_files: f.write_back_files,
                    write_back_bytes: f.write_back_bytes,
                })
                .collect(),
        )
    }
}

/// Each attached under-store with what the pool holds of it: a walk of
/// every file under each attached directory.
fn attachment_statuses(s: &MetaState) -> Vec<AttachmentStatus> {
    (s.under_figures().into_iter())
        .map(|(path, a, f)| AttachmentStatus {
            path,
            uri: a.uri,
            mode: a.mode.name().to_string(),
            readonly: a.readonly,
            files: f[0],
            dirty_files: f[1],
            dirty_bytes: f[2],
            bytes_in_pool: f[3],
            bytes_below: f[4],
            write_back_files: f[5],
            write_back_bytes: f[6],
            own_mode_files: f[7],
        })
        .collect()
}
