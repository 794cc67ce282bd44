//! Regions at the pool: allocation with the space taken up front, and
//! page-range reads and writes of their chunks.
//!
//! A region's chunks are created zero-filled on their workers before the
//! region is published, so allocation fails at once with `PoolFull` when the
//! pool cannot hold it, and a missing chunk later always means lost data,
//! never "not written yet". Chunks change in place (version 1); every
//! transfer carries a CRC-32C of its bytes, checked on arrival.

use crate::client::{unexpected, unexpected_meta, Client};
use bytes::Bytes;
use tierpool_meta::{InodeInfo, InodeKind, MetaOp, MetaReply};
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{validate_chunk_size, ByteSize, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};

/// Chunk creations in flight during an allocation.
const CREATE_WINDOW: usize = 16;

/// How a region is laid out and kept.
#[derive(Clone, Debug)]
pub struct RegionOptions {
    pub chunk_size: u64,
    pub attrs: ChunkAttrs,
    pub mode: u32,
}

impl Default for RegionOptions {
    fn default() -> Self {
        RegionOptions { chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE, attrs: ChunkAttrs::default(), mode: 0o644 }
    }
}

impl Client {
    /// Allocates a region of `size` bytes at `path`, zero-filled. The space
    /// is taken now: `PoolFull` (with nothing left behind) if the pool cannot
    /// hold it, `AlreadyExists` if `path` exists.
    pub async fn alloc_region(&self, path: &str, size: u64, opts: &RegionOptions) -> Result<InodeInfo> {
        if size == 0 {
            return Err(Error::invalid(format!("{path}: a region needs at least one byte")));
        }
        validate_chunk_size(opts.chunk_size).map_err(|e| e.context(path.to_string()))?;
        match self.stat(path).await {
            Ok(_) => return Err(Error::new(ErrorKind::AlreadyExists, format!("{path}: file exists"))),
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let inode = self.alloc_inode().await?;
        let _lease = self.lease(inode);
        self.reserve_region(path, inode, size, opts).await
    }

    /// Creates the chunks of region `inode` and publishes it.
    async fn reserve_region(&self, path: &str, inode: InodeId, size: u64, opts: &RegionOptions) -> Result<InodeInfo> {
        let chunks = size.div_ceil(opts.chunk_size);
        let copies = self.remembered_placing(path, true).await?.copies;
        // Creations run CREATE_WINDOW at a time; after a failure no new one
        // starts, and those in flight finish before the cleanup, so none can
        // land after it.
        let mut tasks = tokio::task::JoinSet::new();
        let (mut index, mut failed) = (0, None);
        loop {
            while failed.is_none() && index < chunks && tasks.len() < CREATE_WINDOW {
                let key = ChunkKey::hashed(inode, index, 1);
                let len = (size - index * opts.chunk_size).min(opts.chunk_size);
                let req = WorkerRequest::CreateChunk { key, len, attrs: opts.attrs, table: 0 };
                let c = self.clone();
                tasks.spawn(async move { c.write_replicas(key, copies, &req, &[]).await });
                index += 1;
            }
            let Some(r) = tasks.join_next().await else { break };
            if let Err(e) = r.map_err(|e| Error::internal(format!("chunk creation task failed: {e}"))).and_then(|r| r) {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            self.discard_inode(inode).await;
            return Err(match e.kind {
                ErrorKind::PoolFull => {
                    let why = e.message.strip_prefix("pool full: ").unwrap_or(&e.message);
                    Error::new(
                        ErrorKind::PoolFull,
                        format!("{path}: pool full: cannot reserve {}: {why}", ByteSize(size)),
                    )
                }
                _ => e.context(format!("{path}: allocating")),
            });
        }
        let op = MetaOp::CommitRegion {
            path: path.to_string(),
            inode,
            size,
            chunk_size: opts.chunk_size,
            attrs: opts.attrs,
            mode: opts.mode,
        };
        match self.meta(op).await {
            Ok(MetaReply::Info(info)) => Ok(info),
            Ok(other) => Err(unexpected_meta(other)),
            Err(e) => {
                self.discard_inode(inode).await;
                Err(e)
            }
        }
    }

    /// [`alloc_region`](Self::alloc_region), then opens the new region with a
    /// local cache of `cache` bytes. The [`Region`](crate::Region)'s calls
    /// block: use it from outside the runtime's threads.
    pub async fn alloc(&self, path: &str, size: u64, opts: &RegionOptions, cache: u64) -> Result<crate::Region> {
        let info = self.alloc_region(path, size, opts).await?;
        let r = crate::Region::open(self.clone(), self.runtime().clone(), path, info, cache)?;
        self.confirm_region_open(path).await?;
        Ok(r)
    }

    /// Opens the existing region at `path` with a local cache of `cache` bytes.
    pub async fn region(&self, path: &str, cache: u64) -> Result<crate::Region> {
        let info = self.open_region(path).await?;
        let r = crate::Region::open(self.clone(), self.runtime().clone(), path, info, cache)?;
        self.confirm_region_open(path).await?;
        Ok(r)
    }

    /// Once a handle of the region at `path` holds its lease: tells the
    /// coordinator (so restores elsewhere are refused from now on), then
    /// checks that no restore started before it did (`Busy`).
    pub async fn confirm_region_open(&self, path: &str) -> Result<()> {
        self.renew_leases().await?;
        match self.stat(path).await?.restoring {
            Some(name) => Err(restoring(path, &name)),
            None => Ok(()),
        }
    }

    /// The region at `path`; `InvalidArgument` if it is not a region,
    /// `Busy` if a restore of it has not finished.
    pub async fn open_region(&self, path: &str) -> Result<InodeInfo> {
        let info = self.stat(path).await?;
        match info.kind {
            InodeKind::Region if info.restoring.is_some() => {
                Err(restoring(path, info.restoring.as_deref().unwrap_or_default()))
            }
            InodeKind::Region => Ok(info),
            InodeKind::Dir => Err(Error::new(ErrorKind::IsADirectory, format!("{path}: is a directory"))),
            _ => Err(Error::invalid(format!("{path}: is a {}, not a region", crate::kind_name(info.kind)))),
        }
    }

    /// `len` bytes of chunk `index` of the region `info` from `offset`,
    /// checked. A checkpoint's `info` lists the versions it reads.
    pub async fn read_region(&self, path: &str, info: &InodeInfo, index: u64, offset: u64, len: u64) -> Result<Bytes> {
        let key =
            info.chunks.get(index as usize).map_or(ChunkKey::hashed(info.id, index, 1), |r| r.key(info.id, index));
        let req = WorkerRequest::ReadRange { key, offset, len };
        let check = |resp: &WorkerResponse, data: &[u8]| match resp {
            WorkerResponse::Range { checksum } if crc32c::crc32c(data) == *checksum && data.len() as u64 == len => {
                Ok(())
            }
            WorkerResponse::Range { .. } => Err(Error::new(
                ErrorKind::Corrupt,
                format!("{path}: chunk {index}: bytes {offset}..{} arrived damaged", offset + len),
            )),
            other => Err(unexpected(other.clone())),
        };
        let (_, data) = self.read_replicas(key, &req, check, None).await.map_err(|e| region_error(path, index, e))?;
        Ok(data)
    }

    /// Overwrites `ranges` `(offset, bytes)` of chunk `index` of the region
    /// `info`, in one request: all of them or none.
    pub async fn write_region(&self, path: &str, info: &InodeInfo, index: u64, ranges: &[(u64, &[u8])]) -> Result<()> {
        if !info.chunks.is_empty() {
            return Err(Error::new(ErrorKind::ReadOnly, format!("{path}: a checkpoint is read-only")));
        }
        let key = ChunkKey::hashed(info.id, index, 1);
        let total: usize = ranges.iter().map(|(_, b)| b.len()).sum();
        let mut payload = Vec::with_capacity(total);
        for (_, b) in ranges {
            payload.extend_from_slice(b);
        }
        let req = WorkerRequest::WriteRanges {
            key,
            ranges: ranges.iter().map(|(o, b)| (*o, b.len() as u64)).collect(),
            checksum: crc32c::crc32c(&payload),
            table: 0,
        };
        self.write_replicas(key, info.replicas, &req, &payload).await.map_err(|e| region_error(path, index, e))
    }
}

/// A region that cannot be opened: its restore to `name` has not finished.
fn restoring(path: &str, name: &str) -> Error {
    Error::new(ErrorKind::Busy, format!("{path}: its restore to checkpoint {name} has not finished; restore it again"))
}

fn region_error(path: &str, index: u64, e: Error) -> Error {
    match e.kind {
        ErrorKind::NotFound => Error::new(
            ErrorKind::Lost,
            format!("{path}: chunk {index} is lost: the worker that owns it does not have it"),
        ),
        _ => e.context(format!("{path}: chunk {index}")),
    }
}
