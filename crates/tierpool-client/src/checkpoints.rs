//! Checkpoints of regions: a region's chunks are copied on the workers
//! that hold them (no byte crosses the network), except the chunks whose
//! bytes equal those of the newest earlier checkpoint, which it shares;
//! then the coordinator records the copies as a snapshot of the region,
//! read at `PATH/.snapshots/NAME` and opened read-only as a region.
//!
//! Restoring copies a checkpoint's chunks back over the region's, between
//! two marks at the coordinator (see `tierpool_meta`'s checkpoints): it is
//! refused while another client has the region open, and a restore that
//! stopped half way leaves the region marked until it is run again.

use crate::client::{unexpected, unexpected_meta, Client};
use serde::{Deserialize, Serialize};
use tierpool_meta::{InodeInfo, MetaOp, MetaReply, SNAPSHOTS};
use tierpool_proto::{CoordRequest, CoordResponse, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, ChunkRef, Error, ErrorKind, Result};

/// Chunk copies in flight during a checkpoint or a restore.
const COPY_WINDOW: usize = 16;

/// Told the bytes of the region handled so far, and its size.
pub type Progress<'a> = &'a mut (dyn FnMut(u64, u64) + Send);

/// What a checkpoint or a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointReport {
    pub path: String,
    pub name: String,
    /// Chunks of the region.
    pub chunks: u64,
    /// Chunks copied (the others were unchanged).
    pub copied: u64,
    /// Bytes copied on the workers (once per copy of a chunk).
    pub bytes_copied: u64,
    /// Of a checkpoint: the earlier checkpoint it shares unchanged chunks with.
    pub since: Option<String>,
}

impl Client {
    /// Takes checkpoint `name` of the region at `path`: only the chunks
    /// changed since the newest earlier checkpoint are copied. Writes still
    /// in a handle's cache are not in it: flush them first.
    pub async fn checkpoint(&self, path: &str, name: &str) -> Result<CheckpointReport> {
        self.checkpoint_with(path, name, &mut |_, _| {}).await
    }

    /// [`checkpoint`](Self::checkpoint), telling `progress` how far it got.
    pub async fn checkpoint_with(&self, path: &str, name: &str, progress: Progress<'_>) -> Result<CheckpointReport> {
        let info = self.open_region(path).await?;
        let earlier = self.newest_checkpoint(path, &info, name).await?;
        let _lease = self.lease(info.id);
        let version = self.alloc_inode().await?.0;
        let plan = |index: u64| {
            let unless =
                earlier.as_ref().and_then(|(_, e)| e.chunks.get(index as usize)).map(|r| r.key(info.id, index));
            (ChunkKey::hashed(info.id, index, 1), ChunkKey::hashed(info.id, index, version), unless)
        };
        let copies = self.copy_chunks(path, &info, plan, None, progress).await?;
        let mut report = CheckpointReport {
            path: path.to_owned(),
            name: name.to_owned(),
            chunks: copies.len() as u64,
            since: earlier.as_ref().map(|(n, _)| n.clone()),
            ..Default::default()
        };
        let mut chunks = Vec::with_capacity(copies.len());
        for (index, (len, checksum, copied)) in copies.into_iter().enumerate() {
            if copied {
                report.copied += 1;
                report.bytes_copied += len * u64::from(info.replicas.max(1));
                chunks.push(ChunkRef { version, len, checksum, home: None });
            } else {
                let (_, e) = earlier.as_ref().expect("only a chunk an earlier checkpoint holds is left uncopied");
                chunks.push(e.chunks[index]);
            }
        }
        let op = MetaOp::Checkpoint { path: path.into(), name: name.into(), inode: info.id, version, chunks };
        self.meta(op).await?;
        Ok(report)
    }

    /// Brings the region at `path` back to its checkpoint `name`: the
    /// chunks that differ from the checkpoint's are copied back. `Busy` if
    /// any client, this one included, has a handle of the region open that
    /// may write (read-only handles sharing pages through `/dev/shm` are
    /// not known to the pool: they must not be open during a restore).
    pub async fn restore_region(&self, path: &str, name: &str) -> Result<CheckpointReport> {
        self.restore_region_with(path, name, &mut |_, _| {}).await
    }

    /// [`restore_region`](Self::restore_region), telling `progress` how far it got.
    pub async fn restore_region_with(
        &self,
        path: &str,
        name: &str,
        progress: Progress<'_>,
    ) -> Result<CheckpointReport> {
        // The coordinator refuses other clients' handles; this one's own
        // would keep serving the pages being replaced.
        let live = self.stat(path).await?;
        if self.is_leased(live.id) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{path}: the region is open in this client; close it before restoring it"),
            ));
        }
        let (uid, gid) = self.inner.cfg.owner;
        let owner = tierpool_meta::Owner { uid, gid };
        let req =
            CoordRequest::RestoreRegion { session: self.inner.session, path: path.into(), name: name.into(), owner };
        // The answer is the checkpoint, with its chunk versions.
        let ckpt = match self.coord(req).await? {
            CoordResponse::Meta(MetaReply::Info(i)) => i,
            CoordResponse::Meta(other) => return Err(unexpected_meta(other)),
            other => return Err(unexpected(other)),
        };
        // Copied to as many copies as the region keeps now (the checkpoint
        // may have been taken with fewer).
        let info = live;
        if ckpt.id != info.id || ckpt.chunks.len() as u64 != info.size.div_ceil(info.chunk_size.max(1)) {
            return Err(Error::internal(format!("{path}@{name}: the checkpoint does not fit the region")));
        }
        let plan = |index: u64| {
            let live = ChunkKey::hashed(info.id, index, 1);
            (ckpt.chunks[index as usize].key(info.id, index), live, Some(live))
        };
        let copies = self.copy_chunks(path, &info, plan, Some(&ckpt), progress).await?;
        let copied: Vec<_> = copies.iter().filter(|c| c.2).collect();
        self.meta(MetaOp::RegionRestore { path: path.into(), name: name.into(), done: true }).await?;
        Ok(CheckpointReport {
            path: path.to_owned(),
            name: name.to_owned(),
            chunks: copies.len() as u64,
            copied: copied.len() as u64,
            bytes_copied: copied.iter().map(|c| c.0 * u64::from(info.replicas.max(1))).sum(),
            since: None,
        })
    }

    /// Checkpoint `name` of the region at `path`, with its chunk versions
    /// (what a read-only region handle of it reads).
    pub async fn checkpoint_info(&self, path: &str, name: &str) -> Result<InodeInfo> {
        let at = format!("{}/{SNAPSHOTS}/{name}", path.trim_end_matches('/'));
        let info = self.stat(&at).await?;
        if info.kind != tierpool_meta::InodeKind::Region {
            return Err(Error::invalid(format!("{path}@{name}: is a snapshot of a file or tree, not a checkpoint")));
        }
        Ok(info)
    }

    /// The newest checkpoint of the region `info` at `path` (none if it
    /// has none); `AlreadyExists` if it has one named `name`.
    async fn newest_checkpoint(&self, path: &str, info: &InodeInfo, name: &str) -> Result<Option<(String, InodeInfo)>> {
        let mut all = self.snapshots(Some(path)).await?;
        if all.iter().any(|s| s.name == name) {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{path}@{name}: a snapshot of that name exists")));
        }
        all.sort_by_key(|s| std::cmp::Reverse(s.created));
        for s in all {
            match self.checkpoint_info(path, &s.name).await {
                Ok(c) if c.id == info.id && c.chunks.len() as u64 == info.size.div_ceil(info.chunk_size.max(1)) => {
                    return Ok(Some((s.name, c)))
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::InvalidArgument) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Copies every chunk of region `info` on its workers as `plan(index)`
    /// says (`from`, `to`, `unless`), `COPY_WINDOW` at a time; returns
    /// each chunk's length, checksum and whether it was copied. Restoring
    /// checkpoint `restore`, a chunk whose copy a replica lacks (one added
    /// since, or one that lost it) is read from a replica that has it and
    /// written over the region's chunk through the client.
    async fn copy_chunks(
        &self,
        path: &str,
        info: &InodeInfo,
        plan: impl Fn(u64) -> (ChunkKey, ChunkKey, Option<ChunkKey>),
        restore: Option<&InodeInfo>,
        progress: Progress<'_>,
    ) -> Result<Vec<(u64, u32, bool)>> {
        let count = info.size.div_ceil(info.chunk_size.max(1));
        let mut handled = 0;
        progress(0, info.size);
        let mut out = vec![(0, 0, false); count as usize];
        let mut tasks = tokio::task::JoinSet::new();
        let (mut next, mut failed) = (0, None);
        loop {
            while failed.is_none() && next < count && tasks.len() < COPY_WINDOW {
                let (from, to, unless) = plan(next);
                let (c, index, copies) = (self.clone(), next, info.replicas);
                let through = restore.map(|ckpt| (path.to_owned(), info.clone(), ckpt.chunks[next as usize]));
                tasks.spawn(async move {
                    let copied = match c.copy_chunk(from, to, unless, copies).await {
                        Err(e) if e.kind == ErrorKind::NotFound => match through {
                            Some((path, live, r)) => c.copy_through(&path, &live, index, r).await,
                            None => Err(e),
                        },
                        other => other,
                    };
                    (index, copied)
                });
                next += 1;
            }
            let Some(r) = tasks.join_next().await else { break };
            match r.map_err(|e| Error::internal(format!("chunk copy task failed: {e}"))) {
                Ok((index, Ok(c))) => {
                    out[index as usize] = c;
                    handled += c.0;
                    progress(handled, info.size);
                }
                Ok((index, Err(e))) => {
                    failed.get_or_insert(e.context(format!("{path}: chunk {index}")));
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Version `r` of chunk `index` of region `live` (at `path`) read from
    /// a replica that has it and written over the region's chunk.
    async fn copy_through(&self, path: &str, live: &InodeInfo, index: u64, r: ChunkRef) -> Result<(u64, u32, bool)> {
        let data = self.fetch_chunk(path, live.id, index, r, r.len).await?;
        self.write_region(path, live, index, &[(0, &data)]).await?;
        Ok((r.len, r.checksum, true))
    }

    /// One chunk copied on each of its replicas. Should the replicas
    /// disagree on whether `unless` holds the bytes already, every one
    /// copies (so each holds the version the answer names); should they
    /// copy different bytes (the region was written meanwhile), it is
    /// copied again, and after three tries `Busy`.
    async fn copy_chunk(
        &self,
        from: ChunkKey,
        to: ChunkKey,
        unless: Option<ChunkKey>,
        copies: u8,
    ) -> Result<(u64, u32, bool)> {
        let mut unless = unless;
        for _ in 0..3 {
            let req = WorkerRequest::CopyChunk { from, to, unless, table: 0 };
            let answers = self.ask_replicas(to, copies, &req, &[]).await?;
            let mut seen = Vec::new();
            for a in answers {
                match a {
                    WorkerResponse::ChunkCopied { len, checksum, copied } => seen.push((len, checksum, copied)),
                    other => return Err(unexpected(other)),
                }
            }
            let first = *seen.first().ok_or_else(|| Error::new(ErrorKind::Unavailable, "no replica answered"))?;
            if seen.iter().all(|s| *s == first) {
                return Ok(first);
            }
            unless = None;
        }
        Err(Error::new(
            ErrorKind::Busy,
            format!("chunk {from}: its replicas kept changing while they copied it: stop writing the region meanwhile"),
        ))
    }
}
