//! Garbage collection of removed files' chunks.
//!
//! An inode enters the state's pending set when its file is removed or
//! replaced. After the grace period the coordinator asks every registered
//! worker to delete the inode's chunks; only when all of them confirmed is
//! `GcDone` logged. An unreachable worker delays the deletion (it keeps
//! being retried), so a worker that comes back never keeps orphans.

use crate::service::Coordinator;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_meta::MetaOp;
use tierpool_proto::Request;
use tierpool_types::InodeId;

const BATCH: usize = 10_000;

pub async fn run(svc: Arc<Coordinator>) {
    let mut first_seen: HashMap<InodeId, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let pending = svc.pending_gc();
        let now = Instant::now();
        first_seen.retain(|i, _| pending.binary_search(i).is_ok());
        for i in &pending {
            first_seen.entry(*i).or_insert(now);
        }
        let due: Vec<InodeId> =
            pending.iter().filter(|i| first_seen[*i].elapsed() >= svc.gc_grace()).take(BATCH).copied().collect();
        if due.is_empty() {
            continue;
        }
        if delete_everywhere(&svc, &due).await {
            match svc.execute(MetaOp::GcDone { inodes: due.clone() }).await {
                Ok(_) => tracing::debug!("collected {} removed inodes", due.len()),
                Err(e) => tracing::warn!("could not record garbage collection: {e}"),
            }
        }
    }
}

async fn delete_everywhere(svc: &Coordinator, inodes: &[InodeId]) -> bool {
    let req = Request::DeleteInodes { inodes: inodes.to_vec() };
    let mut all = true;
    for (id, pool) in svc.worker_pools() {
        if let Err(e) = pool.call(&req, &[], true).await {
            tracing::debug!("garbage collection waits for worker {id}: {e}");
            all = false;
        }
    }
    all
}
