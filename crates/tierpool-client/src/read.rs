//! Reading files: chunks are fetched from their workers several at a time,
//! checked against the checksums recorded at commit, and delivered in order.

use crate::client::{unexpected, Client};
use crate::worker_lanes::LANE_CHUNK_MAX;
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::VecDeque;
use tierpool_meta::{InodeInfo, InodeKind};
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Result};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

impl Client {
    /// Chunk `index` of the file `info` (found at `path`), verified: the
    /// chunk's whole share of the file, zeros where nothing was stored.
    pub async fn read_chunk(&self, path: &str, info: &InodeInfo, index: u64) -> Result<Bytes> {
        if info.kind == InodeKind::Region {
            if index >= chunk_count(info) {
                return Err(Error::invalid(format!("{path}: chunk {index} is beyond the end of the region")));
            }
            let len = (info.size - index * info.chunk_size).min(info.chunk_size);
            return self.read_region(path, info, index, 0, len).await;
        }
        if !info.has_chunks() {
            return Err(Error::internal(format!("{path}: read without the file's chunk list")));
        }
        let r = *info
            .chunks
            .get(index as usize)
            .ok_or_else(|| Error::invalid(format!("{path}: chunk {index} is beyond the end of the file")))?;
        let share = (info.size - index * info.chunk_size).min(info.chunk_size);
        if let (true, Some(data)) = (r.is_inline(), &info.inline) {
            return inline_chunk(path, r, data, share);
        }
        match self.fetch_chunk(path, info.id, index, r, share).await {
            Err(e) if e.kind == ErrorKind::Lost => self.when_lost(path, info, index, e).await,
            other => other,
        }
    }

    /// As `read_chunk`, into `dst`, which is exactly the chunk's share of
    /// the file: a chunk stored on the workers is read from the socket
    /// straight into it (no buffer of its own, no copy); any other (a hole,
    /// inline, below, a region's) is read as `read_chunk` reads it, and copied.
    pub(crate) async fn read_chunk_into(&self, path: &str, info: &InodeInfo, index: u64, dst: &mut [u8]) -> Result<()> {
        let r = match info.chunks.get(index as usize) {
            Some(r) if info.kind == InodeKind::File && r.is_stored() && r.len <= dst.len() as u64 => *r,
            _ => {
                let data = self.read_chunk(path, info, index).await?;
                return copy_share(path, index, &data, 0, dst);
            }
        };
        match self.fetch_chunk_into(path, info.id, index, r, dst).await {
            Err(e) if e.kind == ErrorKind::Lost => {
                let data = self.when_lost(path, info, index, e).await?;
                copy_share(path, index, &data, 0, dst)
            }
            other => other,
        }
    }

    /// Chunk `index` of `info` is gone from every copy in the pool: its
    /// bytes from the under-store if that has them, else why it is gone.
    async fn when_lost(&self, path: &str, info: &InodeInfo, index: u64, lost: Error) -> Result<Bytes> {
        if info.origin.as_ref().is_some_and(|o| !o.dirty) {
            tracing::warn!("{}; reading it from its under-store", lost.message);
            return self.below_bytes(info, index).await.map_err(|e| e.context(path));
        }
        Err(self.why_gone(path, info, index, lost).await)
    }

    /// A chunk version this reader resolved is gone. If the file changed
    /// since it was resolved (replaced, rewritten or removed: the old
    /// version was garbage, dropped to make room), the reader is stale and
    /// reading again gives the current contents; otherwise the data is lost.
    async fn why_gone(&self, path: &str, info: &InodeInfo, index: u64, lost: Error) -> Error {
        let was = info.chunks.get(index as usize).copied();
        let stale =
            |how: &str| Error::new(ErrorKind::Stale, format!("{path}: {how} while it was being read; read it again"));
        match self.stat_inode(info.id, true).await {
            Err(e) if e.kind == ErrorKind::NotFound => stale("was removed or replaced"),
            Ok(now) if now.chunks.get(index as usize).copied() != was => stale("was rewritten"),
            _ => lost,
        }
    }

    /// The chunk `index` of inode `inode` that `r` names, verified against
    /// it and padded with zeros to `share` bytes.
    pub async fn fetch_chunk(&self, path: &str, inode: InodeId, index: u64, r: ChunkRef, share: u64) -> Result<Bytes> {
        if r.is_hole() {
            return Ok(Bytes::from(vec![0u8; share as usize]));
        }
        if r.is_below() {
            return Box::pin(self.load_below(inode, index)).await.map_err(|e| e.context(path));
        }
        if r.is_inline() {
            // Held by the metadata: asked for with the file's chunk list.
            let info = self.stat_inode(inode, true).await.map_err(|e| e.context(path))?;
            return match (info.chunks.get(index as usize), &info.inline) {
                (Some(now), Some(data)) if *now == r => inline_chunk(path, r, data, share),
                _ => Err(Error::new(ErrorKind::Stale, format!("{path}: was rewritten while it was being read"))),
            };
        }
        if r.len <= share && r.len as usize <= LANE_CHUNK_MAX {
            // Into a buffer of its own length, so that it may share a
            // request with others (`worker_lanes.rs`).
            let mut out = vec![0u8; share as usize];
            self.fetch_chunk_into(path, inode, index, r, &mut out).await?;
            return Ok(Bytes::from(out));
        }
        let (key, req, repair) = stored_read(inode, index, r);
        let data = match self.read_replicas(key, &req, stored_check(path, index, r), Some(&repair)).await {
            Ok((_, data)) => data,
            Err(e) => return Err(fetch_error(path, index, e)),
        };
        if r.len >= share {
            return Ok(data);
        }
        let mut padded = Vec::with_capacity(share as usize);
        padded.extend_from_slice(&data);
        padded.resize(share as usize, 0);
        Ok(Bytes::from(padded))
    }

    /// As `fetch_chunk`, for a chunk `r` stored on the workers and at most
    /// `dst.len()` long: read into `dst` (from the socket, as it comes when
    /// it is as long), zeros after it.
    async fn fetch_chunk_into(
        &self,
        path: &str,
        inode: InodeId,
        index: u64,
        r: ChunkRef,
        dst: &mut [u8],
    ) -> Result<()> {
        let (key, req, repair) = stored_read(inode, index, r);
        let (stored, after) = dst.split_at_mut(r.len as usize);
        match self.read_replicas_into(key, &req, stored_check(path, index, r), Some(&repair), Some(stored)).await {
            Ok((_, None)) => {}
            // Checked: exactly `r.len` bytes.
            Ok((_, Some(data))) => stored.copy_from_slice(&data),
            Err(e) => return Err(fetch_error(path, index, e)),
        }
        after.fill(0);
        Ok(())
    }

    /// Streams the file at `path` into `writer`; returns the bytes written.
    pub async fn get_writer<W: AsyncWrite + Unpin>(&self, path: &str, writer: &mut W) -> Result<u64> {
        let info = self.stat(path).await?;
        check_readable(path, &info)?;
        self.check_origin(path, &info).await?;
        let mut n = 0;
        let mut chunks = self.chunk_stream(path, &info);
        while let Some(data) = chunks.next().await? {
            writer.write_all(&data).await.map_err(|e| Error::from(e).context("writing output"))?;
            n += data.len() as u64;
        }
        writer.flush().await.map_err(|e| Error::from(e).context("writing output"))?;
        Ok(n)
    }

    /// Reads bytes of the file `info` starting at `offset` into `buf`, fetching
    /// the chunks it spans several at a time (`window`), each chunk that
    /// `buf` takes whole read straight into its place. Returns how many
    /// bytes were read (fewer than `buf.len()` only at the end of the file).
    pub async fn read_at(&self, path: &str, info: &InodeInfo, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if offset >= info.size || buf.is_empty() {
            return Ok(0);
        }
        let end = (offset + buf.len() as u64).min(info.size);
        let cs = info.chunk_size;
        let n = (end - offset) as usize;
        // Each chunk's part of `buf`, and where in the chunk it starts.
        let mut parts = Vec::new();
        let mut rest = &mut buf[..n];
        for idx in offset / cs..=(end - 1) / cs {
            let start = idx * cs;
            let from = offset.max(start) - start;
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(((end - start).min(cs) - from) as usize);
            rest = tail;
            parts.push((idx, from, part));
        }
        let (mut parts, mut running) = (parts.into_iter(), FuturesUnordered::new());
        loop {
            while running.len() < self.inner.cfg.window.max(1) {
                let Some((idx, from, part)) = parts.next() else { break };
                running.push(self.read_part(path, info, idx, from, part));
            }
            match running.next().await {
                Some(r) => r?,
                None => break,
            }
        }
        Ok(n)
    }

    /// Bytes of chunk `idx` of `info` from `from` into `part`: straight
    /// into it if that is the chunk's whole share of the file.
    async fn read_part(&self, path: &str, info: &InodeInfo, idx: u64, from: u64, part: &mut [u8]) -> Result<()> {
        let cs = info.chunk_size;
        if from == 0 && part.len() as u64 == (info.size - idx * cs).min(cs) {
            return self.read_chunk_into(path, info, idx, part).await;
        }
        let data = self.read_chunk(path, info, idx).await?;
        copy_share(path, idx, &data, from as usize, part)
    }

    /// The whole file in memory (for small files and tests).
    pub async fn get_bytes(&self, path: &str) -> Result<Vec<u8>> {
        let info = self.stat(path).await?;
        self.bytes_of(path, &info).await
    }

    /// The whole file `info` (`path`'s inode as just stat'ed) in memory.
    pub(crate) async fn bytes_of(&self, path: &str, info: &InodeInfo) -> Result<Vec<u8>> {
        check_readable(path, info)?;
        self.check_origin(path, info).await?;
        // Sized once and filled in place: no regrowth, one copy per byte.
        let mut out = vec![0u8; info.size as usize];
        let n = self.read_at(path, info, 0, &mut out).await?;
        out.truncate(n);
        Ok(out)
    }

    /// Chunks of a file in order, up to `window` fetched ahead.
    pub fn chunk_stream(&self, path: &str, info: &InodeInfo) -> ChunkStream {
        ChunkStream {
            client: self.clone(),
            path: path.to_string(),
            info: info.clone(),
            next: 0,
            inflight: VecDeque::new(),
        }
    }
}

/// An ordered, read-ahead stream of a file's verified chunks.
pub struct ChunkStream {
    client: Client,
    path: String,
    info: InodeInfo,
    next: u64,
    inflight: VecDeque<JoinHandle<Result<Bytes>>>,
}

impl ChunkStream {
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        let total = chunk_count(&self.info);
        if self.inflight.is_empty() && self.next + 1 == total {
            // The last chunk, none fetched ahead (all of a small file): on this task.
            self.next += 1;
            return self.client.read_chunk(&self.path, &self.info, total - 1).await.map(Some);
        }
        while self.inflight.len() < self.client.inner.cfg.window && self.next < total {
            let (c, p, i, idx) = (self.client.clone(), self.path.clone(), self.info.clone(), self.next);
            let fetch = self.client.runtime().spawn(async move { c.read_chunk(&p, &i, idx).await });
            self.inflight.push_back(fetch);
            self.next += 1;
        }
        match self.inflight.pop_front() {
            None => Ok(None),
            Some(h) => h.await.map_err(|e| Error::internal(format!("chunk fetch task failed: {e}")))?.map(Some),
        }
    }
}

impl Drop for ChunkStream {
    fn drop(&mut self) {
        for h in &self.inflight {
            h.abort();
        }
    }
}

/// All the bytes of the file `info` (found at `path`) if its stat carried
/// them: an empty file, or one whose only chunk the metadata holds inline.
/// `None` when they must be read from the workers.
pub(crate) fn whole_inline(path: &str, info: &InodeInfo) -> Result<Option<Vec<u8>>> {
    match (info.kind, info.chunks.as_slice(), &info.inline) {
        (InodeKind::File, [], _) if info.size == 0 => Ok(Some(Vec::new())),
        (InodeKind::File, [r], Some(data)) if r.is_inline() => {
            Ok(Some(inline_chunk(path, *r, data, info.size.min(info.chunk_size))?.to_vec()))
        }
        _ => Ok(None),
    }
}

/// The chunk `r` whose bytes the metadata held inline (`data`), verified
/// against it and padded with zeros to `share` bytes.
fn inline_chunk(path: &str, r: ChunkRef, data: &Bytes, share: u64) -> Result<Bytes> {
    if data.len() as u64 != r.len || crc32c::crc32c(data) != r.checksum {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("{path}: its bytes held inline do not match their checksum"),
        ));
    }
    if r.len >= share {
        return Ok(data.clone());
    }
    let mut padded = Vec::with_capacity(share as usize);
    padded.extend_from_slice(data);
    padded.resize(share as usize, 0);
    Ok(Bytes::from(padded))
}

/// The key of the stored chunk `r` (chunk `index` of `inode`), the request
/// that reads it, and the one that writes it back to a damaged replica.
fn stored_read(inode: InodeId, index: u64, r: ChunkRef) -> (ChunkKey, WorkerRequest, impl Fn() -> WorkerRequest) {
    let key = r.key(inode, index);
    let repair = move || WorkerRequest::PutChunk { key, checksum: r.checksum, attrs: Default::default(), table: 0 };
    (key, WorkerRequest::GetChunk { key, mem_only: false }, repair)
}

/// Checks a worker's answer for the stored chunk `r`: its length and checksum.
fn stored_check(path: &str, index: u64, r: ChunkRef) -> impl Fn(&WorkerResponse, &[u8]) -> Result<()> + '_ {
    move |resp: &WorkerResponse, data: &[u8]| match resp {
        WorkerResponse::Chunk if data.len() as u64 == r.len && crc32c::crc32c(data) == r.checksum => Ok(()),
        WorkerResponse::Chunk => Err(Error::new(
            ErrorKind::Corrupt,
            format!("{path}: chunk {index} from its worker does not match its checksum"),
        )),
        other => Err(unexpected(other.clone())),
    }
}

/// What reading a stored chunk from its replicas failed with, as its reader says it.
fn fetch_error(path: &str, index: u64, e: Error) -> Error {
    match e.kind {
        ErrorKind::NotFound => Error::new(ErrorKind::Lost, format!("{path}: chunk {index} is lost: {}", e.message)),
        ErrorKind::Corrupt if e.message.starts_with(path) => e,
        _ => e.context(format!("{path}: chunk {index}")),
    }
}

/// Copies `dst.len()` bytes of chunk `index` (`data`, its share of the
/// file) from `from` into `dst`.
fn copy_share(path: &str, index: u64, data: &[u8], from: usize, dst: &mut [u8]) -> Result<()> {
    match data.get(from..from + dst.len()) {
        Some(src) => {
            dst.copy_from_slice(src);
            Ok(())
        }
        None => Err(Error::new(ErrorKind::Corrupt, format!("{path}: chunk {index} is shorter than recorded"))),
    }
}

/// Whether `info` has bytes to read: a file or a region.
pub fn check_readable(path: &str, info: &InodeInfo) -> Result<()> {
    match info.kind {
        InodeKind::File | InodeKind::Region => Ok(()),
        InodeKind::Dir => Err(Error::new(ErrorKind::IsADirectory, format!("{path}: is a directory"))),
        InodeKind::Symlink => Err(Error::invalid(format!("{path}: is a symbolic link to {}", info.target))),
        _ => Err(Error::invalid(format!("{path}: is a special file, not a file of the pool"))),
    }
}

/// Chunks of a file or region (none for other kinds).
pub fn chunk_count(info: &InodeInfo) -> u64 {
    match info.kind {
        InodeKind::File => info.chunks.len() as u64,
        InodeKind::Region => info.size.div_ceil(info.chunk_size.max(1)),
        _ => 0,
    }
}
