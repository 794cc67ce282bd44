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
use std::collections::BTreeMap;
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, Owner};
use tierpool_proto::{ChunkPlace, CoordResponse, FsckEntry, ReplicationStatus, WorkerRequest, WorkerResponse};
use tierpool_types::Result;
use tierpool_types::{ChunkKey, WorkerId};

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
        spread: s.spread(),
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

/// Keys asked about in one `Locate`.
const LOCATE_BATCH: usize = 4096;

/// Files and regions at or under `path` with chunks short of copies, as
/// the workers say: every worker holding a replica of a chunk's partition
/// (alive now) is asked whether it has the chunk, so a copy lost from a
/// worker's memory, or one never copied, is counted missing too.
pub(crate) async fn fsck(svc: &Coordinator, path: &str) -> Result<CoordResponse> {
    let comps = tierpool_meta::normalize(path)?;
    let now = svc.now();
    // (inode, copies, keys) and, per worker alive, the keys to ask it about.
    let (files, asks) = svc.with_engine(|e| -> Result<_> {
        let s = e.state();
        let files = s.chunks_under(&comps)?;
        let dead = e.dead(now);
        let mut asks: BTreeMap<WorkerId, Vec<ChunkKey>> = BTreeMap::new();
        for (_, _, keys) in &files {
            for k in keys {
                for w in s.table().holders(s.table().partition(*k)).into_iter().filter(|w| !dead.contains(w)) {
                    asks.entry(w).or_default().push(*k);
                }
            }
        }
        Ok((files, asks))
    })?;
    let mut present: BTreeMap<ChunkKey, u8> = BTreeMap::new();
    for (w, keys) in asks {
        let Some(pool) = svc.worker_pool(w) else { continue };
        for batch in keys.chunks(LOCATE_BATCH) {
            let req = WorkerRequest::Locate { keys: batch.to_vec() };
            match pool.call(&req, &[], true).await {
                Ok((WorkerResponse::Located(places), _)) => {
                    for (k, place) in batch.iter().zip(places) {
                        if place != ChunkPlace::Absent {
                            *present.entry(*k).or_insert(0) += 1;
                        }
                    }
                }
                Ok((other, _)) => tracing::warn!("fsck: worker {w} answered {other:?}"),
                Err(e) => tracing::warn!("fsck: worker {w}: {e}"),
            }
        }
    }
    let mut out = Vec::new();
    for (id, copies, keys) in &files {
        let (mut under, mut lost) = (0, 0);
        for k in keys {
            match present.get(k).copied().unwrap_or(0) {
                0 => lost += 1,
                n if n < *copies => under += 1,
                _ => {}
            }
        }
        if under + lost > 0 {
            out.push((
                *id,
                FsckEntry { path: String::new(), replicas: *copies, chunks: keys.len() as u64, under, lost },
            ));
        }
    }
    let ids: Vec<_> = out.iter().map(|(id, _)| *id).collect();
    out.sort_by_key(|(id, _)| *id);
    let names = svc.with_engine(|e| e.state().named(&ids));
    let mut entries: Vec<FsckEntry> = (out.into_iter())
        .map(|(id, mut f)| {
            f.path = names.get(&id).cloned().unwrap_or_else(|| format!("(inode {id})"));
            f
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(CoordResponse::Fsck(entries))
}
