//! Chunks on their replicas: a write goes to every replica its chunk
//! keeps and is acknowledged only when each has it; a read goes to the
//! nearest replica that answers, and on to the next when one fails, lacks
//! the chunk or holds a damaged copy (which is written again from the good
//! one before the read returns).
//!
//! Both follow replicas as they move: a worker that no longer holds the
//! partition (`Moved`) makes the client read the layout again, one handing
//! it over (`Busy`) makes it wait a little; a worker that cannot be reached
//! is waited for (writes) or skipped (reads) until the layout changes
//! (the coordinator declares it down and its replicas move elsewhere).
//! Gives up after `MOVE_PATIENCE`.
//!
//! Nearest (RCSS's ranking): a worker on this client's host, then in its
//! rack, then the others in replica order; workers that failed lately go
//! last. Among equally near replicas of a chunk, those holding it in
//! memory are read before those holding it on disk only: each is first
//! asked for its memory copy (`mem_only`), and those answering `OnDisk`
//! are read from disk after them (a cost of one short round trip each,
//! paid only where several replicas are equally near).

use crate::client::{unexpected, Client, MOVE_PATIENCE};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use tierpool_placement::{read_classes, Nearness};
use tierpool_proto::{Layout, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, Error, ErrorKind, Result, WorkerId};

/// How long a worker that failed a call is tried last.
const SUSPECT_FOR: Duration = Duration::from_secs(10);

/// How one call to one replica went.
enum Outcome {
    /// Its payload, or `None`: read into the caller's room for it.
    Answer(WorkerResponse, Option<Bytes>),
    /// Try again once the layout changed or a little later.
    Retry(String),
    /// This replica cannot serve it now; another may.
    Skip(Error),
}

impl Client {
    /// `dst`: room for the answer's payload, read straight into it if it
    /// is as long.
    async fn call_replica(
        &self,
        layout: &Layout,
        w: WorkerId,
        req: &WorkerRequest,
        payload: &[u8],
        dst: Option<&mut [u8]>,
    ) -> Outcome {
        let Some(rec) = layout.worker(w) else {
            return Outcome::Skip(Error::internal(format!("worker {w} is in the partition table but unknown")));
        };
        let link = self.worker_link(w, &rec.addr);
        let answer = match self.in_lane(&link, req, payload, dst.as_deref().map(<[u8]>::len)).await {
            Ok(Some((answer, data))) => Ok((answer, Some(data))),
            Ok(None) => link.pool.call_into(req, payload, true, dst).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok((WorkerResponse::Moved { epoch }, _)) => {
                Outcome::Retry(format!("worker {w} no longer holds it (epoch {epoch})"))
            }
            Ok((WorkerResponse::Busy, _)) => Outcome::Retry(format!("worker {w} is handing its partition over")),
            Ok((resp, data)) => Outcome::Answer(resp, data),
            Err(e) if matches!(e.kind, ErrorKind::Unavailable | ErrorKind::NotFound | ErrorKind::Corrupt) => {
                // This client's own connections all busy says nothing of the worker.
                if e.kind == ErrorKind::Unavailable && !tierpool_net::stayed_busy(&e) {
                    self.inner.suspects.lock().insert(w, Instant::now());
                }
                let what = match e.kind {
                    ErrorKind::NotFound => {
                        format!("worker {w} at {} does not have its version {}", rec.addr, req_key(req))
                    }
                    ErrorKind::Corrupt => format!("worker {w} at {} holds a damaged copy: {}", rec.addr, e.message),
                    _ => format!("worker {w} at {} is unreachable: {}", rec.addr, e.message),
                };
                Outcome::Skip(Error::new(e.kind, what))
            }
            Err(e) => Outcome::Skip(e),
        }
    }

    /// Sends `req` with `payload` (a chunk write: safe to send again) to
    /// every worker that is to hold a replica of `key` keeping `copies`
    /// copies; returns once each answered `Done`.
    pub(crate) async fn write_replicas(
        &self,
        key: ChunkKey,
        copies: u8,
        req: &WorkerRequest,
        payload: &[u8],
    ) -> Result<()> {
        let answers = self.ask_replicas(key, copies, req, payload).await?;
        match answers.into_iter().find(|a| *a != WorkerResponse::Done) {
            Some(other) => Err(unexpected(other)),
            None => Ok(()),
        }
    }

    /// Sends `req` to every replica of `key` (as `write_replicas` does) and
    /// returns what each answered.
    pub(crate) async fn ask_replicas(
        &self,
        key: ChunkKey,
        copies: u8,
        req: &WorkerRequest,
        payload: &[u8],
    ) -> Result<Vec<WorkerResponse>> {
        let since = Instant::now();
        let mut wait = Duration::from_millis(1);
        let mut layout = self.layout().await?;
        let mut done: BTreeMap<WorkerId, WorkerResponse> = BTreeMap::new();
        loop {
            let targets = layout.table.write_targets(key, copies);
            if targets.is_empty() {
                return Err(Error::new(ErrorKind::Unavailable, "the pool has no workers yet"));
            }
            let pending: Vec<WorkerId> = targets.iter().copied().filter(|w| !done.contains_key(w)).collect();
            if pending.is_empty() {
                return Ok(targets.iter().filter_map(|w| done.remove(w)).collect());
            }
            let req = req.fenced(layout.version);
            let calls = pending.iter().map(|&w| {
                let (layout, req) = (&layout, &req);
                async move { (w, self.call_replica(layout, w, req, payload, None).await) }
            });
            let mut why = None;
            for (w, outcome) in join_all(calls.collect()).await {
                match outcome {
                    Outcome::Answer(answer, _) => {
                        done.insert(w, answer);
                    }
                    Outcome::Retry(m) => why = Some(m),
                    Outcome::Skip(e) if e.kind == ErrorKind::Unavailable => why = Some(e.message),
                    Outcome::Skip(e) => return Err(e),
                }
            }
            let Some(why) = why else { continue };
            if since.elapsed() > MOVE_PATIENCE {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("chunk {key}: not every replica could take it within {MOVE_PATIENCE:?}: {why}"),
                ));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(100));
            layout = self.refresh_layout().await?;
        }
    }

    /// Sends `req` (a chunk read) to the nearest replica of `key`, and on
    /// to the next while one fails, lacks the chunk, or answers what
    /// `check` refuses. A replica whose worker found its copy damaged (and
    /// dropped it) gets the good bytes written back as `repair` builds the
    /// request for them. `NotFound` only when every
    /// replica lacks the chunk (and the layout did not change meanwhile).
    pub(crate) async fn read_replicas(
        &self,
        key: ChunkKey,
        req: &WorkerRequest,
        check: impl Fn(&WorkerResponse, &[u8]) -> Result<()>,
        repair: Option<&(dyn Fn() -> WorkerRequest + Sync)>,
    ) -> Result<(WorkerResponse, Bytes)> {
        let (resp, data) = self.read_replicas_into(key, req, check, repair, None).await?;
        Ok((resp, data.unwrap_or_default()))
    }

    /// As `read_replicas`; with `dst`, an answer of exactly `dst.len()`
    /// bytes is read straight into it: no buffer of its own, no copy (a
    /// chunk of at most `LANE_CHUNK_MAX` bytes, read through its worker's
    /// lane, is copied there: see `worker_lanes.rs`). With
    /// `None`, `dst` holds what the accepted replica sent; with `Some`,
    /// those are its bytes, and `dst` holds anything, as it does after an
    /// error.
    pub(crate) async fn read_replicas_into(
        &self,
        key: ChunkKey,
        req: &WorkerRequest,
        check: impl Fn(&WorkerResponse, &[u8]) -> Result<()>,
        repair: Option<&(dyn Fn() -> WorkerRequest + Sync)>,
        mut dst: Option<&mut [u8]>,
    ) -> Result<(WorkerResponse, Option<Bytes>)> {
        let since = Instant::now();
        let mut wait = Duration::from_millis(1);
        let mut layout = self.layout().await?;
        loop {
            let classes = self.nearest(&layout, key);
            if classes.is_empty() {
                return Err(Error::new(ErrorKind::Unavailable, "the pool has no workers yet"));
            }
            let mut tried = Tried::default();
            for class in classes {
                // Several replicas equally near: those holding the chunk
                // in memory first, then those holding it on disk.
                let probe = match req {
                    WorkerRequest::GetChunk { key, .. } if class.len() > 1 => {
                        Some(WorkerRequest::GetChunk { key: *key, mem_only: true })
                    }
                    _ => None,
                };
                let mut on_disk = Vec::new();
                for w in class {
                    let ask = probe.as_ref().unwrap_or(req);
                    let outcome = self.call_replica(&layout, w, ask, &[], dst.as_deref_mut()).await;
                    if matches!(outcome, Outcome::Answer(WorkerResponse::OnDisk, _)) {
                        on_disk.push(w);
                    } else if let Some(done) = tried.take(key, w, outcome, &check, dst.as_deref())? {
                        let good = done.1.as_deref().or(dst.as_deref()).unwrap_or_default();
                        self.repair(&layout, &tried.damaged, good, repair).await;
                        return Ok(done);
                    }
                }
                for w in on_disk {
                    let outcome = self.call_replica(&layout, w, req, &[], dst.as_deref_mut()).await;
                    if let Some(done) = tried.take(key, w, outcome, &check, dst.as_deref())? {
                        let good = done.1.as_deref().or(dst.as_deref()).unwrap_or_default();
                        self.repair(&layout, &tried.damaged, good, repair).await;
                        return Ok(done);
                    }
                }
            }
            let Tried { why, last, .. } = tried;
            let fresh = self.refresh_layout().await?;
            let changed = fresh.version != layout.version;
            if (why.is_none() && !changed) || since.elapsed() > MOVE_PATIENCE {
                let e = last.unwrap_or_else(|| Error::new(ErrorKind::Unavailable, why.unwrap_or_default()));
                return Err(e);
            }
            if !changed {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(100));
            }
            layout = fresh;
        }
    }

    /// Writes good bytes back to the replicas that held damaged copies
    /// before the read returns: a short-lived reader (one `cat`) would
    /// otherwise exit with the repair undone. Damaged copies are rare, so
    /// the wait is paid rarely; a repair that fails is logged, and the
    /// read still returns its good bytes.
    async fn repair(
        &self,
        layout: &Layout,
        damaged: &[WorkerId],
        data: &[u8],
        repair: Option<&(dyn Fn() -> WorkerRequest + Sync)>,
    ) {
        let Some(make) = repair else { return };
        let calls = damaged.iter().map(|&w| {
            let req = make().fenced(layout.version);
            async move { (w, self.call_replica(layout, w, &req, data, None).await) }
        });
        for (w, outcome) in join_all(calls.collect()).await {
            match outcome {
                Outcome::Answer(WorkerResponse::Done, _) => tracing::info!("repaired a damaged replica on worker {w}"),
                Outcome::Answer(other, _) => tracing::warn!("repairing a replica on worker {w}: {other:?}"),
                Outcome::Retry(m) => tracing::warn!("repairing a replica on worker {w}: {m}"),
                Outcome::Skip(e) => tracing::warn!("repairing a replica on worker {w}: {e}"),
            }
        }
    }

    /// The workers holding a replica of `key`, nearest first, in classes
    /// of equally near ones: on this client's host, in its rack, the
    /// others (each in replica order), then those that failed lately.
    pub(crate) fn nearest(&self, layout: &Layout, key: ChunkKey) -> Vec<Vec<WorkerId>> {
        let holders = layout.table.holders(layout.table.partition(key));
        let (host, rack) = (&self.inner.cfg.host, &self.inner.cfg.rack);
        let suspects = {
            let mut s = self.inner.suspects.lock();
            s.retain(|_, at| at.elapsed() < SUSPECT_FOR);
            s.keys().copied().collect::<BTreeSet<WorkerId>>()
        };
        let near = |w: WorkerId| match layout.worker(w) {
            Some(r) if !host.is_empty() && &r.host == host => Nearness::Host,
            Some(r) if !rack.is_empty() && &r.rack == rack => Nearness::Rack,
            _ => Nearness::Remote,
        };
        read_classes(&holders, near, |w| suspects.contains(&w))
    }
}

/// What the replicas tried so far for one read said.
#[derive(Default)]
struct Tried {
    /// Why a replica asked to be tried again later.
    why: Option<String>,
    /// The last error.
    last: Option<Error>,
    /// Replicas found holding a damaged copy.
    damaged: Vec<WorkerId>,
}

impl Tried {
    /// Takes the outcome of reading `key` from `w`: the answer if `check`
    /// accepts it, `None` to go on with another replica, an error to stop.
    /// `landed`: where an answer without a payload of its own put it.
    fn take(
        &mut self,
        key: ChunkKey,
        w: WorkerId,
        outcome: Outcome,
        check: &impl Fn(&WorkerResponse, &[u8]) -> Result<()>,
        landed: Option<&[u8]>,
    ) -> Result<Option<(WorkerResponse, Option<Bytes>)>> {
        match outcome {
            Outcome::Answer(resp, data) => match check(&resp, data.as_deref().or(landed).unwrap_or_default()) {
                Ok(()) => return Ok(Some((resp, data))),
                Err(e) => {
                    tracing::debug!("chunk {key}: worker {w}: {}; reading another replica", e.message);
                    self.last = Some(e);
                }
            },
            Outcome::Retry(m) => self.why = Some(m),
            Outcome::Skip(e) => {
                if e.kind == ErrorKind::Corrupt {
                    // The worker logs it; the read goes on with another replica.
                    tracing::debug!("chunk {key}: {}; reading another replica", e.message);
                    self.damaged.push(w);
                } else if !matches!(e.kind, ErrorKind::NotFound | ErrorKind::Unavailable) {
                    return Err(e);
                }
                self.last = Some(e);
            }
        }
        Ok(None)
    }
}

/// Runs `futs` at once on the calling task and returns their outputs in
/// order: replica calls are waits on sockets, which need no task (and no
/// thread) of their own.
async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()).filter(|(_, o)| o.is_none()) {
            match f.as_mut().poll(cx) {
                Poll::Ready(v) => *o = Some(v),
                Poll::Pending => pending = true,
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// The chunk key a chunk request names (for messages).
fn req_key(req: &WorkerRequest) -> String {
    match req {
        WorkerRequest::GetChunk { key, .. } | WorkerRequest::ReadRange { key, .. } => key.version.to_string(),
        WorkerRequest::CopyChunk { from, .. } => from.version.to_string(),
        _ => "?".into(),
    }
}
