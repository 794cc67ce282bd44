//! Carrying out the engine's effects, each in a task of its own: attribute
//! pushes to workers and the deletion of garbage from every worker. Each
//! reports back to the engine how it went, so nothing it asked for is lost
//! (a failed push becomes a full sync at the worker's next heartbeat; a
//! failed deletion is retried).

use crate::service::Coordinator;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tierpool_meta::engine::gc::Batch;
use tierpool_meta::engine::liveness::Standing;
use tierpool_meta::engine::Effect;
use tierpool_meta::{Garbage, Owner};
use tierpool_proto::WorkerRequest;
use tierpool_types::{ChunkAttrs, ChunkKey, InodeId, Result, WorkerId};

/// How long the task marking garbage waits for more before it sends.
const COALESCE: Duration = Duration::from_millis(2);

/// Attribute changes sent per request.
const ATTRS_PER_REQUEST: usize = 10_000;

/// Starts carrying out one effect.
pub(crate) fn start(svc: &Arc<Coordinator>, effect: Effect) {
    match effect {
        Effect::PushAttrs { workers, changes, replace } => {
            let changes = Arc::new(changes);
            for w in workers {
                let (svc, changes) = (svc.clone(), changes.clone());
                tokio::spawn(async move {
                    if let Err(e) = push_attrs(&svc, w, &changes, replace).await {
                        tracing::debug!("attributes for worker {w} wait for its next heartbeat: {e}");
                        svc.with_engine(|en| en.push_failed(w));
                    }
                });
            }
        }
        Effect::Collect(batch) => {
            let svc = svc.clone();
            tokio::spawn(async move { collect(&svc, batch).await });
        }
        Effect::Reclaim(garbage) => {
            let mut q = svc.reclaims.lock();
            q.inodes.extend(garbage.inodes);
            q.keys.extend(garbage.keys);
            drop(q);
            svc.reclaim_wake.notify_one();
        }
        Effect::Placement => {
            svc.migrate_wake.notify_one();
            let svc = svc.clone();
            tokio::spawn(async move { crate::migrate::push_table(&svc, None).await });
        }
        Effect::Standing(Standing::Up(id)) => {
            tracing::info!("worker {id} is up");
            // It may be the end of a move waiting for it.
            svc.migrate_wake.notify_one();
        }
        Effect::Standing(Standing::Down(id)) => {
            tracing::warn!("worker {id} sent no heartbeat for {:?}: reported dead", svc.cfg.dead_after)
        }
    }
}

async fn push_attrs(svc: &Coordinator, w: WorkerId, changes: &[(InodeId, ChunkAttrs)], replace: bool) -> Result<()> {
    let Some(pool) = svc.worker_pool(w) else { return Ok(()) };
    let mut first = true;
    for part in changes.chunks(ATTRS_PER_REQUEST) {
        let req = WorkerRequest::SetAttrs { changes: part.to_vec(), replace: replace && first };
        pool.call(&req, &[], true).await?;
        first = false;
    }
    if first && replace {
        pool.call(&WorkerRequest::SetAttrs { changes: Vec::new(), replace: true }, &[], true).await?;
    }
    Ok(())
}

/// Marks garbage reclaimable on the workers as it comes, in batches: what
/// accumulated while one batch was being sent goes in the next, so under
/// load a batch costs one request per worker for many changes. A write that
/// finds its worker full meanwhile waits briefly for the marks (see the
/// worker's `with_room`).
pub(crate) async fn mark_reclaimable(svc: Arc<Coordinator>) {
    loop {
        svc.reclaim_wake.notified().await;
        // Under load many changes make garbage at once: a moment's wait
        // lets their marks share one request per worker.
        tokio::time::sleep(COALESCE).await;
        let garbage = std::mem::take(&mut *svc.reclaims.lock());
        if !garbage.is_empty() {
            reclaim(&svc, garbage).await;
        }
    }
}

/// Tells the workers that garbage may be dropped at once: each replaced
/// version to the worker owning it, removed inodes to every worker. Best
/// effort (collection deletes it all later anyway).
async fn reclaim(svc: &Coordinator, garbage: Garbage) {
    let mut keys: BTreeMap<WorkerId, Vec<ChunkKey>> = BTreeMap::new();
    for k in garbage.keys {
        if let Some(w) = svc.owner_of(k) {
            keys.entry(w).or_default().push(k);
        }
    }
    let mut calls = tokio::task::JoinSet::new();
    for id in svc.worker_ids() {
        let keys = keys.remove(&id).unwrap_or_default();
        if keys.is_empty() && garbage.inodes.is_empty() {
            continue;
        }
        let Some(pool) = svc.worker_pool(id) else { continue };
        let req = WorkerRequest::Reclaim { inodes: garbage.inodes.clone(), keys };
        calls.spawn(async move {
            if let Err(e) = pool.call(&req, &[], true).await {
                tracing::debug!("worker {id} keeps garbage until it is collected: {e}");
            }
        });
    }
    while calls.join_next().await.is_some() {}
}

/// Deletes the batch from every registered worker; logs it once all
/// confirmed. An unreachable worker delays the deletion (retried later), so
/// a worker that comes back never keeps orphans.
async fn collect(svc: &Coordinator, batch: Batch) {
    let mut reqs = Vec::new();
    if !batch.inodes.is_empty() {
        reqs.push(WorkerRequest::DeleteInodes { inodes: batch.inodes.clone() });
    }
    if !batch.keys.is_empty() {
        reqs.push(WorkerRequest::DeleteChunks { keys: batch.keys.clone() });
    }
    let mut all = true;
    for id in svc.worker_ids() {
        let Some(pool) = svc.worker_pool(id) else { continue };
        for req in &reqs {
            if let Err(e) = pool.call(req, &[], true).await {
                tracing::debug!("garbage collection waits for worker {id}: {e}");
                all = false;
                break;
            }
        }
    }
    if !all {
        svc.with_engine(|en| en.batch_failed(&batch));
        return;
    }
    for op in svc.with_engine(|en| en.collected(&batch)) {
        if let Err(e) = svc.execute(op, Owner::default()).await {
            tracing::warn!("could not record garbage collection: {e}");
        }
    }
    tracing::debug!("collected {} removed inodes and {} replaced chunk versions", batch.inodes.len(), batch.keys.len());
}
