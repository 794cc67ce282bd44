//! The coordinator's request handler.
//!
//! Lock order: `inner` before `live`; neither is held across an await.
//! Invariant: records enter the log in lsn order because they are queued
//! while `inner` is held, right after the op was applied.

use crate::log::LogWriter;
use crate::CoordinatorConfig;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tierpool_meta::{MetaOp, MetaReply, MetaState};
use tierpool_net::{Handler, Pool, PoolConfig};
use tierpool_proto::record::{encode_record, LogRecord};
use tierpool_proto::{Layout, PoolStatus, Request, Response, WorkerStats, WorkerStatus};
use tierpool_types::{ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result, WorkerId};

/// How long a status waits for a worker's current statistics.
const STATS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

struct Inner {
    state: MetaState,
    lsn: u64,
    since_snapshot: u64,
}

/// The inodes a client session has open, and when it last said so.
struct Hold {
    renewed: Instant,
    inodes: Vec<InodeId>,
}

struct Live {
    last_seen: Instant,
    stats: WorkerStats,
}

pub struct Coordinator {
    cfg: CoordinatorConfig,
    inner: Mutex<Inner>,
    log: LogWriter,
    live: Mutex<HashMap<WorkerId, Live>>,
    pools: Mutex<HashMap<WorkerId, Arc<Pool>>>,
    holds: Mutex<HashMap<u64, Hold>>,
}

pub(crate) fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Coordinator {
    pub fn new(cfg: CoordinatorConfig, state: MetaState, lsn: u64, log: LogWriter) -> Self {
        Coordinator {
            cfg,
            inner: Mutex::new(Inner { state, lsn, since_snapshot: 0 }),
            log,
            live: Mutex::new(HashMap::new()),
            pools: Mutex::new(HashMap::new()),
            holds: Mutex::new(HashMap::new()),
        }
    }

    /// Creates the pool on first start.
    pub async fn initialise(&self) -> Result<()> {
        let needed = !self.inner.lock().state.is_initialised();
        if needed {
            self.execute(MetaOp::Init { partitions: self.cfg.partitions }).await?;
            tracing::info!("created a new pool with {} partitions", self.cfg.partitions);
        }
        Ok(())
    }

    /// Applies `op`, logs it, and returns once the log record is durable.
    pub async fn execute(&self, op: MetaOp) -> Result<MetaReply> {
        let (reply, lsn) = {
            let mut g = self.inner.lock();
            let now = now_nanos();
            let reply = g.state.execute(&op, now)?;
            g.lsn += 1;
            let lsn = g.lsn;
            let mut bytes = Vec::new();
            encode_record(&LogRecord { lsn, time: now, op }, &mut bytes);
            self.log.append(bytes, lsn);
            g.since_snapshot += 1;
            if g.since_snapshot >= self.cfg.snapshot_every {
                g.since_snapshot = 0;
                self.log.snapshot(lsn, &g.state);
            }
            (reply, lsn)
        };
        self.log.wait_durable(lsn).await?;
        Ok(reply)
    }

    /// Runs a read-only query and waits until what it saw is durable.
    async fn query<T>(&self, f: impl FnOnce(&MetaState) -> Result<T>) -> Result<T> {
        let (r, lsn) = {
            let g = self.inner.lock();
            (f(&g.state), g.lsn)
        };
        self.log.wait_durable(lsn).await?;
        r
    }

    /// fsyncs of the metadata log so far (group commit makes this far fewer than changes).
    pub fn log_syncs(&self) -> u64 {
        self.log.syncs()
    }

    /// A copy of the current state (for tests and diagnostics).
    pub fn state(&self) -> MetaState {
        self.inner.lock().state.clone()
    }

    pub fn pending_gc(&self) -> Vec<InodeId> {
        self.inner.lock().state.pending_gc().iter().copied().collect()
    }

    /// Replaced chunk versions awaiting deletion from the workers.
    pub fn pending_chunks(&self) -> Vec<ChunkKey> {
        self.inner.lock().state.pending_chunks().iter().copied().collect()
    }

    /// Inodes some client holds open (holds not renewed in time have lapsed).
    pub fn held(&self) -> BTreeSet<InodeId> {
        let mut holds = self.holds.lock();
        holds.retain(|_, h| h.renewed.elapsed() < self.cfg.hold_period);
        holds.values().flat_map(|h| h.inodes.iter().copied()).collect()
    }

    pub fn gc_grace(&self) -> std::time::Duration {
        self.cfg.gc_grace
    }

    /// A connection pool to every registered worker.
    pub fn worker_pools(&self) -> Vec<(WorkerId, Arc<Pool>)> {
        let workers: Vec<_> = self.inner.lock().state.workers().values().cloned().collect();
        let mut pools = self.pools.lock();
        workers
            .into_iter()
            .map(|w| {
                let p = pools.entry(w.id).or_insert_with(|| Arc::new(Pool::new(w.addr.clone(), PoolConfig::default())));
                if p.addr() != w.addr {
                    *p = Arc::new(Pool::new(w.addr.clone(), PoolConfig::default()));
                }
                (w.id, p.clone())
            })
            .collect()
    }

    fn is_alive(&self, id: WorkerId) -> bool {
        self.live.lock().get(&id).is_some_and(|l| l.last_seen.elapsed() < self.cfg.dead_after)
    }

    /// Asks every live worker for its current statistics (in parallel, each
    /// bounded by a short timeout), so a status shows the tiers as they are
    /// now rather than as of the last heartbeat. A worker that does not answer
    /// in time keeps its heartbeat figures.
    async fn refresh_stats(&self) {
        let mut asks = tokio::task::JoinSet::new();
        for (id, pool) in self.worker_pools().into_iter().filter(|(id, _)| self.is_alive(*id)) {
            asks.spawn(async move {
                let r = tokio::time::timeout(STATS_TIMEOUT, pool.call(&Request::WorkerStats, &[], true)).await;
                (id, r)
            });
        }
        while let Some(Ok((id, r))) = asks.join_next().await {
            if let Ok(Ok((Response::WorkerStats(stats), _))) = r {
                if let Some(l) = self.live.lock().get_mut(&id) {
                    l.stats = stats;
                }
            }
        }
    }

    async fn push_attrs(&self, changed: Vec<(InodeId, ChunkAttrs)>) {
        if changed.is_empty() {
            return;
        }
        let req = Request::SetAttrs { changes: changed };
        for (id, pool) in self.worker_pools() {
            if !self.is_alive(id) {
                continue;
            }
            if let Err(e) = pool.call(&req, &[], true).await {
                tracing::warn!("could not update attributes on worker {id}: {e}");
            }
        }
    }

    fn status(&self) -> PoolStatus {
        let g = self.inner.lock();
        let shares = g.state.table().shares();
        let live = self.live.lock();
        let workers = g
            .state
            .workers()
            .values()
            .map(|w| {
                let l = live.get(&w.id);
                WorkerStatus {
                    record: w.clone(),
                    alive: l.is_some_and(|l| l.last_seen.elapsed() < self.cfg.dead_after),
                    partitions: shares.get(&w.id).copied().unwrap_or(0),
                    stats: l.map(|l| l.stats.clone()),
                }
            })
            .collect();
        PoolStatus {
            partitions: g.state.table().partitions(),
            table_epoch: g.state.table().epoch(),
            inodes: g.state.inode_count(),
            pending_gc: g.state.pending_gc().len() as u64,
            workers,
            pending_chunks: g.state.pending_chunks().len() as u64,
        }
    }

    async fn dispatch(&self, req: Request) -> Result<Response> {
        Ok(match req {
            Request::Ping => Response::Pong { role: "coordinator".into() },
            Request::Meta(op) => {
                let reply = self.execute(op).await?;
                if let MetaReply::Attrs { changed } = &reply {
                    self.push_attrs(changed.clone()).await;
                }
                if let MetaReply::Worker { id } = &reply {
                    // Registering is a sign of life; statistics follow with the first heartbeat.
                    self.live.lock().insert(*id, Live { last_seen: Instant::now(), stats: WorkerStats::default() });
                }
                Response::Meta(reply)
            }
            Request::Stat { path } => Response::Info(self.query(|s| s.stat(&path)).await?),
            Request::Lookup { parent, name } => Response::Info(self.query(|s| s.lookup_at(parent, &name)).await?),
            Request::StatInode { id, chunks } => Response::Info(self.query(|s| s.stat_inode(id, chunks)).await?),
            Request::ReadDir { id } => {
                let (parent, entries) = self.query(|s| Ok((s.parent_of(id)?, s.read_dir(id)?))).await?;
                Response::Names { parent, entries }
            }
            Request::Hold { session, inodes } => {
                let mut holds = self.holds.lock();
                if inodes.is_empty() {
                    holds.remove(&session);
                } else {
                    holds.insert(session, Hold { renewed: Instant::now(), inodes });
                }
                Response::Ok
            }
            Request::List { path } => Response::Entries(self.query(|s| s.list(&path)).await?),
            Request::Layout => Response::Layout(
                self.query(|s| {
                    Ok(Layout { table: s.table().clone(), workers: s.workers().values().cloned().collect() })
                })
                .await?,
            ),
            Request::Status => {
                self.refresh_stats().await;
                Response::Status(self.status())
            }
            Request::Heartbeat { id, stats } => {
                let known = self.inner.lock().state.workers().contains_key(&id);
                if known {
                    self.live.lock().insert(id, Live { last_seen: Instant::now(), stats });
                }
                Response::HeartbeatAck { known }
            }
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("the coordinator does not serve {}", request_name(&other)),
                ))
            }
        })
    }
}

fn request_name(r: &Request) -> &'static str {
    match r {
        Request::PutChunk { .. } => "PutChunk",
        Request::GetChunk { .. } => "GetChunk",
        Request::DeleteInodes { .. } => "DeleteInodes",
        Request::SetAttrs { .. } => "SetAttrs",
        Request::WorkerStats => "WorkerStats",
        Request::CreateChunk { .. } => "CreateChunk",
        Request::ReadRange { .. } => "ReadRange",
        Request::WriteRanges { .. } => "WriteRanges",
        Request::DeleteChunks { .. } => "DeleteChunks",
        Request::Locate { .. } => "Locate",
        _ => "this request",
    }
}

impl Handler for Coordinator {
    async fn handle(&self, req: Request, _payload: Bytes) -> (Response, Bytes) {
        match self.dispatch(req).await {
            Ok(r) => (r, Bytes::new()),
            Err(e) => (Response::Error(e), Bytes::new()),
        }
    }
}
