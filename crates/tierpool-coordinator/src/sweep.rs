//! The orphan sweep: now and then, each live worker's inventory is read a
//! page at a time and judged by the engine (see
//! `tierpool_meta::engine::orphans`); the ids of the orphans are retired
//! (logged) and only then are the orphans deleted from that worker.
//!
//! A worker that restarts is swept at the next round like any other, so the
//! chunks a crash left on its disk go too. The first round waits until
//! clients have renewed their holds after the coordinator started.

use crate::service::Coordinator;
use std::collections::HashMap;
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, Error, ErrorKind, Result, WorkerId};

/// Keys per inventory page.
const PAGE: u32 = 10_000;

/// Orphans deleted, in chunks and bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub chunks: u64,
    pub bytes: u64,
}

/// One round over every live worker; a worker that fails is retried next round.
pub(crate) async fn sweep_all(svc: &Coordinator) -> Result<()> {
    let mut failed = None;
    for id in svc.live_workers() {
        match sweep_worker(svc, id).await {
            Ok(s) if s.chunks > 0 => {
                tracing::info!("deleted {} orphaned chunks ({} bytes) from worker {id}", s.chunks, s.bytes);
                svc.count_orphans(s);
            }
            Ok(_) => {}
            Err(e) => failed = Some(e.context(format!("sweeping worker {id}"))),
        }
    }
    failed.map_or(Ok(()), Err)
}

async fn sweep_worker(svc: &Coordinator, id: WorkerId) -> Result<Swept> {
    let Some(pool) = svc.worker_pool(id) else { return Ok(Swept::default()) };
    let mut swept = Swept::default();
    let mut after = None;
    loop {
        let req = WorkerRequest::Inventory { after, limit: PAGE };
        let chunks = match pool.call(&req, &[], true).await?.0 {
            WorkerResponse::Inventory { chunks } => chunks,
            other => return Err(Error::new(ErrorKind::Protocol, format!("unexpected answer {other:?}"))),
        };
        let Some(last) = chunks.last().map(|(k, _)| *k) else { return Ok(swept) };
        let lens: HashMap<ChunkKey, u64> = chunks.iter().copied().collect();
        let keys: Vec<ChunkKey> = chunks.iter().map(|(k, _)| *k).collect();
        let Some(judged) = svc.judge_orphans(&keys).await? else { return Ok(swept) };
        if !judged.orphans.is_empty() {
            pool.call(&WorkerRequest::DeleteChunks { keys: judged.orphans.clone() }, &[], true).await?;
            swept.chunks += judged.orphans.len() as u64;
            swept.bytes += judged.orphans.iter().map(|k| lens[k]).sum::<u64>();
        }
        if chunks.len() < PAGE as usize {
            return Ok(swept);
        }
        after = Some(last);
    }
}
