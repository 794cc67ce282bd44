//! Writing files: chunks are stored on their workers in parallel, then the
//! file is published by one atomic metadata commit.

use crate::client::{unexpected, unexpected_meta, Client};
use bytes::{Bytes, BytesMut};
use tierpool_meta::{InodeInfo, MetaOp, MetaReply};
use tierpool_proto::{Request, Response};
use tierpool_types::{validate_chunk_size, Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinSet;

/// How a file is written.
#[derive(Clone, Debug)]
pub struct PutOptions {
    pub chunk_size: u64,
    pub attrs: ChunkAttrs,
    pub mode: u32,
    /// Replace an existing file at the path (atomically). Without it, an existing path is `AlreadyExists`.
    pub overwrite: bool,
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions { chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE, attrs: ChunkAttrs::default(), mode: 0o644, overwrite: true }
    }
}

impl Client {
    /// Stores one chunk on the worker that owns its partition.
    pub(crate) async fn put_chunk(&self, key: ChunkKey, data: Bytes, checksum: Checksum, attrs: ChunkAttrs) -> Result<()> {
        let layout = self.layout().await?;
        let owner = layout
            .table
            .locate(key)
            .ok_or_else(|| Error::new(ErrorKind::Unavailable, "the pool has no workers yet"))?;
        let w = layout
            .worker(owner)
            .ok_or_else(|| Error::internal(format!("worker {owner} is in the partition table but unknown")))?;
        let pool = self.worker_pool(w.id, &w.addr);
        match pool.call(&Request::PutChunk { key, checksum, attrs }, &data, true).await {
            Ok((Response::Ok, _)) => Ok(()),
            Ok((other, _)) => Err(unexpected(other)),
            Err(e) if e.kind == ErrorKind::Unavailable => {
                Err(Error::new(ErrorKind::Unavailable, format!("worker {owner} at {} is unreachable: {}", w.addr, e.message)))
            }
            Err(e) => Err(e),
        }
    }

    /// Writes everything `reader` yields to `path`, streaming chunk by chunk.
    pub async fn put_reader<R: AsyncRead + Unpin>(&self, path: &str, mut reader: R, opts: &PutOptions) -> Result<InodeInfo> {
        let chunk_size = validate_chunk_size(opts.chunk_size)?;
        let inode = self.alloc_inode().await?;
        let mut tasks = JoinSet::new();
        let mut checksums = Vec::new();
        let mut size = 0u64;
        let res: Result<()> = async {
            loop {
                let mut buf = BytesMut::with_capacity(chunk_size as usize);
                while (buf.len() as u64) < chunk_size {
                    let mut lim = (&mut reader).take(chunk_size - buf.len() as u64);
                    if lim.read_buf(&mut buf).await.map_err(|e| Error::from(e).context("reading input"))? == 0 {
                        break;
                    }
                }
                if buf.is_empty() {
                    return Ok(());
                }
                let last = (buf.len() as u64) < chunk_size;
                size += buf.len() as u64;
                self.spawn_put(&mut tasks, inode, checksums.len() as u64, buf.freeze(), opts.attrs, &mut checksums).await?;
                if last {
                    return Ok(());
                }
            }
        }
        .await;
        self.finish_put(path, inode, tasks, res, size, chunk_size, checksums, opts).await
    }

    /// Writes `data` to `path`.
    pub async fn put_bytes(&self, path: &str, data: Bytes, opts: &PutOptions) -> Result<InodeInfo> {
        let chunk_size = validate_chunk_size(opts.chunk_size)?;
        let inode = self.alloc_inode().await?;
        let mut tasks = JoinSet::new();
        let mut checksums = Vec::new();
        let mut res = Ok(());
        let mut off = 0usize;
        while off < data.len() && res.is_ok() {
            let end = (off + chunk_size as usize).min(data.len());
            res = self.spawn_put(&mut tasks, inode, checksums.len() as u64, data.slice(off..end), opts.attrs, &mut checksums).await;
            off = end;
        }
        self.finish_put(path, inode, tasks, res, data.len() as u64, chunk_size, checksums, opts).await
    }

    async fn spawn_put(
        &self,
        tasks: &mut JoinSet<Result<()>>,
        inode: InodeId,
        index: u64,
        data: Bytes,
        attrs: ChunkAttrs,
        checksums: &mut Vec<Checksum>,
    ) -> Result<()> {
        while tasks.len() >= self.inner.cfg.window {
            join_one(tasks).await?;
        }
        let crc = crc32c::crc32c(&data);
        checksums.push(crc);
        let key = ChunkKey { inode, index, version: 1 };
        let c = self.clone();
        tasks.spawn(async move { c.put_chunk(key, data, crc, attrs).await });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn finish_put(
        &self,
        path: &str,
        inode: InodeId,
        mut tasks: JoinSet<Result<()>>,
        mut res: Result<()>,
        size: u64,
        chunk_size: u64,
        checksums: Vec<Checksum>,
        opts: &PutOptions,
    ) -> Result<InodeInfo> {
        while !tasks.is_empty() {
            let r = join_one(&mut tasks).await;
            if res.is_ok() {
                res = r;
            }
        }
        if let Err(e) = res {
            self.discard_inode(inode).await;
            return Err(e.context(path));
        }
        let op = MetaOp::CommitFile {
            path: path.into(),
            inode,
            size,
            chunk_size,
            checksums,
            attrs: opts.attrs,
            mode: opts.mode,
            overwrite: opts.overwrite,
        };
        match self.meta(op).await {
            Ok(MetaReply::Info(i)) => Ok(i),
            Ok(other) => Err(unexpected_meta(other)),
            Err(e) => {
                self.discard_inode(inode).await;
                Err(e)
            }
        }
    }
}

async fn join_one(tasks: &mut JoinSet<Result<()>>) -> Result<()> {
    match tasks.join_next().await {
        Some(Ok(r)) => r,
        Some(Err(e)) => Err(Error::internal(format!("chunk transfer task failed: {e}"))),
        None => Ok(()),
    }
}
