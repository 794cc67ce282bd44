//! Reading files: chunks are fetched from their workers several at a time,
//! checked against the checksums recorded at commit, and delivered in order.

use crate::client::{unexpected, Client};
use bytes::Bytes;
use std::collections::VecDeque;
use tierpool_meta::{InodeInfo, InodeKind};
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkRef, Error, ErrorKind, InodeId, Result};
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
            // Every copy in the pool is gone, but the under-store has the bytes.
            Err(e) if e.kind == ErrorKind::Lost && info.origin.as_ref().is_some_and(|o| !o.dirty) => {
                tracing::warn!("{}; reading it from its under-store", e.message);
                self.below_bytes(info, index).await.map_err(|e| e.context(path))
            }
            Err(e) if e.kind == ErrorKind::Lost => Err(self.why_gone(path, info, index, e).await),
            other => other,
        }
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
        let key = r.key(inode, index);
        let check = |resp: &WorkerResponse, data: &Bytes| match resp {
            WorkerResponse::Chunk if data.len() as u64 == r.len && crc32c::crc32c(data) == r.checksum => Ok(()),
            WorkerResponse::Chunk => Err(Error::new(
                ErrorKind::Corrupt,
                format!("{path}: chunk {index} from its worker does not match its checksum"),
            )),
            other => Err(unexpected(other.clone())),
        };
        let repair =
            |_: &Bytes| WorkerRequest::PutChunk { key, checksum: r.checksum, attrs: Default::default(), table: 0 };
        let data = match self
            .read_replicas(key, &WorkerRequest::GetChunk { key, mem_only: false }, check, Some(&repair))
            .await
        {
            Ok((_, data)) => data,
            Err(e) if e.kind == ErrorKind::NotFound => {
                return Err(Error::new(ErrorKind::Lost, format!("{path}: chunk {index} is lost: {}", e.message)))
            }
            Err(e) if e.kind == ErrorKind::Corrupt && e.message.starts_with(path) => return Err(e),
            Err(e) => return Err(e.context(format!("{path}: chunk {index}"))),
        };
        if r.len >= share {
            return Ok(data);
        }
        let mut padded = Vec::with_capacity(share as usize);
        padded.extend_from_slice(&data);
        padded.resize(share as usize, 0);
        Ok(Bytes::from(padded))
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
    /// the chunks it spans in parallel. Returns how many bytes were read
    /// (fewer than `buf.len()` only at the end of the file).
    pub async fn read_at(&self, path: &str, info: &InodeInfo, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if offset >= info.size || buf.is_empty() {
            return Ok(0);
        }
        let end = (offset + buf.len() as u64).min(info.size);
        let cs = info.chunk_size;
        let (first, last) = (offset / cs, (end - 1) / cs);
        if first == last {
            // Within one chunk (all of a small file): fetched on this task.
            let data = self.read_chunk(path, info, first).await?;
            let from = (offset - first * cs) as usize;
            let to = ((end - first * cs) as usize).min(data.len());
            buf[..to - from].copy_from_slice(&data[from..to]);
            return Ok(to - from);
        }
        let mut pending = VecDeque::new();
        let mut next = first;
        let mut filled = 0usize;
        while filled < (end - offset) as usize {
            while pending.len() < self.inner.cfg.window && next <= last {
                let (c, p, i, idx) = (self.clone(), path.to_string(), info.clone(), next);
                pending.push_back((idx, tokio::spawn(async move { c.read_chunk(&p, &i, idx).await })));
                next += 1;
            }
            let (idx, h) = pending.pop_front().expect("a chunk is pending while bytes are missing");
            let data = h.await.map_err(|e| Error::internal(format!("chunk fetch task failed: {e}")))??;
            let chunk_start = idx * cs;
            let from = (offset.max(chunk_start) - chunk_start) as usize;
            let to = ((end - chunk_start) as usize).min(data.len());
            buf[filled..filled + (to - from)].copy_from_slice(&data[from..to]);
            filled += to - from;
        }
        Ok(filled)
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
            self.inflight.push_back(tokio::spawn(async move { c.read_chunk(&p, &i, idx).await }));
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
