//! Small chunk reads and writes of one client to one worker share round
//! trips: two lanes per worker (`coalesce.rs`) let `cfg.coalesce`
//! `GetChunk`s, and as many `PutChunk`s, of at most [`LANE_CHUNK_MAX`]
//! bytes travel alone; those made while that many are in flight go
//! together, as one `GetChunks` or `PutChunks`, when one comes back. 32
//! tasks reading or writing files past the inline limit send about
//! `32 / limit` chunks a request to each worker, which then wakes, reads
//! and answers once for all of them.
//!
//! Invariant: this only saves round trips. A call sent alone is the
//! `GetChunk` or `PutChunk` it was, answered as it would be. A call sent
//! with others is answered only with what the worker gave for it: its
//! chunk's bytes (checked by the caller as any answer), or `Done` if it
//! said it stored that chunk. A batch whose worker could not be reached or
//! did not answer (`Unavailable`) is that error for each of its calls, as
//! it would have been for each alone (a chunk write in it may have been
//! stored: the same bytes under the same key, no harm). Any other call
//! (not served or not stored there, the batch refused or its answer
//! malformed, a write made under another table version or attributes than
//! the batch's first, a batch that never ran) is handed back, and the
//! caller sends it alone: the answer it then gets (moved, busy, on disk,
//! damaged, full) is the one a single call gets. Probes of memory copies
//! (`mem_only`) and other reads go in requests of their own. A queued call
//! first waits for one in flight, so it may take up to twice as long to
//! fail as a call alone.

use crate::client::{Client, WorkerPool};
use crate::coalesce::{Batches, Lane};
use crate::per_worker::put_chunks;
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, ErrorKind, Result};
use tokio::runtime::Handle;

/// Chunks at most this large go through a worker's lanes; larger ones
/// gain little from sharing a request and would be copied for it (a
/// large one read alone lands in the caller's buffer).
pub(crate) const LANE_CHUNK_MAX: usize = 64 << 10;
/// Chunks one `GetChunks` or `PutChunks` of a lane carries at most (at
/// most `LANE_CHUNK_MAX` bytes each: 4 MiB a request).
const MAX_BATCH: usize = crate::per_worker::REQUEST_CHUNKS;

/// One `PutChunk` and its bytes.
pub(crate) struct PutCall {
    key: ChunkKey,
    checksum: Checksum,
    attrs: ChunkAttrs,
    table: u64,
    data: Bytes,
}

/// A worker's `PutChunk`s: `Some` answer, or `None` (send it alone).
pub(crate) type PutLane = Lane<PutCall, Option<WorkerResponse>>;

/// One `GetChunk`.
pub(crate) struct GetCall {
    key: ChunkKey,
    mem_only: bool,
}

/// A worker's `GetChunk`s: `Some` answer and its bytes, or `None` (send
/// it alone).
pub(crate) type GetLane = Lane<GetCall, Option<(WorkerResponse, Bytes)>>;

/// A worker's connections, and the lanes its small chunk reads and
/// writes share.
#[derive(Clone)]
pub(crate) struct WorkerLink {
    pub(crate) pool: WorkerPool,
    pub(crate) gets: Arc<GetLane>,
    pub(crate) puts: Arc<PutLane>,
}

impl WorkerLink {
    /// `coalesce` calls of each kind in flight alone (see `coalesce.rs`),
    /// batches sent by tasks of `rt`.
    pub(crate) fn new(pool: WorkerPool, rt: &Handle, coalesce: usize) -> WorkerLink {
        WorkerLink {
            pool,
            gets: Arc::new(Lane::on(rt.clone(), coalesce, MAX_BATCH)),
            puts: Arc::new(Lane::on(rt.clone(), coalesce, MAX_BATCH)),
        }
    }

    /// Calls of both lanes sent with others, so far.
    pub(crate) fn shared(&self) -> (u64, u64) {
        (self.gets.shared(), self.puts.shared())
    }
}

/// Sends a lane's chunk writes to its worker: one as `PutChunk`, more as
/// `PutChunks`.
#[derive(Clone)]
struct Puts(WorkerPool);

impl Batches<PutCall, Option<WorkerResponse>> for Puts {
    fn send(&self, calls: Vec<PutCall>) -> impl Future<Output = Vec<Result<Option<WorkerResponse>>>> + Send + 'static {
        let pool = self.0.clone();
        async move {
            if let [c] = &calls[..] {
                let req = WorkerRequest::PutChunk { key: c.key, checksum: c.checksum, attrs: c.attrs, table: c.table };
                return vec![pool.call(&req, &c.data, true).await.map(|(answer, _)| Some(answer))];
            }
            let (attrs, table) = (calls[0].attrs, calls[0].table);
            let together: Vec<usize> =
                (0..calls.len()).filter(|&i| (calls[i].attrs, calls[i].table) == (attrs, table)).collect();
            let chunks: Vec<_> = together.iter().map(|&i| (calls[i].key, calls[i].checksum, &calls[i].data)).collect();
            let stored = match put_chunks(&pool, &chunks, attrs, table).await {
                Ok(s) => s,
                Err(e) if e.kind == ErrorKind::Unavailable => return calls.iter().map(|_| Err(e.clone())).collect(),
                Err(_) => vec![false; together.len()],
            };
            let mut answers: Vec<Result<Option<WorkerResponse>>> = (0..calls.len()).map(|_| Ok(None)).collect();
            for (i, _) in together.into_iter().zip(stored).filter(|(_, s)| *s) {
                answers[i] = Ok(Some(WorkerResponse::Done));
            }
            answers
        }
    }
}

/// Sends a lane's chunk reads to its worker: one as `GetChunk`, more as
/// `GetChunks`.
#[derive(Clone)]
struct Gets(WorkerPool);

impl Batches<GetCall, Option<(WorkerResponse, Bytes)>> for Gets {
    fn send(
        &self,
        calls: Vec<GetCall>,
    ) -> impl Future<Output = Vec<Result<Option<(WorkerResponse, Bytes)>>>> + Send + 'static {
        let pool = self.0.clone();
        async move {
            if let [c] = &calls[..] {
                let req = WorkerRequest::GetChunk { key: c.key, mem_only: c.mem_only };
                return vec![pool.call(&req, &[], true).await.map(Some)];
            }
            let mut answers: Vec<Result<Option<(WorkerResponse, Bytes)>>> =
                (0..calls.len()).map(|_| Ok(None)).collect();
            // One request for the probes of memory copies, one for the rest.
            let asks = [true, false].map(|mem_only| {
                let together: Vec<usize> = (0..calls.len()).filter(|&i| calls[i].mem_only == mem_only).collect();
                let req = WorkerRequest::GetChunks { keys: together.iter().map(|&i| calls[i].key).collect(), mem_only };
                let pool = pool.clone();
                async move {
                    let answer = match together.is_empty() {
                        true => Ok((WorkerResponse::Fetched { chunks: Vec::new() }, Bytes::new())),
                        false => pool.call(&req, &[], true).await,
                    };
                    (together, answer)
                }
            });
            for (together, answer) in futures::future::join_all(asks).await {
                let fetched = match answer {
                    Ok((WorkerResponse::Fetched { chunks }, payload)) => {
                        tierpool_proto::fetched_bytes(&chunks, &payload).unwrap_or_default()
                    }
                    Err(e) if e.kind == ErrorKind::Unavailable => {
                        together.iter().for_each(|&i| answers[i] = Err(e.clone()));
                        continue;
                    }
                    _ => Vec::new(),
                };
                for (i, (key, got)) in together.into_iter().zip(fetched) {
                    if let (true, Some((bytes, _))) = (key == calls[i].key, got) {
                        answers[i] = Ok(Some((WorkerResponse::Chunk, bytes)));
                    }
                }
            }
            answers
        }
    }
}

impl Client {
    /// `req` through the lane of the worker `link` reaches, if it is a
    /// `PutChunk` of at most [`LANE_CHUNK_MAX`] bytes or a `GetChunk` for
    /// `room` of at most that many: its answer and bytes, or `None` when
    /// the caller is to send it alone (not such a request, lanes off, or
    /// not served in a batch).
    pub(crate) async fn in_lane(
        &self,
        link: &WorkerLink,
        req: &WorkerRequest,
        payload: &[u8],
        room: Option<usize>,
    ) -> Result<Option<(WorkerResponse, Bytes)>> {
        if self.inner.cfg.coalesce == 0 {
            return Ok(None);
        }
        let answer = match *req {
            WorkerRequest::PutChunk { key, checksum, attrs, table } if payload.len() <= LANE_CHUNK_MAX => {
                let call = PutCall { key, checksum, attrs, table, data: Bytes::copy_from_slice(payload) };
                let answer = link.puts.call(call, Puts(link.pool.clone())).await;
                answer.map(|a| a.map(|a| (a, Bytes::new())))
            }
            WorkerRequest::GetChunk { key, mem_only } if room.is_some_and(|n| n <= LANE_CHUNK_MAX) => {
                link.gets.call(GetCall { key, mem_only }, Gets(link.pool.clone())).await
            }
            _ => Ok(None),
        };
        match answer {
            // The lane's own failure (a batch that never ran: its runtime
            // shut down): the call goes alone.
            Err(e) if e.kind == ErrorKind::Internal => Ok(None),
            answer => answer,
        }
    }
}
