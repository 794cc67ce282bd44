//! Many small files in one call: `put_many` and `get_many` keep up to
//! [`IN_FLIGHT`] files moving at once over the client's shared connections,
//! so a caller with many small objects (fsspec's `pipe` and `cat` of many
//! paths, a spill of many keys) pays for round trips in parallel rather than
//! one after another. Files small enough for the metadata to keep inline go
//! to the coordinator many to a request (`MetaMany` of `CommitInline`s,
//! `StatMany`): one round trip and one durable wait for up to
//! [`MAX_BATCH`] of them. Each item succeeds or fails on its own: the
//! results come back one per item, in the order given, and a failure in the
//! middle neither stops nor undoes the others.
//!
//! The same requests carry single `stat`s and new files' commits that
//! tasks of one client make at once (see `coalesce.rs`): [`Stats`] and
//! [`Commits`] send a lane's calls alone or as one batch. So files stored
//! on the workers (too large to keep inline, or no room left for them)
//! share their commits too; small ones are stored and read many to a
//! request as well (`write_many.rs`, `read_many.rs`).

use crate::client::{unexpected, unexpected_meta, Client};
use crate::coalesce::Batches;
use crate::per_worker::SMALL_MANY_MAX;
use crate::read::{check_readable, whole_inline};
use crate::write::{with_bytes, PutOptions};
use bytes::Bytes;
use futures::StreamExt;
use std::future::Future;
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, Owner};
use tierpool_proto::{CoordRequest, CoordResponse, MAX_BATCH};
use tierpool_types::{validate_chunk_size, Error, ErrorKind, Result};
use tokio::task::JoinSet;

/// Files a batch works on at once.
pub const IN_FLIGHT: usize = 64;

/// Small files a batch writes at once (each holds a writer and a lease),
/// and their bytes at most.
const WRITERS_AT_ONCE: usize = 1024;
const WRITERS_BYTES: u64 = 64 << 20;

/// Most calls of one client that share a request.
pub(crate) const COALESCED_MAX: usize = 64;

/// Sends a lane's `stat`s: one path as `Stat`, more as `StatMany`.
#[derive(Clone)]
pub(crate) struct Stats(pub(crate) Client);

impl Batches<String, InodeInfo> for Stats {
    fn send(&self, paths: Vec<String>) -> impl Future<Output = Vec<Result<InodeInfo>>> + Send + 'static {
        let c = self.0.clone();
        async move {
            let n = paths.len();
            if n > 1 {
                match c.coord(CoordRequest::StatMany { paths: paths.clone() }).await {
                    Ok(CoordResponse::Infos(i)) if i.len() == n => return i,
                    // Stats are idempotent: a batch whose answer could not
                    // be taken (too large for a frame, say) is asked again
                    // a path at a time, as many at once as the lane lets.
                    Ok(other) => tracing::debug!("stats asked one by one: {}", unexpected(other)),
                    Err(e) if e.kind == ErrorKind::Protocol => tracing::debug!("stats asked one by one: {e}"),
                    Err(e) => return every(n, e),
                }
            }
            let one = |path: String| {
                let c = c.clone();
                async move {
                    match c.coord(CoordRequest::Stat { path }).await? {
                        CoordResponse::Info(i) => Ok(i),
                        other => Err(unexpected(other)),
                    }
                }
            };
            let at_once = c.inner.cfg.coalesce.max(1);
            futures::stream::iter(paths.into_iter().map(one)).buffered(at_once).collect().await
        }
    }
}

/// Sends a lane's new files' commits (`CommitInline`, `CommitFile`), as
/// this client's owner: one as `Meta`, more as `MetaMany`.
#[derive(Clone)]
pub(crate) struct Commits(pub(crate) Client);

impl Batches<MetaOp, MetaReply> for Commits {
    fn send(&self, ops: Vec<MetaOp>) -> impl Future<Output = Vec<Result<MetaReply>>> + Send + 'static {
        let c = self.0.clone();
        async move {
            let n = ops.len();
            let (uid, gid) = c.inner.cfg.owner;
            let owner = Owner { uid, gid };
            let req = match n {
                1 => CoordRequest::Meta { op: ops.into_iter().next().expect("one op"), owner },
                _ => CoordRequest::MetaMany { ops, owner },
            };
            match c.coord(req).await {
                Ok(CoordResponse::Meta(r)) if n == 1 => vec![Ok(r)],
                Ok(CoordResponse::MetaMany(r)) if r.len() == n => r,
                Ok(other) => every(n, unexpected(other)),
                Err(e) => every(n, e),
            }
        }
    }
}

fn every<T>(n: usize, e: Error) -> Vec<Result<T>> {
    (0..n).map(|_| Err(e.clone())).collect()
}

impl Client {
    /// Writes each `(path, bytes)` as `put_bytes` does, several at once:
    /// one result per item, in the order given.
    pub async fn put_many(&self, items: Vec<(String, Bytes)>, opts: &PutOptions) -> Vec<Result<InodeInfo>> {
        let mut out: Vec<Option<Result<InodeInfo>>> = (0..items.len()).map(|_| None).collect();
        // Small files first, many to a request; what the metadata does not
        // take (too large, its room full) is written as any file.
        let (max, layout_known) = match (self.layout().await, validate_chunk_size(opts.chunk_size)) {
            (Ok(l), Ok(cs)) => (l.inline_max.min(cs), true),
            _ => (0, false),
        };
        let small: Vec<usize> = (0..items.len()).filter(|i| (1..=max).contains(&(items[*i].1.len() as u64))).collect();
        // Those it refused for want of room go straight to the workers.
        let mut refused = vec![false; items.len()];
        for group in small.chunks(MAX_BATCH) {
            match self.put_inline_many(group.iter().map(|i| &items[*i]), opts).await {
                Ok(results) => {
                    for (i, r) in group.iter().zip(results) {
                        match r {
                            Err(e) if e.kind == ErrorKind::PoolFull => refused[*i] = true,
                            r => out[*i] = Some(r),
                        }
                    }
                }
                Err(e) => tracing::debug!("small files written one by one: {e}"),
            }
        }
        let rest: Vec<(usize, (String, Bytes, bool))> = (items.into_iter().zip(refused).enumerate())
            .filter(|(i, _)| out[*i].is_none())
            .map(|(i, ((path, data), refused))| (i, (path, data, !refused)))
            .collect();
        // Small files for the workers, their chunks many to a request
        // (`write_many.rs`), a group of writers at a time.
        let whole = if layout_known { SMALL_MANY_MAX.min(opts.chunk_size) } else { 0 };
        let (small, rest): (Vec<_>, Vec<_>) = rest.into_iter().partition(|(_, (_, data, inline))| {
            let n = data.len() as u64;
            n <= whole && (!*inline || n > max)
        });
        let mut small = small.into_iter().peekable();
        while small.peek().is_some() {
            let (mut group, mut bytes) = (Vec::new(), 0);
            while let Some((_, (_, data, _))) = small.peek() {
                let n = data.len() as u64;
                if !group.is_empty() && (group.len() >= WRITERS_AT_ONCE || bytes + n > WRITERS_BYTES) {
                    break;
                }
                bytes += n;
                group.extend(small.next());
            }
            let items = group.iter().map(|(_, (path, data, _))| (path.clone(), data.clone())).collect();
            for ((i, _), r) in group.iter().zip(self.put_small_many(items, opts).await) {
                out[*i] = Some(r);
            }
        }
        let (c, opts) = (self.clone(), opts.clone());
        let done = each(rest.iter().map(|(_, item)| item.clone()).collect(), move |(path, data, inline)| {
            let (c, opts) = (c.clone(), opts.clone());
            async move { c.put_bytes_as(&path, data, &opts, inline).await }
        })
        .await;
        for ((i, _), r) in rest.iter().zip(done) {
            out[*i] = Some(r);
        }
        out.into_iter().map(|r| r.expect("every item has a result")).collect()
    }

    /// `CommitInline` of each item, in one request: one result per item.
    async fn put_inline_many<'a>(
        &self,
        items: impl Iterator<Item = &'a (String, Bytes)>,
        opts: &PutOptions,
    ) -> Result<Vec<Result<InodeInfo>>> {
        let (mut ops, mut paths, mut datas) = (Vec::new(), Vec::new(), Vec::new());
        for (path, data) in items {
            ops.push(MetaOp::CommitInline {
                path: path.clone(),
                inode: self.alloc_inode().await?,
                data: data.clone(),
                chunk_size: opts.chunk_size,
                attrs: opts.attrs,
                mode: opts.mode,
                overwrite: opts.overwrite,
            });
            paths.push(path);
            datas.push(data.clone());
        }
        let (uid, gid) = self.inner.cfg.owner;
        let results = match self.coord(CoordRequest::MetaMany { ops, owner: Owner { uid, gid } }).await? {
            CoordResponse::MetaMany(r) if r.len() == paths.len() => r,
            other => return Err(unexpected(other)),
        };
        let mut out = Vec::with_capacity(results.len());
        for ((r, path), data) in results.into_iter().zip(paths).zip(datas) {
            out.push(match r {
                Ok(MetaReply::Info(i)) => self.committed(path, with_bytes(i, data)).await,
                Ok(other) => Err(unexpected_meta(other)),
                Err(e) => Err(e),
            });
        }
        Ok(out)
    }

    /// The whole content of each of `paths`, as `get_bytes` reads it,
    /// several at once: one result per path, in the order given.
    pub async fn get_many(&self, paths: Vec<String>) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..paths.len()).map(|_| None).collect();
        // One request stats many: small files held inline come back with
        // it; the others are read as stat'ed there (asked again only if
        // their batch could not be).
        let mut stated: Vec<Option<InodeInfo>> = (0..paths.len()).map(|_| None).collect();
        for (g, group) in paths.chunks(MAX_BATCH).enumerate() {
            let infos = match self.coord(CoordRequest::StatMany { paths: group.to_vec() }).await {
                Ok(CoordResponse::Infos(i)) if i.len() == group.len() => i,
                _ => continue,
            };
            for (j, (info, path)) in infos.into_iter().zip(group).enumerate() {
                let i = g * MAX_BATCH + j;
                match info.and_then(|info| check_readable(path, &info).map(|()| info)) {
                    Err(e) => out[i] = Some(Err(e)),
                    // Beneath an attachment the object is checked first (`bytes_of`).
                    Ok(info) if info.origin.is_some() => stated[i] = Some(info),
                    Ok(info) => match whole_inline(path, &info).transpose() {
                        Some(r) => out[i] = Some(r),
                        None => stated[i] = Some(info),
                    },
                }
            }
        }
        // Small files on the workers, many to a request (`read_many.rs`).
        let small: Vec<(usize, &InodeInfo)> =
            stated.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|info| (i, info))).collect();
        let infos: Vec<&InodeInfo> = small.iter().map(|(_, info)| *info).collect();
        for ((i, _), read) in small.iter().zip(self.read_small_many(&infos).await) {
            out[*i] = read.map(Ok);
        }
        let rest: Vec<(usize, (String, Option<InodeInfo>))> =
            paths.into_iter().zip(stated).enumerate().filter(|(i, _)| out[*i].is_none()).collect();
        let c = self.clone();
        let done = each(rest.iter().map(|(_, item)| item.clone()).collect(), move |(path, info)| {
            let c = c.clone();
            async move {
                match info {
                    // Stat'ed a while ago: a file changed since is read as it is now.
                    Some(info) => match c.bytes_of(&path, &info).await {
                        Err(e) if matches!(e.kind, ErrorKind::Stale | ErrorKind::Lost) => c.get_bytes(&path).await,
                        r => r,
                    },
                    None => c.get_bytes(&path).await,
                }
            }
        })
        .await;
        for ((i, _), r) in rest.iter().zip(done) {
            out[*i] = Some(r);
        }
        out.into_iter().map(|r| r.expect("every path has a result")).collect()
    }
}

/// Runs `work` on every item, up to [`IN_FLIGHT`] at once; the results in
/// the items' order.
async fn each<I, T, F, Fut>(items: Vec<I>, work: F) -> Vec<Result<T>>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let n = items.len();
    let mut out: Vec<Option<Result<T>>> = (0..n).map(|_| None).collect();
    let mut tasks = JoinSet::new();
    let mut items = items.into_iter().enumerate();
    loop {
        while tasks.len() < IN_FLIGHT {
            let Some((i, item)) = items.next() else { break };
            let fut = work(item);
            tasks.spawn(async move { (i, fut.await) });
        }
        match tasks.join_next().await {
            Some(Ok((i, r))) => out[i] = Some(r),
            // A task that panicked: its item is reported below.
            Some(Err(e)) => tracing::error!("a batch item's task failed: {e}"),
            None => break,
        }
    }
    (out.into_iter()).map(|r| r.unwrap_or_else(|| Err(Error::internal("the task of this item failed")))).collect()
}
