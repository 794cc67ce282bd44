//! The worker's request handler: chunk put/get/delete over the tier
//! manager, one handler per request.
//!
//! Tier calls may touch disk, so they run under `block_in_place`, except
//! chunk puts and gets that MEM alone serves (the tier manager's `try_*`
//! calls, which never block): those stay on the runtime thread, sparing a
//! hand-off to another thread per request.
//! A chunk is accepted only if its bytes match the checksum the client
//! computed (the tier checks it), so a bit flipped in transit is never stored.
//! Chunk requests pass [`Routing`] first: only the owner of a chunk's
//! partition serves it (the moving of partitions is in `moves`).

use crate::routing::{Admit, Routing};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tierpool_net::Handler;
use tierpool_placement::PartitionTable;
use tierpool_proto::{ChunkPlace, Payload, WorkerRequest, WorkerResponse, WorkerStats};
use tierpool_tier::{TierKind, TierManager};
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result, WorkerId};
use tokio::task::block_in_place;

pub struct WorkerService {
    pub(crate) tiers: Arc<TierManager>,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    pub(crate) bytes_moved_in: AtomicU64,
    /// This worker's id, once registered.
    me: Mutex<Option<WorkerId>>,
    pub(crate) routing: Mutex<Routing>,
    /// Partitions whose chunks here are no one's, to delete (see `moves::drop_strays`).
    pub(crate) strays: Mutex<BTreeSet<u32>>,
    pub(crate) strays_wake: tokio::sync::Notify,
    /// What this worker proves itself with to other workers (copies).
    pub(crate) credentials: tierpool_net::Credentials,
    net: std::sync::OnceLock<tierpool_net::StatsHandle>,
    /// The buffers chunks being written are read into, and whether they
    /// were filled ahead and are bounded by the MEM budget (`--prefault`).
    buffers: std::sync::OnceLock<(Arc<tierpool_net::ChunkBuffers>, bool)>,
}

pub(crate) type Answer = Result<(WorkerResponse, Bytes)>;

/// Ends a write admitted by the routing when dropped, however it ended.
struct Writing<'a> {
    routing: &'a Mutex<Routing>,
    key: ChunkKey,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.routing.lock().done(self.key);
    }
}

/// Most keys one inventory page lists (a page stays a few MiB).
const MAX_INVENTORY_PAGE: usize = 100_000;

fn done() -> Answer {
    Ok((WorkerResponse::Done, Bytes::new()))
}

/// Version 0 names a hole (nothing stored): no chunk may be stored under it.
fn check_version(key: ChunkKey) -> Result<()> {
    if key.version == 0 {
        return Err(Error::invalid(format!("chunk {key}: version 0 is a hole and cannot be stored")));
    }
    Ok(())
}

/// Runs a store that needs room; if the worker is full, waits a little (in
/// all ~0.3 s) and tries again: the coordinator marks garbage reclaimable
/// just after the change that made it, so a write that follows a removal or
/// a replacement at once may arrive before the mark it is owed.
fn with_room<T>(mut store: impl FnMut() -> Result<T>) -> Result<T> {
    for ms in [10, 20, 40, 80, 160] {
        match store() {
            Err(e) if e.kind == ErrorKind::PoolFull => block_in_place(|| std::thread::sleep(Duration::from_millis(ms))),
            r => return r,
        }
    }
    store()
}

fn check_transit(key: ChunkKey, payload: &[u8], checksum: Checksum) -> Result<()> {
    let actual = crc32c::crc32c(payload);
    if actual != checksum {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("chunk {key}: checksum mismatch in transit ({actual:08x} != {checksum:08x})"),
        ));
    }
    Ok(())
}

impl WorkerService {
    pub fn new(tiers: Arc<TierManager>, credentials: tierpool_net::Credentials) -> Self {
        WorkerService {
            tiers,
            bytes_written: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_moved_in: AtomicU64::new(0),
            me: Mutex::new(None),
            routing: Mutex::new(Routing::new(rand_nonce())),
            strays: Mutex::new(BTreeSet::new()),
            strays_wake: tokio::sync::Notify::new(),
            credentials,
            net: std::sync::OnceLock::new(),
            buffers: std::sync::OnceLock::new(),
        }
    }

    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            tiers: self.tiers.stats(),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_moved_in: self.bytes_moved_in.load(Ordering::Relaxed),
            transfer: self.net.get().map(|n| {
                let s = n.snapshot();
                (s.transfer_bytes, s.transfer_nanos)
            }),
            buffers: self.buffers.get().map(|(b, _)| b.stats()).unwrap_or_default(),
            connections: self.net.get().map_or_else(Default::default, |n| {
                let s = n.snapshot();
                tierpool_proto::Connections { accepted: s.connections_accepted, local: s.connections_local }
            }),
        }
    }

    /// The buffers the server reads chunks being written into; with
    /// `prefault`, [`fit_buffers`](Self::fit_buffers) bounds them by what
    /// MEM's other chunks leave of its budget.
    pub fn set_buffers(&self, buffers: Arc<tierpool_net::ChunkBuffers>, prefault: bool) {
        let _ = self.buffers.set((buffers, prefault));
    }

    /// With `prefault`, bounds the buffers spare and in use together by
    /// what MEM's chunks held without one leave of the MEM budget (and
    /// [`crate::SPARE_BUFFERS`] more): chunks that reach MEM without a
    /// buffer (promoted from DISK, shorter than a chunk, copied from a
    /// sibling) leave fewer spare, so the worker stays within its MEM
    /// budget and those spare buffers' worth.
    pub fn fit_buffers(&self) {
        let Some((buffers, true)) = self.buffers.get() else { return };
        let b = buffers.stats();
        let mem = self.tiers.stats();
        let without = mem.mem_used.saturating_sub(b.lent * b.size) / b.size;
        buffers.set_limit(crate::buffer_limit(mem.mem_capacity, b.size, without));
    }

    /// The figures of the server that serves this worker (its transfers).
    pub fn set_server_stats(&self, stats: tierpool_net::StatsHandle) {
        let _ = self.net.set(stats);
    }

    /// The id this worker registered with.
    pub fn set_id(&self, id: WorkerId) {
        *self.me.lock() = Some(id);
    }

    pub fn id(&self) -> Option<WorkerId> {
        *self.me.lock()
    }

    /// The version of the table this worker serves by (0: none yet).
    pub fn table_version(&self) -> u64 {
        self.routing.lock().version()
    }

    /// Serves by the table of `version` (an older one than it has is
    /// ignored); the chunks of partitions it no longer holds are deleted
    /// shortly after.
    pub fn apply_table(&self, version: u64, table: PartitionTable) {
        let Some(me) = self.id() else { return };
        let applied = self.routing.lock().apply(me, version, table);
        if !applied.dropped.is_empty() {
            self.strays.lock().extend(applied.dropped);
            self.strays_wake.notify_one();
        }
    }

    /// Runs `serve` if this worker serves `key` now; a write is counted as
    /// in progress (a freeze waits for it) until `serve` returns.
    fn routed(&self, key: ChunkKey, write: Option<u64>, serve: impl FnOnce() -> Answer) -> Answer {
        let admit = {
            let mut r = self.routing.lock();
            match write.and_then(|table| r.stale(key, table)) {
                Some(stale) => stale,
                None => r.admit(key, write.is_some()),
            }
        };
        match admit {
            Admit::Serve => {}
            Admit::Moved(epoch) => return Ok((WorkerResponse::Moved { epoch }, Bytes::new())),
            Admit::Busy => return Ok((WorkerResponse::Busy, Bytes::new())),
        }
        let _writing = write.is_some().then_some(Writing { routing: &self.routing, key });
        serve()
    }

    /// The tier checks the payload against `checksum` before storing it.
    /// With `wait`, a full worker waits a little for room made by marks
    /// of garbage still in flight (`with_room`).
    fn put_chunk(&self, key: ChunkKey, checksum: Checksum, attrs: ChunkAttrs, payload: Bytes, wait: bool) -> Answer {
        check_version(key)?;
        let n = payload.len() as u64;
        match self.tiers.try_put_in_mem(key, &payload, checksum, attrs) {
            Some(stored) => stored?,
            None if wait => with_room(|| block_in_place(|| self.tiers.put(key, payload.clone(), checksum, attrs)))?,
            None => block_in_place(|| self.tiers.put(key, payload, checksum, attrs))?,
        }
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
        done()
    }

    /// A copy that fails its checksum is dropped as it is reported: the
    /// reader takes another replica and writes the good bytes back here.
    /// With `mem_only`, a chunk held on DISK only is not read (`OnDisk`).
    fn get_chunk(&self, key: ChunkKey, mem_only: bool) -> Answer {
        if mem_only && self.tiers.locate(key) == Some(TierKind::Disk) {
            return Ok((WorkerResponse::OnDisk, Bytes::new()));
        }
        let data = match self.read_chunk(key) {
            Err(e) if e.kind == ErrorKind::Corrupt => {
                tracing::warn!("chunk {key} is damaged here, dropped: {}", e.message);
                let _ = block_in_place(|| self.tiers.delete(key));
                return Err(e);
            }
            r => r?,
        };
        self.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok((WorkerResponse::Chunk, data))
    }

    /// A chunk's bytes, from MEM if it is there, else from DISK.
    fn read_chunk(&self, key: ChunkKey) -> Result<Bytes> {
        match self.tiers.try_get_in_mem(key) {
            Some(data) => Ok(data),
            None => block_in_place(|| self.tiers.get(key)),
        }
    }

    /// A chunk's bytes for an answer of many: from MEM as kept, with its
    /// checksum as stored if known; from DISK copied out of the read, whose
    /// bytes hold one of the few DISK read permits until dropped (an answer
    /// holding many could take them all, and wait for one more forever).
    fn read_chunk_of_many(&self, key: ChunkKey) -> Result<(Bytes, Option<Checksum>)> {
        match self.tiers.try_get_in_mem_summed(key) {
            Some(found) => Ok(found),
            None => Ok((Bytes::copy_from_slice(&block_in_place(|| self.tiers.get(key))?), None)),
        }
    }

    /// Each key as `get_chunk` serves it, as many of the first as fit in
    /// one answer; a key not served now (absent, moved, handed over,
    /// damaged, unreadable, or with `mem_only` on DISK only) is `None`, and
    /// its reader asks for it alone.
    /// A damaged copy is left for that `GetChunk` to drop as it reports it,
    /// so the reader writes the good bytes back here.
    /// The chunks' bytes go out as they are kept, one part of the payload
    /// each (never copied together), with their checksums as stored where
    /// MEM knows them (computed otherwise).
    fn get_chunks(&self, keys: &[ChunkKey], mem_only: bool) -> Result<(WorkerResponse, Payload)> {
        at_most_a_batch(keys.len())?;
        let (mut chunks, mut payload, mut bytes) = (Vec::with_capacity(keys.len()), Payload::empty(), 0usize);
        for key in keys {
            if mem_only && self.tiers.locate(*key) == Some(TierKind::Disk) {
                chunks.push((*key, None));
                continue;
            }
            let mut sum = None;
            let served = self.routed(*key, None, || {
                let (data, stored) = self.read_chunk_of_many(*key)?;
                sum = stored;
                Ok((WorkerResponse::Chunk, data))
            });
            match served {
                Ok((WorkerResponse::Chunk, data)) => {
                    if bytes > 0 && bytes + data.len() > tierpool_proto::MAX_PAYLOAD_LEN as usize {
                        break;
                    }
                    self.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
                    let sum = sum.unwrap_or_else(|| crc32c::crc32c(&data));
                    chunks.push((*key, Some((data.len() as u64, sum))));
                    bytes += data.len();
                    payload.push(data);
                }
                Ok(_) | Err(_) => chunks.push((*key, None)),
            }
        }
        Ok((WorkerResponse::Fetched { chunks }, payload))
    }

    /// Each chunk as a `PutChunk` of it would be stored, except that a
    /// full worker does not wait for room; `false` for one that would not
    /// have been answered `Done` (its writer sends it alone, waits for
    /// room if need be, and learns why). Each is stored as a copy of its
    /// own bytes: a slice would keep the whole request's buffer alive, and
    /// MEM counts only the chunk's length.
    fn put_chunks(
        &self,
        chunks: &[(ChunkKey, Checksum, u64)],
        attrs: ChunkAttrs,
        table: u64,
        payload: Bytes,
    ) -> Answer {
        at_most_a_batch(chunks.len())?;
        let pieces = tierpool_proto::split_payload(chunks.iter().map(|(_, _, len)| *len), &payload, true)
            .map_err(|e| Error::invalid(e.message))?;
        let stored = (chunks.iter().zip(pieces))
            .map(|((key, checksum, _), piece)| {
                // In a kept buffer: the pages of a small chunk deleted before.
                let kept = self.buffers.get().and_then(|(b, _)| b.copy(&piece));
                let data = kept.unwrap_or_else(|| Bytes::copy_from_slice(&piece));
                let put = self.routed(*key, Some(table), || self.put_chunk(*key, *checksum, attrs, data, false));
                matches!(put, Ok((WorkerResponse::Done, _)))
            })
            .collect();
        Ok((WorkerResponse::Stored(stored), Bytes::new()))
    }

    fn delete_inodes(&self, inodes: &[InodeId]) -> Answer {
        let chunks = block_in_place(|| self.tiers.delete_inodes(inodes))?;
        Ok((WorkerResponse::Deleted { chunks }, Bytes::new()))
    }

    fn delete_chunks(&self, keys: &[ChunkKey]) -> Answer {
        let mut chunks = 0;
        for key in keys {
            chunks += u64::from(block_in_place(|| self.tiers.delete(*key))?);
            self.routing.lock().changed(*key);
        }
        Ok((WorkerResponse::Deleted { chunks }, Bytes::new()))
    }

    fn locate(&self, keys: &[ChunkKey]) -> Answer {
        let places = (keys.iter())
            .map(|k| match self.tiers.locate(*k) {
                Some(TierKind::Mem) => ChunkPlace::Mem,
                Some(TierKind::Disk) => ChunkPlace::Disk,
                None => ChunkPlace::Absent,
            })
            .collect();
        Ok((WorkerResponse::Located(places), Bytes::new()))
    }

    fn set_attrs(&self, changes: &[(InodeId, ChunkAttrs)], replace: bool) -> Answer {
        if replace {
            self.tiers.replace_attrs(changes);
        } else {
            for (inode, attrs) in changes {
                self.tiers.set_attrs(*inode, *attrs);
            }
        }
        done()
    }

    fn create_chunk(&self, key: ChunkKey, len: u64, attrs: ChunkAttrs) -> Answer {
        check_version(key)?;
        if len > tierpool_types::MAX_CHUNK_SIZE {
            return Err(Error::invalid(format!("chunk {key}: {len} bytes is more than a chunk may hold")));
        }
        with_room(|| block_in_place(|| self.tiers.create_zeroed(key, len, attrs)))?;
        done()
    }

    /// Both keys must be versions of one chunk (so of one partition, which
    /// `to` was routed by); `unless` too.
    fn copy_chunk(&self, from: ChunkKey, to: ChunkKey, unless: Option<ChunkKey>) -> Answer {
        check_version(from)?;
        check_version(to)?;
        let same = |k: ChunkKey| (k.inode, k.index, k.home) == (to.inode, to.index, to.home);
        if !same(from) || !unless.is_none_or(same) || from == to {
            return Err(Error::invalid(format!("chunk {to}: a copy is made from another version of the same chunk")));
        }
        let (len, checksum, copied) = with_room(|| block_in_place(|| self.tiers.copy_chunk(from, to, unless)))?;
        if copied {
            self.bytes_written.fetch_add(len, Ordering::Relaxed);
        }
        Ok((WorkerResponse::ChunkCopied { len, checksum, copied }, Bytes::new()))
    }

    fn read_range(&self, key: ChunkKey, offset: u64, len: u64) -> Answer {
        let data = block_in_place(|| self.tiers.read_range(key, offset, len))?;
        self.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok((WorkerResponse::Range { checksum: crc32c::crc32c(&data) }, data))
    }

    fn write_ranges(&self, key: ChunkKey, ranges: &[(u64, u64)], checksum: Checksum, payload: Bytes) -> Answer {
        check_transit(key, &payload, checksum)?;
        let pieces = tierpool_proto::split_payload(ranges.iter().map(|(_, n)| *n), &payload, true)
            .map_err(|e| Error::invalid(format!("chunk {key}: ranges do not cover the payload: {}", e.message)))?;
        let slices: Vec<(u64, &[u8])> =
            ranges.iter().zip(&pieces).map(|((off, _), piece)| (*off, &piece[..])).collect();
        block_in_place(|| self.tiers.write_ranges(key, &slices))?;
        self.bytes_written.fetch_add(payload.len() as u64, Ordering::Relaxed);
        done()
    }

    fn dispatch(&self, req: WorkerRequest, payload: Bytes) -> Answer {
        match req {
            WorkerRequest::Ping => Ok((WorkerResponse::Pong, Bytes::new())),
            WorkerRequest::PutChunk { key, checksum, attrs, table } => {
                self.routed(key, Some(table), || self.put_chunk(key, checksum, attrs, payload, true))
            }
            WorkerRequest::GetChunk { key, mem_only } => self.routed(key, None, || self.get_chunk(key, mem_only)),
            WorkerRequest::PutChunks { chunks, attrs, table } => self.put_chunks(&chunks, attrs, table, payload),
            WorkerRequest::DeleteInodes { inodes } => self.delete_inodes(&inodes),
            WorkerRequest::DeleteChunks { keys } => self.delete_chunks(&keys),
            WorkerRequest::SetAttrs { changes, replace } => self.set_attrs(&changes, replace),
            WorkerRequest::Stats => Ok((WorkerResponse::Stats(Box::new(self.stats())), Bytes::new())),
            WorkerRequest::CreateChunk { key, len, attrs, table } => {
                self.routed(key, Some(table), || self.create_chunk(key, len, attrs))
            }
            WorkerRequest::ReadRange { key, offset, len } => {
                self.routed(key, None, || self.read_range(key, offset, len))
            }
            WorkerRequest::WriteRanges { key, ranges, checksum, table } => {
                self.routed(key, Some(table), || self.write_ranges(key, &ranges, checksum, payload))
            }
            WorkerRequest::CopyChunk { from, to, unless, table } => {
                self.routed(to, Some(table), || self.copy_chunk(from, to, unless))
            }
            WorkerRequest::Locate { keys } => self.locate(&keys),
            WorkerRequest::LastUse { inodes } => {
                let ms = |d: std::time::Duration| d.as_millis().min(u64::MAX as u128) as u64;
                let ages = self.tiers.last_use(&inodes).into_iter().map(|a| a.map(ms)).collect();
                Ok((WorkerResponse::LastUsed(ages), Bytes::new()))
            }
            WorkerRequest::Inventory { after, limit } => {
                let chunks = self.tiers.inventory(after, (limit as usize).min(MAX_INVENTORY_PAGE));
                Ok((WorkerResponse::Inventory { chunks }, Bytes::new()))
            }
            WorkerRequest::Reclaim { inodes, keys } => {
                self.tiers.mark_reclaimable_inodes(&inodes);
                self.tiers.mark_reclaimable(&keys);
                done()
            }
            WorkerRequest::Table { version, table } => {
                self.apply_table(version, table);
                done()
            }
            WorkerRequest::Track { partitions } => {
                Ok((WorkerResponse::Tracking { ids: self.routing.lock().track(&partitions)? }, Bytes::new()))
            }
            WorkerRequest::MovingChunks { moves, after, limit } => self.moving_chunks(&moves, after, limit),
            WorkerRequest::Fetch { moves, keys } => self.fetch(&moves, &keys),
            WorkerRequest::TakeChanges { moves } => {
                Ok((WorkerResponse::Changes { keys: self.routing.lock().take_changes(&moves)? }, Bytes::new()))
            }
            WorkerRequest::KeepOnDisk { key } => self.routed(key, None, || {
                block_in_place(|| self.tiers.keep_on_disk(key))?;
                done()
            }),
            WorkerRequest::Freeze { .. } | WorkerRequest::Copy { .. } | WorkerRequest::GetChunks { .. } => {
                Err(Error::internal("a request answered by `handle` itself reached the dispatch"))
            }
        }
    }
}

/// Chunks one `GetChunks` or `PutChunks` names: at most `MAX_BATCH`.
fn at_most_a_batch(n: usize) -> Result<()> {
    match n <= tierpool_proto::MAX_BATCH {
        true => Ok(()),
        false => Err(Error::invalid(format!("{n} chunks in one request; at most {}", tierpool_proto::MAX_BATCH))),
    }
}

/// A number unlikely to repeat across runs of the process (starts its tracking ids).
fn rand_nonce() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.as_nanos() as u64).rotate_left(17) ^ u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Handler for WorkerService {
    type Service = tierpool_proto::Worker;

    async fn handle(&self, req: WorkerRequest, payload: Bytes) -> (Result<WorkerResponse>, Payload) {
        let one = |(r, out): (WorkerResponse, Bytes)| (r, Payload::from(out));
        let answer = match req {
            WorkerRequest::Freeze { moves } => self.freeze(&moves).await.map(one),
            WorkerRequest::Copy { from, partitions, rate } => self.copy_in(&from, &partitions, rate).await.map(one),
            WorkerRequest::GetChunks { keys, mem_only } => self.get_chunks(&keys, mem_only),
            req => self.dispatch(req, payload).map(one),
        };
        match answer {
            Ok((r, out)) => (Ok(r), out),
            Err(e) => {
                if e.kind != ErrorKind::NotFound {
                    tracing::debug!("request failed: {e}");
                }
                (Err(e), Payload::empty())
            }
        }
    }
}
