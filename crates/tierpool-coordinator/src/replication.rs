//! Replication as the coordinator shows and drives it: the standing of
//! workers (a worker silent past its grace period is logged down, and the
//! replicas it held are let go to be copied again from the survivors; one
//! heard from again is logged up and takes its share back), the pool's
//! replication status, and `fsck`.
//!
//! The decisions are the engine's (`Engine::standing_ops`) and the state
//! machine's (`WorkerDown`, `WorkerUp`); the copies are ordinary moves of
//! partition replicas, driven by `migrate`.

use crate::service::Coordinator;
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, Owner};
use tierpool_proto::{CoordResponse, FsckEntry, ReplicationStatus};
use tierpool_types::Result;

/// Logs the changes of standing the engine asks for (see
/// `Engine::standing_ops`); each one changes the goal, which wakes the moves.
pub(crate) async fn standing(svc: &Coordinator) -> Result<()> {
    let now = svc.now();
    for op in svc.with_engine(|e| e.standing_ops(now)) {
        match &op {
            MetaOp::WorkerDown { id } => tracing::warn!(
                "worker {id} has been silent for {:?}: the replicas it held are copied again from the other workers",
                svc.cfg.dead_after
            ),
            MetaOp::WorkerUp { id } => {
                tracing::info!("worker {id} is back: it takes its share of replicas again (copied in)")
            }
            _ => {}
        }
        svc.execute(op, Owner::default()).await?;
    }
    Ok(())
}

/// The pool's replication as `status` shows it.
pub(crate) fn status(engine: &Engine, now: std::time::Duration) -> ReplicationStatus {
    let s = engine.state();
    let t = s.table();
    let dead = engine.dead(now);
    let taking = (s.workers().keys()).filter(|w| !s.draining().contains(w) && !dead.contains(w)).count();
    let mut r = ReplicationStatus {
        replicas: t.replicas(),
        possible: t.replicas().min(u8::try_from(taking).unwrap_or(u8::MAX)),
        workers_down: dead.iter().copied().collect(),
        replicas_missing: t.owners().iter().filter(|o| o.is_none_or(|w| dead.contains(&w))).count() as u32,
        ..ReplicationStatus::default()
    };
    if s.workers().is_empty() {
        r.replicas_missing = 0;
        return r;
    }
    if r.replicas_missing > 0 || !dead.is_empty() {
        for h in s.replica_health(&[], &dead).unwrap_or_default() {
            r.chunks_under += h.under;
            r.bytes_under += h.bytes_under;
            r.chunks_lost += h.lost;
        }
    }
    r.degraded = r.chunks_under + r.chunks_lost > 0;
    r
}

/// Files and regions at or under `path` with chunks short of copies.
pub(crate) async fn fsck(svc: &Coordinator, path: &str) -> Result<CoordResponse> {
    let comps = tierpool_meta::normalize(path)?;
    let now = svc.now();
    let (health, names) = svc.with_engine(|e| -> Result<_> {
        let health = e.state().replica_health(&comps, &e.dead(now))?;
        let ids: Vec<_> = health.iter().map(|h| h.inode).collect();
        Ok((health, e.state().named(&ids)))
    })?;
    let out: Vec<FsckEntry> = (health.into_iter())
        .map(|h| FsckEntry {
            path: names.get(&h.inode).cloned().unwrap_or_else(|| format!("(inode {})", h.inode)),
            replicas: h.replicas,
            chunks: h.chunks,
            under: h.under,
            lost: h.lost,
        })
        .collect();
    Ok(CoordResponse::Fsck(out))
}
