//! Copies per path: setting how many copies of each chunk a file or tree
//! keeps (and making or dropping the copies of what exists), and `fsck`.
//!
//! Raising the count copies every chunk of the files concerned from a
//! replica that has it to every worker that is to hold one now; lowering it
//! deletes the copies beyond the new count. New files inherit their
//! directory's count, so nothing else is needed for them.

use crate::client::{unexpected, unexpected_meta, Client};
use tierpool_meta::{InodeInfo, InodeKind, MetaOp, MetaReply};
use tierpool_proto::{CoordRequest, CoordResponse, FsckEntry, WorkerRequest};
use tierpool_types::{ChunkKey, ErrorKind, Result};

/// What a change of copies did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replicated {
    /// Files and regions whose count changed.
    pub files: u64,
    /// Chunks copied to new replicas, or whose extra copies were dropped.
    pub chunks: u64,
    /// Bytes of those chunks.
    pub bytes: u64,
}

impl Client {
    /// Makes `path` (with `recursive`, everything beneath it too) keep
    /// `replicas` copies of each chunk, copying or dropping copies of the
    /// chunks that exist; `progress(done, total)` is told the bytes handled.
    pub async fn set_replicas(
        &self,
        path: &str,
        replicas: u8,
        recursive: bool,
        progress: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Replicated> {
        let op = MetaOp::SetReplicas { path: path.into(), replicas, recursive };
        let changed = match self.meta(op).await? {
            MetaReply::Replicas { changed } => changed,
            other => return Err(unexpected_meta(other)),
        };
        self.inner.dir_placing.forget();
        let mut files = Vec::new();
        for (id, before, after) in changed {
            match self.stat_inode(id, true).await {
                Ok(info) => files.push((info, before, after)),
                Err(e) if e.kind == ErrorKind::NotFound => {} // removed meanwhile
                Err(e) => return Err(e),
            }
        }
        let total: u64 = files.iter().map(|(i, _, _)| i.size).sum();
        let mut out = Replicated { files: files.len() as u64, ..Replicated::default() };
        progress(0, total);
        for (info, before, after) in files {
            for (len, key) in chunks_of(&info) {
                if after > before {
                    self.copy_up(path, &info, key, len, after).await?;
                } else {
                    self.drop_extra(key, after, before).await;
                }
                out.chunks += 1;
                out.bytes += len;
                progress(out.bytes, total);
            }
        }
        Ok(out)
    }

    /// Brings every chunk of `info` (at `path`) from `before` copies to
    /// `after`: copies the missing ones from a replica that has it, or
    /// drops the extra ones (best effort).
    pub(crate) async fn change_copies(&self, path: &str, info: &InodeInfo, before: u8, after: u8) -> Result<()> {
        for (len, key) in chunks_of(info) {
            if after > before {
                self.copy_up(path, info, key, len, after).await?;
            } else {
                self.drop_extra(key, after, before).await;
            }
        }
        Ok(())
    }

    /// Copies chunk `key` (`len` bytes) of `info` to every worker that is
    /// to hold one of its `copies`.
    async fn copy_up(&self, path: &str, info: &InodeInfo, key: ChunkKey, len: u64, copies: u8) -> Result<()> {
        if info.kind == InodeKind::Region {
            let data = self.read_region(path, info, key.index, 0, len).await?;
            let create = WorkerRequest::CreateChunk { key, len, attrs: info.attrs, table: 0 };
            self.write_replicas(key, copies, &create, &[]).await?;
            let write =
                WorkerRequest::WriteRanges { key, ranges: vec![(0, len)], checksum: crc32c::crc32c(&data), table: 0 };
            return self.write_replicas(key, copies, &write, &data).await;
        }
        let r = info.chunks[key.index as usize];
        let data = self.fetch_chunk(path, info.id, key.index, r, r.len).await?;
        let put = WorkerRequest::PutChunk { key, checksum: r.checksum, attrs: info.attrs, table: 0 };
        self.write_replicas(key, copies, &put, &data).await
    }

    /// Deletes the copies of `key` beyond the first `keep` (up to `had`).
    /// Best effort: a copy left behind goes with its file.
    async fn drop_extra(&self, key: ChunkKey, keep: u8, had: u8) {
        let Ok(layout) = self.layout().await else { return };
        let t = &layout.table;
        let req = WorkerRequest::DeleteChunks { keys: vec![key] };
        for s in t.slots_of(t.partition(key)).skip(usize::from(keep)).take(usize::from(had.saturating_sub(keep))) {
            let Some(w) = t.owner(s).and_then(|w| layout.worker(w)) else { continue };
            if let Err(e) = self.worker_pool(w.id, &w.addr).call(&req, &[], true).await {
                tracing::debug!("dropping an extra copy of chunk {key} from worker {}: {e}", w.id);
            }
        }
    }

    /// Files and regions at or under `path` with chunks short of copies,
    /// or with none left, as the coordinator knows the workers now.
    pub async fn fsck(&self, path: &str) -> Result<Vec<FsckEntry>> {
        match self.coord(CoordRequest::Fsck { path: path.into() }).await? {
            CoordResponse::Fsck(entries) => Ok(entries),
            other => Err(unexpected(other)),
        }
    }
}

/// `(length, key)` of each chunk of a file or region that holds data.
fn chunks_of(info: &InodeInfo) -> Vec<(u64, ChunkKey)> {
    match info.kind {
        InodeKind::File => (info.chunks.iter().enumerate())
            .filter(|(_, c)| c.is_stored())
            .map(|(i, c)| (c.len, c.key(info.id, i as u64)))
            .collect(),
        InodeKind::Region => {
            let cs = info.chunk_size.max(1);
            (0..info.size.div_ceil(cs))
                .map(|i| ((info.size - i * cs).min(cs), ChunkKey::hashed(info.id, i, 1)))
                .collect()
        }
        _ => Vec::new(),
    }
}
