//! A storage worker: contributes a MEM budget and a DISK budget to the pool.
//!
//! - [`service`]: the data-plane handler over the tier manager;
//! - this module: start-up (identity, registration) and the heartbeat loop.
//!
//! The worker's identity is kept in `DIR/worker.id`, so a restarted worker
//! gets its partitions back and serves the DISK chunks it left.

pub mod service;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tierpool_meta::{MetaOp, MetaReply};
use tierpool_net::{Pool, PoolConfig};
use tierpool_proto::{Request, Response};
use tierpool_tier::{TierConfig, TierManager};
use tierpool_types::{Error, ErrorKind, Result, WorkerId};

#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub dir: PathBuf,
    pub coordinator: String,
    /// Address to listen on (port 0 picks a free port).
    pub listen: String,
    pub host: String,
    pub rack: String,
    pub mem: u64,
    pub disk: u64,
}

fn read_id(dir: &std::path::Path) -> Result<Option<WorkerId>> {
    match std::fs::read_to_string(dir.join("worker.id")) {
        Ok(s) => s
            .trim()
            .parse::<u32>()
            .map(|n| Some(WorkerId(n)))
            .map_err(|_| Error::new(ErrorKind::Corrupt, format!("{}/worker.id is not a worker id", dir.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

struct Registration {
    cfg: WorkerConfig,
    addr: String,
    coordinator: Pool,
}

impl Registration {
    /// Registers (again), retrying until the coordinator answers.
    async fn register(&self, id: Option<WorkerId>) -> Result<WorkerId> {
        let op = MetaOp::RegisterWorker {
            id,
            addr: self.addr.clone(),
            host: self.cfg.host.clone(),
            rack: self.cfg.rack.clone(),
            mem_capacity: self.cfg.mem,
            disk_capacity: self.cfg.disk,
        };
        let mut warned = false;
        loop {
            match self.coordinator.call(&Request::Meta(op.clone()), &[], false).await {
                Ok((Response::Meta(MetaReply::Worker { id }), _)) => {
                    std::fs::write(self.cfg.dir.join("worker.id"), id.0.to_string())?;
                    tracing::info!("registered as worker {id} at {}", self.addr);
                    return Ok(id);
                }
                Ok((other, _)) => return Err(Error::new(ErrorKind::Protocol, format!("unexpected reply {other:?}"))),
                Err(e) if e.kind == ErrorKind::Unavailable => {
                    if !warned {
                        tracing::warn!("waiting for coordinator {}: {e}", self.cfg.coordinator);
                        warned = true;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => return Err(e.context("registering with the coordinator")),
            }
        }
    }
}

/// Opens the tiers, binds, registers, and serves until the process ends.
pub async fn run(cfg: WorkerConfig) -> Result<()> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| Error::from(e).context(cfg.dir.display()))?;
    let tiers = Arc::new(tokio::task::block_in_place(|| {
        TierManager::open(TierConfig {
            mem_budget: cfg.mem,
            disk_dir: cfg.dir.join("chunks"),
            disk_budget: cfg.disk,
            promote_after_reads: 2,
        })
    })?);
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| Error::from(e).context(format!("cannot listen on {}", cfg.listen)))?;
    let addr = listener.local_addr()?.to_string();
    let reg = Registration {
        cfg: cfg.clone(),
        addr: addr.clone(),
        coordinator: Pool::new(cfg.coordinator.clone(), PoolConfig::default()),
    };
    let id = reg.register(read_id(&cfg.dir)?).await?;
    let svc = Arc::new(service::WorkerService::new(tiers));
    tokio::spawn(heartbeat(reg, id, svc.clone()));
    write_addr_file(&cfg.dir.join("worker.addr"), &addr)?;
    tierpool_net::serve(listener, svc).await?;
    Ok(())
}

fn write_addr_file(path: &std::path::Path, addr: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, addr)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn heartbeat(reg: Registration, mut id: WorkerId, svc: Arc<service::WorkerService>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let req = Request::Heartbeat { id, stats: svc.stats() };
        match reg.coordinator.call(&req, &[], true).await {
            Ok((Response::HeartbeatAck { known: false }, _)) => match reg.register(Some(id)).await {
                Ok(new_id) => id = new_id,
                Err(e) => tracing::warn!("re-registration failed: {e}"),
            },
            Ok(_) => {}
            Err(e) => tracing::debug!("heartbeat failed: {e}"),
        }
    }
}
