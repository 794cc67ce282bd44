//! Writing the region pages of committed transactions on the workers.
//!
//! A `Transact` with region pages is a commit like any other: once it is
//! durable it happened. Its pages stay pending in the state (and in every
//! snapshot) until this module has written each of them over its region's
//! chunk, on every replica, as a client writes a region's pages, and
//! logged `RegionPagesWritten`. No page is written before its commit's
//! record is fsynced (with a log fsynced within a period too), so a crash
//! never leaves pages of a commit it took back. The commit's answer waits
//! for its pages, at most [`COMMIT_WAITS_FOR_PAGES`] (not for the
//! `RegionPagesWritten` record to be durable: a crash that loses it only
//! makes the pages be written again, and any later commit of the same
//! pages is later in the log), so a region opened after a commit was
//! acknowledged holds its pages, unless they could not be written then (a
//! worker down): the commit is still answered as committed (it is), and
//! its pages stay pending.
//!
//! The coordinator writes them through a client of its own pool (to its
//! own address, with the pool's secret): it finds the replicas the way
//! every client does, through moves of partitions and workers down. One
//! writer at a time (`PageWriter::lock`), oldest commit first; after a
//! failure the commits of other regions go on, those of the same region
//! wait (their order is kept). What is still pending after a failure is
//! written again by the next commit, by a transaction that must read those
//! pages (it waits in its lookup of the region, see
//! `Engine::tx_waits_for_pages`), and by a background task every second;
//! after a restart the background task writes what the log left pending.
//! Writing a page again with the same bytes is harmless; a later commit of
//! the same page is later in the log, and so written later. Waiters wait
//! on a spawned writer, never cancelling one half way.
//!
//! Invariant: a pending entry is removed only after all its pages were
//! acknowledged by every replica (or their region is gone), and only by
//! the writer (clients cannot send `RegionPagesWritten`).

use crate::service::Coordinator;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tierpool_client::{Client, ClientConfig};
use tierpool_meta::{InodeInfo, MetaOp, TxRegion, REGION_PAGE};
use tierpool_types::{Error, ErrorKind, InodeId, Result};

/// How long a lookup of a region waits for pages committed before its
/// transaction began to be written, before it gives up (`Busy`).
pub const WAIT_FOR_PAGES: Duration = Duration::from_secs(10);
/// How long a commit's answer waits for its pages to be written.
pub const COMMIT_WAITS_FOR_PAGES: Duration = Duration::from_secs(5);

/// The coordinator's writer of pending pages.
#[derive(Default)]
pub struct PageWriter {
    /// Held while pages are written: one writer at a time.
    lock: tokio::sync::Mutex<()>,
    /// The client it writes with, made at the first need.
    client: tokio::sync::OnceCell<Client>,
    /// The address the coordinator serves at (set once it is bound).
    addr: std::sync::OnceLock<String>,
}

impl PageWriter {
    /// The coordinator serves at `addr` (an unspecified address is reached
    /// through the loopback).
    pub fn serving_at(&self, addr: &str) {
        let addr = match addr.parse::<std::net::SocketAddr>() {
            Ok(a) if a.ip().is_unspecified() => {
                let ip: std::net::IpAddr = if a.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                };
                std::net::SocketAddr::new(ip, a.port()).to_string()
            }
            _ => addr.to_string(),
        };
        let _ = self.addr.set(addr);
    }
}

impl Coordinator {
    /// Writes every pending commit's pages, oldest first; each commit's
    /// are then said written. After a commit it cannot write, the later
    /// ones of the same regions wait; the first error is returned once the
    /// others are written.
    pub(crate) async fn write_pending_pages(&self) -> Result<()> {
        let _one = self.pages.lock.lock().await;
        let (mut after, mut blocked, mut failed) = (0, BTreeSet::new(), None);
        loop {
            let next = {
                let g = self.inner.lock();
                let state = g.engine.state();
                state.pending_pages().range(after + 1..).next().map(|(id, regions)| {
                    let infos: Vec<(TxRegion, Option<InodeInfo>)> = regions
                        .iter()
                        .map(|r| (r.clone(), state.stat_inode(r.inode, false).ok().filter(|i| i.chunks.is_empty())))
                        .collect();
                    (*id, infos, g.lsn)
                })
            };
            let Some((id, regions, lsn)) = next else { break };
            after = id;
            let inodes: Vec<InodeId> = regions.iter().map(|(r, _)| r.inode).collect();
            if inodes.iter().any(|i| blocked.contains(i)) {
                blocked.extend(inodes);
                continue;
            }
            // Its commit (at or before `lsn`) must not be one a crash could take back.
            self.log.wait_synced(lsn).await?;
            match self.write_commit_pages(&regions).await {
                // Not waited for: lost in a crash, the pages are written again.
                Ok(()) => self.execute_unawaited(MetaOp::RegionPagesWritten { id })?,
                Err(e) => {
                    blocked.extend(inodes);
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Writes the pages of one commit, region by region.
    async fn write_commit_pages(&self, regions: &[(TxRegion, Option<InodeInfo>)]) -> Result<()> {
        let client = self.page_client().await?;
        for (pages, info) in regions {
            match info {
                Some(info) => write_pages(&client, info, pages).await?,
                // Removed since (a later step of the same commit, or after
                // it): nothing to write.
                None => tracing::debug!("region {} is gone: its pending pages are dropped", pages.inode),
            }
        }
        Ok(())
    }

    /// A writer of pending pages started on its own task (so that a waiter
    /// who gives up does not stop it half way).
    pub(crate) fn spawn_page_writer(&self) -> Option<tokio::task::JoinHandle<Result<()>>> {
        let me = self.me.upgrade()?;
        Some(tokio::spawn(async move { me.write_pending_pages().await }))
    }

    /// Writes pending pages if some are; an error says why they could not
    /// all be written.
    pub(crate) async fn write_pages_if_pending(&self) -> Result<()> {
        if self.inner.lock().engine.state().pending_pages().is_empty() {
            return Ok(());
        }
        self.write_pending_pages().await
    }

    /// Waits (at most [`WAIT_FOR_PAGES`]) until the pages of region
    /// `inode` that commits before transaction `tx` began wrote are on the
    /// workers, writing them.
    pub(crate) async fn wait_for_pages(&self, tx: u64, inode: InodeId, path: &str) -> Result<()> {
        let waits = || self.inner.lock().engine.tx_waits_for_pages(tx, inode);
        if !waits() {
            return Ok(());
        }
        let Some(writer) = self.spawn_page_writer() else {
            return Err(Error::new(ErrorKind::Unavailable, "the coordinator is stopping"));
        };
        let why = match tokio::time::timeout(WAIT_FOR_PAGES, writer).await {
            _ if !waits() => return Ok(()),
            Ok(Ok(Ok(()))) => "they are still pending".to_string(),
            Ok(Ok(Err(e))) => e.to_string(),
            Ok(Err(e)) => format!("the writer failed: {e}"),
            Err(_) => format!("not written within {WAIT_FOR_PAGES:?}"),
        };
        Err(Error::new(
            ErrorKind::Busy,
            format!(
                "{path}: pages committed to this region before transaction {tx} began are not on the workers yet \
                 ({why}); try again"
            ),
        ))
    }

    async fn page_client(&self) -> Result<Client> {
        let client = self
            .pages
            .client
            .get_or_try_init(|| async {
                let addr = self.pages.addr.get().cloned().ok_or_else(|| {
                    Error::new(ErrorKind::Unavailable, "the coordinator is not serving yet: region pages wait")
                })?;
                let mut cfg = ClientConfig::new(addr);
                cfg.secret = Some(self.cfg.secret()?);
                Client::connect(cfg).await
            })
            .await?;
        Ok(client.clone())
    }
}

/// Writes `pages` of the region `info`, grouped by chunk, one request per chunk.
async fn write_pages(client: &Client, info: &InodeInfo, pages: &TxRegion) -> Result<()> {
    let cs = info.chunk_size.max(1);
    let mut by_chunk: BTreeMap<u64, Vec<(u64, &[u8])>> = BTreeMap::new();
    for (index, bytes) in &pages.pages {
        // A page may straddle two chunks when the chunk size is not a multiple of it.
        let mut at = index * REGION_PAGE;
        let mut rest: &[u8] = bytes;
        while !rest.is_empty() {
            let (chunk, offset) = (at / cs, at % cs);
            let n = ((cs - offset) as usize).min(rest.len());
            by_chunk.entry(chunk).or_default().push((offset, &rest[..n]));
            (at, rest) = (at + n as u64, &rest[n..]);
        }
    }
    let label = format!("region {}", info.id);
    for (chunk, ranges) in by_chunk {
        client.write_region(&label, info, chunk, &ranges).await?;
    }
    Ok(())
}

/// Writes what is pending every second (after a restart, or a failed write).
pub(crate) async fn drive(svc: std::sync::Arc<Coordinator>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Err(e) = svc.write_pages_if_pending().await {
            tracing::warn!("region pages of committed transactions not written yet: {e}");
        }
    }
}
