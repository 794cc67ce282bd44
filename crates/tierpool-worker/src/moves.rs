//! Partitions moving between workers: both ends of a move, and the
//! deletion of chunks this worker no longer holds a partition for.
//!
//! The new owner (`copy_in`) asks the old one to track the partitions,
//! copies every chunk they hold, then what changed meanwhile, round after
//! round until few changes are left; it then has the old owner freeze
//! them (no request for them is served there any more, and the writes in
//! progress have finished) and copies the last changes. What it holds then
//! is exactly what the old owner holds, and stays so: nothing changes on a
//! frozen partition. A chunk that was deleted on the old owner (absent
//! when fetched) is deleted here too. Any failure fails the whole copy;
//! the coordinator gives the move up and the old owner serves again.
//!
//! Chunks of a partition this worker neither owns nor receives are no
//! one's (a move away finished, or one here was given up): they are
//! deleted a little later (`drop_strays`), each checked again at that
//! moment under the routing lock, so that a partition moving here again
//! meanwhile keeps what it receives.

use crate::service::{Answer, WorkerService};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_net::{Pool, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, Error, ErrorKind, Result};
use tokio::task::block_in_place;

/// Keys listed per page of a moving partition's chunks.
const PAGE: u32 = 1024;
/// Stored keys looked at per page at most (the others are in other partitions).
const SCAN: usize = 100_000;
/// Bytes of chunks fetched per request at most (one chunk goes whatever its size).
const FETCH_BYTES: usize = 16 << 20;
/// Keys fetched per request at most.
const FETCH_KEYS: usize = 256;
/// Catch-up rounds before freezing regardless.
const CATCH_UP_ROUNDS: usize = 20;
/// Freeze once a round finds no more changes than this.
const FEW_CHANGES: usize = 64;
/// How long a freeze waits for the writes in progress to finish.
const QUIET_WITHIN: Duration = Duration::from_secs(10);
/// How long the old owner may take to learn of the move (from the table).
const TRACK_WITHIN: Duration = Duration::from_secs(5);
/// How long after a partition is lost its chunks are deleted (requests
/// admitted just before may still be reading them).
const STRAY_DELAY: Duration = Duration::from_secs(2);

type Moves = [(u32, u64)];

impl WorkerService {
    /// A page of the chunks of moving partitions (the old owner's side).
    pub(crate) fn moving_chunks(&self, moves: &Moves, after: Option<ChunkKey>, limit: u32) -> Answer {
        let partitions: BTreeSet<u32> = moves.iter().map(|(p, _)| *p).collect();
        self.routing.lock().check(moves)?;
        let (mut chunks, mut cursor, mut scanned) = (Vec::new(), after, 0);
        loop {
            let page = self.tiers.inventory(cursor, 4096);
            let Some(last) = page.last().map(|(k, _)| *k) else { break };
            let routing = self.routing.lock();
            for (k, len) in &page {
                if routing.in_partitions(*k, &partitions) {
                    chunks.push((*k, *len));
                }
            }
            drop(routing);
            scanned += page.len();
            cursor = Some(last);
            if page.len() < 4096 {
                cursor = None;
                break;
            }
            if chunks.len() >= limit as usize || scanned >= SCAN {
                break;
            }
        }
        Ok((WorkerResponse::Chunks { chunks, next: cursor }, Bytes::new()))
    }

    /// The bytes of a prefix of `keys` (the old owner's side): each stored
    /// one with its length and checksum, each absent one as absent.
    pub(crate) fn fetch(&self, moves: &Moves, keys: &[ChunkKey]) -> Answer {
        self.routing.lock().check(moves)?;
        let mut out = Vec::new();
        let mut payload = BytesMut::new();
        for key in keys {
            if !payload.is_empty() && payload.len() >= FETCH_BYTES {
                break;
            }
            match block_in_place(|| self.tiers.get_for_copy(*key)) {
                Ok(data) => {
                    if !payload.is_empty() && payload.len() + data.len() > tierpool_proto::MAX_PAYLOAD_LEN as usize {
                        break;
                    }
                    out.push((*key, Some((data.len() as u64, crc32c::crc32c(&data)))));
                    payload.extend_from_slice(&data);
                }
                Err(e) if e.kind == ErrorKind::NotFound => out.push((*key, None)),
                Err(e) => return Err(e),
            }
        }
        Ok((WorkerResponse::Fetched { chunks: out }, payload.freeze()))
    }

    /// Freezes moving partitions and waits for the writes in progress (the
    /// old owner's side).
    pub(crate) async fn freeze(&self, moves: &Moves) -> Answer {
        self.routing.lock().freeze(moves)?;
        let partitions: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
        let since = Instant::now();
        while !self.routing.lock().quiet(&partitions) {
            if since.elapsed() > QUIET_WITHIN {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("writes to partitions {partitions:?} did not finish within {QUIET_WITHIN:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok((WorkerResponse::Done, Bytes::new()))
    }

    /// Copies partitions moving here from the worker at `from` (the new
    /// owner's side): `Copied` once this worker holds them as they are,
    /// frozen, there.
    pub(crate) async fn copy_in(&self, from: &str, partitions: &[u32], rate: u64) -> Answer {
        if partitions.is_empty() {
            return Err(Error::invalid("a copy names the partitions to copy"));
        }
        {
            let r = self.routing.lock();
            let (Some(t), Some(me)) = (r.table(), r.me()) else {
                return Err(Error::new(ErrorKind::Unavailable, "this worker has no partition table yet"));
            };
            let to_me = |p: u32| t.slots_of(p).any(|s| t.moving().get(&s) == Some(&me));
            if let Some(p) = partitions.iter().find(|p| !to_me(**p)) {
                return Err(Error::invalid(format!("partition {p} is not moving to this worker")));
            }
        }
        let source = Pool::<Worker>::new(from.to_string(), PoolConfig::with(self.credentials.clone()));
        let ids = track(&source, partitions).await?;
        let moves: Vec<(u32, u64)> = partitions.iter().copied().zip(ids).collect();
        let mut c = Copier { svc: self, source, moves, rate, started: Instant::now(), chunks: 0, bytes: 0 };
        // Everything stored there now...
        let mut after = None;
        loop {
            let req = WorkerRequest::MovingChunks { moves: c.moves.clone(), after, limit: PAGE };
            let (chunks, next) = match c.source.call(&req, &[], true).await? {
                (WorkerResponse::Chunks { chunks, next }, _) => (chunks, next),
                (other, _) => return Err(unexpected(other)),
            };
            c.copy(chunks.into_iter().map(|(k, _)| k).collect()).await?;
            match next {
                Some(k) => after = Some(k),
                None => break,
            }
        }
        // ...then what changed meanwhile, until little does...
        for _ in 0..CATCH_UP_ROUNDS {
            let keys = c.changes().await?;
            let few = keys.len() <= FEW_CHANGES;
            c.copy(keys).await?;
            if few {
                break;
            }
        }
        // ...then the last changes, with the partitions frozen there.
        match c.source.call(&WorkerRequest::Freeze { moves: c.moves.clone() }, &[], false).await? {
            (WorkerResponse::Done, _) => {}
            (other, _) => return Err(unexpected(other)),
        }
        let keys = c.changes().await?;
        c.copy(keys).await?;
        Ok((WorkerResponse::Copied { chunks: c.chunks, bytes: c.bytes }, Bytes::new()))
    }
}

/// The tracking ids of `partitions` on the old owner, waiting a little for
/// it to learn of the move.
async fn track(source: &Pool<Worker>, partitions: &[u32]) -> Result<Vec<u64>> {
    let since = Instant::now();
    loop {
        match source.call(&WorkerRequest::Track { partitions: partitions.to_vec() }, &[], true).await {
            Ok((WorkerResponse::Tracking { ids }, _)) if ids.len() == partitions.len() => return Ok(ids),
            Ok((other, _)) => return Err(unexpected(other)),
            Err(e) if e.kind == ErrorKind::InvalidArgument && since.elapsed() < TRACK_WITHIN => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e.context(format!("asking worker {} to track the partitions", source.addr()))),
        }
    }
}

fn unexpected(r: WorkerResponse) -> Error {
    Error::new(ErrorKind::Protocol, format!("unexpected answer of the old owner: {r:?}"))
}

struct Copier<'a> {
    svc: &'a WorkerService,
    source: Pool<Worker>,
    moves: Vec<(u32, u64)>,
    rate: u64,
    started: Instant,
    chunks: u64,
    bytes: u64,
}

impl Copier<'_> {
    async fn changes(&self) -> Result<Vec<ChunkKey>> {
        match self.source.call(&WorkerRequest::TakeChanges { moves: self.moves.clone() }, &[], false).await? {
            (WorkerResponse::Changes { keys }, _) => Ok(keys),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Fetches `keys` and stores them here as they are there (deleting
    /// those absent there).
    async fn copy(&mut self, mut keys: Vec<ChunkKey>) -> Result<()> {
        while !keys.is_empty() {
            let ask: Vec<ChunkKey> = keys.iter().take(FETCH_KEYS).copied().collect();
            let req = WorkerRequest::Fetch { moves: self.moves.clone(), keys: ask };
            let (answers, payload) = match self.source.call(&req, &[], true).await? {
                (WorkerResponse::Fetched { chunks }, payload) if !chunks.is_empty() => (chunks, payload),
                (other, _) => return Err(unexpected(other)),
            };
            for (key, stored) in tierpool_proto::fetched_bytes(&answers, &payload)? {
                match stored {
                    Some((data, checksum)) => {
                        let len = data.len() as u64;
                        block_in_place(|| self.svc.tiers.replace(key, data, checksum))?;
                        self.chunks += 1;
                        self.bytes += len;
                        self.svc.bytes_moved_in.fetch_add(len, Ordering::Relaxed);
                    }
                    None => {
                        block_in_place(|| self.svc.tiers.delete(key))?;
                    }
                }
            }
            keys.drain(..answers.len().min(keys.len()));
            self.pace().await;
        }
        Ok(())
    }

    /// Sleeps as long as copying faster than `rate` needs.
    async fn pace(&self) {
        if self.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / self.rate as f64);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Deletes the chunks of partitions this worker no longer holds, a little
/// after it learns of them; runs for the life of the worker.
pub async fn drop_strays(svc: Arc<WorkerService>) {
    loop {
        svc.strays_wake.notified().await;
        tokio::time::sleep(STRAY_DELAY).await;
        let partitions = std::mem::take(&mut *svc.strays.lock());
        if partitions.is_empty() {
            continue;
        }
        let svc2 = svc.clone();
        let r = tokio::task::spawn_blocking(move || drop_in(&svc2, &partitions)).await;
        match r {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!("deleted {n} chunks of partitions this worker no longer holds"),
            Ok(Err(e)) => tracing::warn!("deleting chunks of partitions this worker no longer holds: {e}"),
            Err(e) => tracing::warn!("the task deleting stray chunks failed: {e}"),
        }
    }
}

fn drop_in(svc: &WorkerService, partitions: &BTreeSet<u32>) -> Result<u64> {
    let (mut after, mut deleted) = (None, 0);
    loop {
        let page = svc.tiers.inventory(after, 4096);
        let Some(last) = page.last().map(|(k, _)| *k) else { return Ok(deleted) };
        for (k, _) in &page {
            let routing = svc.routing.lock();
            if routing.in_partitions(*k, partitions) && routing.is_stray(*k) {
                deleted += u64::from(svc.tiers.delete(*k)?);
            }
        }
        if page.len() < 4096 {
            return Ok(deleted);
        }
        after = Some(last);
    }
}
