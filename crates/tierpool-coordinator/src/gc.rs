//! Garbage collection: chunks of removed files, and replaced versions of
//! live files' chunks.
//!
//! An inode enters the state's pending set when its last name goes; a chunk
//! version enters `pending_chunks` when an update replaces it. After the
//! grace period, and once no client holds the inode open (see
//! `Request::Hold`), the coordinator asks every registered worker to delete
//! them; only when all of them confirmed is `GcDone` (or `GcChunksDone`)
//! logged. An unreachable worker delays the deletion (it keeps being
//! retried), so a worker that comes back never keeps orphans.
//!
//! Holds are not logged: after a restart the grace period starts again for
//! everything pending, and clients renew their holds well within it.

use crate::service::Coordinator;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_meta::MetaOp;
use tierpool_proto::Request;
use tierpool_types::{ChunkKey, InodeId};

const BATCH: usize = 10_000;

/// When each pending item was first seen, to apply the grace period.
struct Ages<K>(HashMap<K, Instant>);

impl<K: Copy + Eq + Hash> Ages<K> {
    /// Items of `pending` past `grace` whose inode is not held, at most `BATCH`.
    fn due(&mut self, pending: &[K], grace: Duration, held: impl Fn(&K) -> bool) -> Vec<K> {
        let now = Instant::now();
        let current: std::collections::HashSet<K> = pending.iter().copied().collect();
        self.0.retain(|k, _| current.contains(k));
        for k in pending {
            self.0.entry(*k).or_insert(now);
        }
        pending.iter().filter(|k| self.0[*k].elapsed() >= grace && !held(k)).take(BATCH).copied().collect()
    }
}

pub async fn run(svc: Arc<Coordinator>) {
    let mut inode_ages = Ages::<InodeId>(HashMap::new());
    let mut chunk_ages = Ages::<ChunkKey>(HashMap::new());
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let held: BTreeSet<InodeId> = svc.held();
        let due = inode_ages.due(&svc.pending_gc(), svc.gc_grace(), |i| held.contains(i));
        if !due.is_empty() && delete_everywhere(&svc, Request::DeleteInodes { inodes: due.clone() }).await {
            match svc.execute(MetaOp::GcDone { inodes: due.clone() }).await {
                Ok(_) => tracing::debug!("collected {} removed inodes", due.len()),
                Err(e) => tracing::warn!("could not record garbage collection: {e}"),
            }
        }
        let due = chunk_ages.due(&svc.pending_chunks(), svc.gc_grace(), |k| held.contains(&k.inode));
        if !due.is_empty() && delete_everywhere(&svc, Request::DeleteChunks { keys: due.clone() }).await {
            match svc.execute(MetaOp::GcChunksDone { keys: due.clone() }).await {
                Ok(_) => tracing::debug!("collected {} replaced chunk versions", due.len()),
                Err(e) => tracing::warn!("could not record garbage collection: {e}"),
            }
        }
    }
}

async fn delete_everywhere(svc: &Coordinator, req: Request) -> bool {
    let mut all = true;
    for (id, pool) in svc.worker_pools() {
        if let Err(e) = pool.call(&req, &[], true).await {
            tracing::debug!("garbage collection waits for worker {id}: {e}");
            all = false;
        }
    }
    all
}
