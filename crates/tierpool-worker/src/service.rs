//! The worker's request handler: chunk put/get/delete over the tier manager.
//!
//! Tier calls may touch disk, so they run under `block_in_place`.
//! A chunk is accepted only if its bytes match the checksum the client
//! computed, so a bit flipped in transit is never stored.

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tierpool_net::Handler;
use tierpool_proto::{ChunkPlace, Request, Response, WorkerStats};
use tierpool_tier::{TierKind, TierManager};
use tierpool_types::{Error, ErrorKind, Result};
use tokio::task::block_in_place;

pub struct WorkerService {
    tiers: Arc<TierManager>,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
}

impl WorkerService {
    pub fn new(tiers: Arc<TierManager>) -> Self {
        WorkerService { tiers, bytes_written: AtomicU64::new(0), bytes_read: AtomicU64::new(0) }
    }

    pub fn stats(&self) -> WorkerStats {
        let t = self.tiers.stats();
        WorkerStats {
            mem_capacity: t.mem_capacity,
            mem_used: t.mem_used,
            mem_chunks: t.mem_chunks,
            disk_capacity: t.disk_capacity,
            disk_used: t.disk_used,
            disk_chunks: t.disk_chunks,
            demotions: t.demotions,
            promotions: t.promotions,
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
        }
    }

    fn dispatch(&self, req: Request, payload: Bytes) -> Result<(Response, Bytes)> {
        Ok(match req {
            Request::Ping => (Response::Pong { role: "worker".into() }, Bytes::new()),
            Request::PutChunk { key, checksum, attrs } => {
                let actual = crc32c::crc32c(&payload);
                if actual != checksum {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("chunk {key}: checksum mismatch in transit ({actual:08x} != {checksum:08x})"),
                    ));
                }
                let n = payload.len() as u64;
                block_in_place(|| self.tiers.put(key, payload, checksum, attrs))?;
                self.bytes_written.fetch_add(n, Ordering::Relaxed);
                (Response::Ok, Bytes::new())
            }
            Request::GetChunk { key } => {
                let data = block_in_place(|| self.tiers.get(key))?;
                self.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
                (Response::Chunk, data)
            }
            Request::DeleteInodes { inodes } => {
                let chunks = block_in_place(|| self.tiers.delete_inodes(&inodes))?;
                (Response::Deleted { chunks }, Bytes::new())
            }
            Request::DeleteChunks { keys } => {
                let mut chunks = 0;
                for key in keys {
                    chunks += u64::from(block_in_place(|| self.tiers.delete(key))?);
                }
                (Response::Deleted { chunks }, Bytes::new())
            }
            Request::Locate { keys } => {
                let places = keys
                    .iter()
                    .map(|k| match self.tiers.locate(*k) {
                        Some(TierKind::Mem) => ChunkPlace::Mem,
                        Some(TierKind::Disk) => ChunkPlace::Disk,
                        None => ChunkPlace::Absent,
                    })
                    .collect();
                (Response::Located(places), Bytes::new())
            }
            Request::SetAttrs { changes } => {
                for (inode, attrs) in changes {
                    self.tiers.set_attrs(inode, attrs);
                }
                (Response::Ok, Bytes::new())
            }
            Request::WorkerStats => (Response::WorkerStats(self.stats()), Bytes::new()),
            Request::CreateChunk { key, len, attrs } => {
                if len > tierpool_types::MAX_CHUNK_SIZE {
                    return Err(Error::invalid(format!("chunk {key}: {len} bytes is more than a chunk may hold")));
                }
                block_in_place(|| self.tiers.create_zeroed(key, len, attrs))?;
                (Response::Ok, Bytes::new())
            }
            Request::ReadRange { key, offset, len } => {
                let data = block_in_place(|| self.tiers.read_range(key, offset, len))?;
                self.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
                (Response::Range { checksum: crc32c::crc32c(&data) }, data)
            }
            Request::WriteRanges { key, ranges, checksum } => {
                let actual = crc32c::crc32c(&payload);
                if actual != checksum {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("chunk {key}: checksum mismatch in transit ({actual:08x} != {checksum:08x})"),
                    ));
                }
                let total = ranges.iter().try_fold(0u64, |t, (_, n)| t.checked_add(*n));
                if total != Some(payload.len() as u64) {
                    return Err(Error::invalid(format!(
                        "chunk {key}: ranges cover {total:?} bytes but {} were sent",
                        payload.len()
                    )));
                }
                let mut at = 0usize;
                let slices: Vec<(u64, &[u8])> = ranges
                    .iter()
                    .map(|(off, n)| {
                        let s = (*off, &payload[at..at + *n as usize]);
                        at += *n as usize;
                        s
                    })
                    .collect();
                block_in_place(|| self.tiers.write_ranges(key, &slices))?;
                self.bytes_written.fetch_add(payload.len() as u64, Ordering::Relaxed);
                (Response::Ok, Bytes::new())
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "workers serve chunk requests only; send metadata requests to the coordinator",
                ))
            }
        })
    }
}

impl Handler for WorkerService {
    async fn handle(&self, req: Request, payload: Bytes) -> (Response, Bytes) {
        match self.dispatch(req, payload) {
            Ok(r) => r,
            Err(e) => {
                if e.kind != ErrorKind::NotFound {
                    tracing::debug!("request failed: {e}");
                }
                (Response::Error(e), Bytes::new())
            }
        }
    }
}
