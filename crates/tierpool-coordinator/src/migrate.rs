//! Moving partitions between workers, and giving workers the table.
//!
//! [`drive`] starts the moves the engine asks for (`Engine::next_moves`):
//! it logs `BeginMoves`, gives both ends the table saying so, and asks each
//! new owner to `Copy` its partitions from the old one. When the copy is
//! complete (the old owner froze them, so nothing changes any more) it logs
//! `FinishMoves` and every worker is given the new table: from then on the
//! new owner serves them and the old one drops its copies. A copy that
//! fails, or whose ends stop sending heartbeats, is given up
//! (`AbortMoves`): the old owner serves the partitions again and the pair
//! rests a while. Moves that a coordinator which stopped left under way
//! are given up when it starts again, and begun anew.
//!
//! Tables reach workers in pushes (`push_table`, after every change that
//! may alter the table, once it is durable) and, should a push be lost, at
//! the next heartbeat: its answer carries the table's version and a worker
//! that has an older one asks for the layout.

use crate::service::Coordinator;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_meta::engine::moves::{Move, Progress};
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, Owner};
use tierpool_net::{Pool, PoolConfig};
use tierpool_proto::{MigrationStatus, Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ByteSize, Error, ErrorKind, Result, WorkerId};

/// How often the driver looks for moves to start without being woken.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How often a copy checks that both its ends are still alive.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// A copy waits this long at most for a worker to answer at all.
const COPY_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Starts the moves the engine asks for, whenever woken (by a change of
/// the table or goal, a move ending, a worker coming up) or every second.
pub async fn drive(svc: Arc<Coordinator>) {
    // Moves a coordinator that stopped left under way (nothing of them
    // survives it): given up once, before any move starts.
    loop {
        let interrupted = svc.with_engine(|e| e.interrupted_moves());
        if interrupted.is_empty() {
            break;
        }
        tracing::info!(
            "giving up {} moves of partitions left under way by a restart; they start again",
            interrupted.len()
        );
        match svc.execute(MetaOp::AbortMoves { partitions: interrupted }, Owner::default()).await {
            Ok(_) => break,
            Err(e) => {
                tracing::warn!("giving up interrupted moves: {e}");
                tokio::time::sleep(LOOK_EVERY).await;
            }
        }
    }
    loop {
        if let Err(e) = step(&svc).await {
            tracing::warn!("moving partitions: {e}");
        }
        let _ = tokio::time::timeout(LOOK_EVERY, svc.migrate_wake.notified()).await;
    }
}

async fn step(svc: &Arc<Coordinator>) -> Result<()> {
    crate::replication::standing(svc).await?;
    let now = svc.now();
    // Links that stayed slower (or came back) for a window: weigh again.
    for (id, percent) in svc.with_engine(|e| e.speed_changes(now)) {
        let bw = svc.with_engine(|e| e.bandwidth(id, now)).map_or("?".into(), |b| format!("{}/s", ByteSize(b)));
        tracing::info!(
            "worker {id} delivers {percent}% of the fastest worker's bandwidth ({bw}): its share is weighed again"
        );
        svc.execute(MetaOp::SetSpeed { id, percent }, Owner::default()).await?;
    }
    let moves = svc.with_engine(|e| e.next_moves(now));
    if moves.is_empty() {
        return Ok(());
    }
    let begin = moves.iter().flat_map(|m| m.partitions.iter().map(|p| (*p, m.to))).collect();
    svc.execute(MetaOp::BeginMoves { moves: begin }, Owner::default()).await?;
    // Each move gets the cap's share of its partitions out of the most that
    // may move at once: together they never copy faster than the cap.
    let max = svc.cfg.max_moving.max(1) as u64;
    for m in moves {
        let svc = svc.clone();
        let rate = (svc.cfg.move_rate.saturating_mul(m.partitions.len() as u64) / max).max(1);
        let rate = if svc.cfg.move_rate == 0 { 0 } else { rate };
        tokio::spawn(async move { carry_out(&svc, m, rate).await });
    }
    Ok(())
}

/// Copies one move's partitions and logs how it ended.
async fn carry_out(svc: &Arc<Coordinator>, m: Move, rate: u64) {
    let started = Instant::now();
    let outcome = copy(svc, &m, rate).await;
    let (op, what) = match outcome {
        Ok((chunks, bytes)) => {
            svc.with_engine(|e| e.move_copied(&m, bytes));
            tracing::info!(
                "moved {} from worker {} to worker {}: {chunks} chunks, {} in {:.1?}",
                named(svc, &m.partitions),
                m.from,
                m.to,
                ByteSize(bytes),
                started.elapsed()
            );
            // Only what still moves to `m.to`: a drain or a removal may have
            // given some up meanwhile, and they may be moving elsewhere now.
            let finish = |e: &Engine| {
                let partitions = e.finishable(&m);
                (!partitions.is_empty()).then_some(MetaOp::FinishMoves { partitions })
            };
            if let Err(e) = svc.execute_with(finish, Owner::default()).await {
                tracing::error!("could not record the end of a move (finish): {e}");
            }
            svc.migrate_wake.notify_one();
            return;
        }
        Err(e) => {
            let now = svc.now();
            svc.with_engine(|en| en.move_failed(&m, now));
            tracing::warn!(
                "gave up moving {} from worker {} to worker {}: {e}",
                named(svc, &m.partitions),
                m.from,
                m.to
            );
            (MetaOp::AbortMoves { partitions: m.partitions.clone() }, "give up")
        }
    };
    if let Err(e) = svc.execute(op, Owner::default()).await {
        tracing::error!("could not record the end of a move ({what}): {e}");
    }
    svc.migrate_wake.notify_one();
}

/// Has `m.to` copy the partitions from `m.from`, giving up if either
/// stops sending heartbeats: `(chunks, bytes)` copied.
async fn copy(svc: &Arc<Coordinator>, m: &Move, rate: u64) -> Result<(u64, u64)> {
    push_table(svc, Some(&[m.from, m.to])).await;
    let addr = |w: WorkerId| {
        svc.worker_addr(w).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("worker {w} left the pool")))
    };
    let (from, to) = (addr(m.from)?, addr(m.to)?);
    let pool: Pool<Worker> =
        Pool::new(to, PoolConfig { request_timeout: COPY_TIMEOUT, ..PoolConfig::with(svc.credentials.clone()) });
    // Workers copy whole partitions: a slot's partition (one slot of a
    // partition moves at a time).
    let partitions = partitions_of(svc, &m.partitions);
    let req = WorkerRequest::Copy { from, partitions, rate };
    let watch = async {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if let Some(w) = [m.from, m.to].into_iter().find(|w| !svc.is_alive(*w)) {
                return Error::new(ErrorKind::Unavailable, format!("worker {w} stopped sending heartbeats"));
            }
        }
    };
    tokio::select! {
        r = pool.call(&req, &[], false) => match r? {
            (WorkerResponse::Copied { chunks, bytes }, _) => Ok((chunks, bytes)),
            (other, _) => Err(Error::new(ErrorKind::Protocol, format!("unexpected answer to Copy: {other:?}"))),
        },
        e = watch => Err(e),
    }
}

/// The partitions of slots `slots`.
fn partitions_of(svc: &Coordinator, slots: &[u32]) -> Vec<u32> {
    svc.with_engine(|e| slots.iter().map(|s| e.state().table().partition_of_slot(*s)).collect())
}

/// How logs name the slots of a move: partitions, and which replica when
/// the pool keeps more than one.
fn named(svc: &Coordinator, slots: &[u32]) -> String {
    let (r, n) = svc.with_engine(|e| (e.state().table().replicas(), e.state().table().partitions()));
    if r == 1 {
        return format!("partitions {slots:?}");
    }
    let pairs: Vec<String> = slots.iter().map(|s| format!("{}/{}", s % n, s / n)).collect();
    format!("replicas (partition/replica) [{}]", pairs.join(", "))
}

/// Gives workers (`only` these, or every registered one) the current
/// table, once it is fsynced. Best effort: a worker that misses it asks
/// for the layout when a heartbeat's answer shows a newer version.
pub(crate) async fn push_table(svc: &Coordinator, only: Option<&[WorkerId]>) {
    let (version, table, lsn) = svc.table();
    if svc.synced(lsn).await.is_err() {
        return;
    }
    let workers = match only {
        Some(ws) => ws.to_vec(),
        None => svc.worker_ids(),
    };
    let req = WorkerRequest::Table { version, table };
    let mut calls = tokio::task::JoinSet::new();
    for w in workers {
        let Some(pool) = svc.worker_pool(w) else { continue };
        let req = req.clone();
        calls.spawn(async move {
            if let Err(e) = pool.call(&req, &[], true).await {
                tracing::debug!("worker {w} gets the table at its next heartbeat: {e}");
            }
        });
    }
    while calls.join_next().await.is_some() {}
}

/// The engine's progress as the status shows it.
pub(crate) fn status(p: Progress) -> MigrationStatus {
    let secs = p.elapsed.as_secs_f64();
    let rate = if secs > 0.0 { (p.bytes_moved as f64 / secs) as u64 } else { 0 };
    let eta_secs = (p.active && rate > 0).then(|| p.bytes_total.saturating_sub(p.bytes_moved) / rate);
    MigrationStatus {
        active: p.active,
        partitions_moving: p.partitions_moving,
        partitions_left: p.partitions_left,
        partitions_done: p.partitions_done,
        bytes_moved: p.bytes_moved,
        bytes_total: p.bytes_total,
        elapsed_ms: p.elapsed.as_millis() as u64,
        rate,
        eta_secs,
        moves_failed: p.moves_failed,
    }
}

/// Bytes a probe carries: enough to time a link.
const PROBE_BYTES: usize = 1 << 20;

/// Sends each live worker, one after another, a probe eight times a
/// bandwidth window, at most once a second (a ping carrying
/// [`PROBE_BYTES`], which the worker times like any large request), so that
/// every worker's link is measured on the same path however much traffic
/// it sees, and a slow worker holding few partitions is still seen to
/// recover. About 0.3 MB/s per worker with the default window.
pub async fn probe(svc: Arc<Coordinator>) {
    let payload = bytes::Bytes::from(vec![0u8; PROBE_BYTES]);
    let every = (svc.cfg.speed_window / 8).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        if svc.cfg.speed_threshold == 0 {
            continue;
        }
        let workers: Vec<WorkerId> = svc.with_engine(|e| e.state().workers().keys().copied().collect());
        for id in workers.into_iter().filter(|w| svc.is_alive(*w)) {
            let Some(pool) = svc.worker_pool(id) else { continue };
            let probe = pool.call(&WorkerRequest::Ping, &payload, true);
            match tokio::time::timeout(every, probe).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::debug!("probing worker {id}: {e}"),
                Err(_) => tracing::debug!("probing worker {id}: no answer within {every:?}"),
            }
        }
    }
}
