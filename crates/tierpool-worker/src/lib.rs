//! A storage worker: contributes a MEM budget and a DISK budget to the pool.
//!
//! - [`service`]: the data-plane handler over the tier manager, one
//!   handler per request;
//! - [`routing`]: which chunk requests this worker serves, by partition
//!   (pure);
//! - [`moves`]: both ends of a partition moving between workers, and the
//!   deletion of chunks of partitions no longer held;
//! - [`identity`]: the worker's identity on disk (a versioned file);
//! - this module: start-up (identity, registration, the table) and the
//!   heartbeat loop.
//!
//! The worker's identity is kept in `DIR/worker.state`, so a restarted
//! worker gets its partitions back and serves the DISK chunks it left. A
//! worker asked to stop writes what MEM holds to DISK first and marks the
//! stop clean (`CLEAN_STOP`), so that it comes back with every chunk. It
//! serves chunk requests only once it has the partition table, fetched
//! right after registering and kept current by the coordinator's pushes
//! and, should one be lost, by the version each heartbeat's answer carries.
//!
//! A worker holds the pool's secret (`WorkerConfig::secret`): its peers
//! prove they know it, and every connection it opens (to the coordinator,
//! and to other workers) proves it in turn, through `PoolConfig::with`.

pub mod identity;
pub mod moves;
pub mod routing;
pub mod service;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tierpool_meta::{MetaOp, MetaReply, Owner};
use tierpool_net::{Background, Limits, Pool, PoolConfig, Secret, Step};
use tierpool_proto::{CoordRequest, CoordResponse, Coordinator};
use tierpool_tier::{TierConfig, TierManager};
use tierpool_types::{ByteSize, Error, ErrorKind, Result, WorkerId};

/// Left in the worker's directory by a stop that wrote every chunk held in
/// memory to disk; a worker started on it registers as having kept its
/// chunks, so it keeps its partitions instead of being refilled by its
/// siblings. Removed at start, before anything is served.
const CLEAN_STOP: &str = "stopped-clean";

/// How often a worker tells the coordinator it is alive, with its figures.
const HEARTBEAT: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// State directory: DISK tier chunks (`chunks/`) and identity.
    pub dir: PathBuf,
    /// Coordinator address, `host:port`.
    pub coordinator: String,
    /// Address to listen on (port 0 picks a free port).
    pub listen: String,
    /// Host label used for placement.
    pub host: String,
    /// Rack label used for placement.
    pub rack: String,
    /// Bytes of chunk data the MEM tier may hold.
    pub mem: ByteSize,
    /// Bytes of chunk data the DISK tier may hold.
    pub disk: ByteSize,
    /// What peers may make the worker hold (see `tierpool_net::Limits::worker`).
    pub limits: Limits,
    /// The pool's secret: what peers must prove, and what this worker proves.
    pub secret: Secret,
    /// Fill the chunk buffers ahead, a MEM budget's worth, from the start
    /// (`--prefault`): the first chunks written find their pages ready, and
    /// the worker holds that memory whether used or not.
    pub prefault: bool,
}

/// Chunks read from DISK held in memory at once (answers being written).
/// With the frame budget and the spare buffers this bounds what the
/// worker holds beyond its MEM budget: `limits.budget + (DISK_READS +
/// SPARE_BUFFERS) * chunk size + SPARE_SMALL` (320 MiB with 4 MiB chunks),
/// plus the process's own few tens of MiB, and the slack of the buffers
/// that hold chunks shorter than a chunk (an eighth of them at most).
/// With `prefault`, the buffers spare and in use are kept within the MEM
/// budget that chunks held without one leave, and `SPARE_BUFFERS` more
/// (see `WorkerService::fit_buffers`).
pub const DISK_READS: usize = 16;

/// Chunk buffers freed (a chunk deleted or moved to DISK) kept for the
/// next chunks written, without `prefault`: enough for steady writes into
/// a full MEM tier not to fault fresh pages in.
pub const SPARE_BUFFERS: usize = 16;

/// Bytes of freed buffers shorter than a chunk (small chunks, requests
/// carrying many) kept for the next ones, by size class.
pub const SPARE_SMALL: u64 = 64 << 20;

struct Registration {
    cfg: WorkerConfig,
    addr: String,
    coordinator: Pool<Coordinator>,
}

impl Registration {
    /// Registers (again), retrying until the coordinator answers. `kept`:
    /// this process started on what a clean stop left (see `CLEAN_STOP`).
    async fn register(&self, id: Option<WorkerId>, kept: bool) -> Result<WorkerId> {
        let op = MetaOp::RegisterWorker {
            id,
            addr: self.addr.clone(),
            host: self.cfg.host.clone(),
            rack: self.cfg.rack.clone(),
            mem_capacity: self.cfg.mem.0,
            disk_capacity: self.cfg.disk.0,
            at_once: kept && id.is_some(),
        };
        let req = CoordRequest::Meta { op, owner: Owner::default() };
        let mut warned = false;
        loop {
            match self.coordinator.call(&req, &[], false).await {
                Ok((CoordResponse::Meta(MetaReply::Worker { id }), _)) => {
                    identity::store(&self.cfg.dir, &identity::Identity { id })?;
                    tracing::info!("registered as worker {id} at {}", self.addr);
                    return Ok(id);
                }
                Ok((other, _)) => return Err(Error::new(ErrorKind::Protocol, format!("unexpected reply {other:?}"))),
                Err(e) if e.kind == ErrorKind::InvalidArgument && e.message.contains("was removed from the pool") => {
                    // Serving on would only confuse clients: this worker is no one's.
                    tracing::error!("{}", e.message);
                    eprintln!("tierpool worker: {}", e.message);
                    std::process::exit(3);
                }
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

    /// One heartbeat; registers again if the coordinator does not know
    /// this worker, asks for the table if its own is older.
    async fn beat(&self, svc: &service::WorkerService) -> Result<Step> {
        svc.fit_buffers();
        let Some(current) = svc.id() else { return Ok(Step::Continue) };
        let req = CoordRequest::Heartbeat { id: current, stats: svc.stats() };
        match self.coordinator.call(&req, &[], true).await? {
            (CoordResponse::HeartbeatAck { known: false, .. }, _) => {
                let id = self.register(Some(current), false).await?;
                svc.set_id(id);
                self.fetch_table(svc).await?;
            }
            (CoordResponse::HeartbeatAck { known: true, table }, _) if table > svc.table_version() => {
                self.fetch_table(svc).await?;
            }
            _ => {}
        }
        Ok(Step::Continue)
    }

    /// Asks the coordinator for the partition table and serves by it.
    async fn fetch_table(&self, svc: &service::WorkerService) -> Result<()> {
        match self.coordinator.call(&CoordRequest::Layout, &[], true).await? {
            (CoordResponse::Layout(l), _) => {
                svc.apply_table(l.version, l.table);
                Ok(())
            }
            (other, _) => Err(Error::new(ErrorKind::Protocol, format!("unexpected reply {other:?}"))),
        }
    }
}

/// Opens the tiers, binds, registers, and serves until `stop` resolves;
/// then takes no more writes and moves what MEM holds to DISK (serving
/// reads meanwhile), so a restart on the same directory serves it again.
pub async fn run(cfg: WorkerConfig, stop: impl std::future::Future<Output = ()>) -> Result<()> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| Error::from(e).context(cfg.dir.display()))?;
    let tiers = Arc::new(tokio::task::block_in_place(|| {
        TierManager::open(TierConfig {
            mem_budget: cfg.mem,
            disk_dir: cfg.dir.join("chunks"),
            disk_budget: cfg.disk,
            promote_after_reads: 2,
            disk_reads: DISK_READS,
        })
    })?);
    let listener = tierpool_net::bind(&cfg.listen).await?;
    let addr = listener.local_addr()?;
    let buffers = chunk_buffers(&cfg);
    let server = tierpool_net::Server::new(listener, cfg.limits.clone(), cfg.secret.clone())?;
    let server = server.with_buffers(buffers.clone());
    let reg = Arc::new(Registration {
        cfg: cfg.clone(),
        addr: addr.clone(),
        coordinator: Pool::new(cfg.coordinator.clone(), PoolConfig::with(cfg.secret.clone())),
    });
    let known = identity::load(&cfg.dir)?.map(|i| i.id);
    // Taken before serving: a crash from here on is not a clean stop.
    let kept = std::fs::remove_file(cfg.dir.join(CLEAN_STOP)).is_ok();
    let svc = Arc::new(service::WorkerService::new(tiers.clone(), cfg.secret.clone().into()));
    svc.set_server_stats(server.stats());
    svc.set_buffers(buffers, cfg.prefault);
    svc.set_id(reg.register(known, kept).await?);
    reg.fetch_table(&svc).await?;
    tokio::spawn(moves::drop_strays(svc.clone()));
    let beat_svc = svc.clone();
    let _heartbeat = Background::every("heartbeat", HEARTBEAT, move || {
        let (reg, svc) = (reg.clone(), beat_svc.clone());
        async move { reg.beat(&svc).await }
    });
    write_addr_file(&cfg.dir.join("worker.addr"), &addr)?;
    let serving = tokio::spawn(server.run(svc));
    tokio::select! {
        r = serving => return r.map_err(|e| Error::internal(format!("server task: {e}")))?,
        _ = stop => {}
    }
    if tokio::task::block_in_place(|| spill(&tiers))? {
        write_addr_file(&cfg.dir.join(CLEAN_STOP), "every chunk held was written to disk\n")?;
    }
    Ok(())
}

/// The buffers spare and in use a worker with `prefault` keeps, with
/// `without` chunks' worth of MEM held outside them: what is left of its
/// MEM budget, and `SPARE_BUFFERS` more.
pub(crate) fn buffer_limit(mem: u64, size: u64, without: u64) -> usize {
    ((mem / size).saturating_sub(without) as usize).saturating_add(SPARE_BUFFERS)
}

/// The buffers chunks being written are read into; with `prefault`, a
/// MEM budget's worth (at least `SPARE_BUFFERS`), filled by a thread of
/// their own.
fn chunk_buffers(cfg: &WorkerConfig) -> Arc<tierpool_net::ChunkBuffers> {
    let size = tierpool_types::DEFAULT_CHUNK_SIZE;
    let keep = if cfg.prefault { ((cfg.mem.0 / size) as usize).max(SPARE_BUFFERS) } else { SPARE_BUFFERS };
    let buffers = tierpool_net::ChunkBuffers::with_small(size as usize, keep, SPARE_SMALL as usize);
    if cfg.prefault {
        buffers.set_limit(buffer_limit(cfg.mem.0, size, 0));
        let b = buffers.clone();
        let filling = std::thread::Builder::new().name("prefault".into()).spawn(move || {
            let started = std::time::Instant::now();
            let n = b.prefault();
            let bytes = ByteSize(n as u64 * size);
            tracing::info!("{n} chunk buffers ({bytes}) ready in {:.1?}", started.elapsed());
        });
        if let Err(e) = filling {
            tracing::warn!("chunk buffers are not filled ahead: cannot start a thread: {e}");
        }
    }
    buffers
}

/// Stops taking writes and writes MEM to DISK, logging progress; whether
/// every chunk held is on DISK now.
fn spill(tiers: &TierManager) -> Result<bool> {
    let held = tiers.stats();
    if held.mem_chunks == 0 {
        return Ok(tiers.close_and_spill(&|_| {})?.left_chunks == 0);
    }
    tracing::info!("stopping: writing {} chunks ({}) from memory to disk", held.mem_chunks, ByteSize(held.mem_used));
    let started = std::time::Instant::now();
    let last = std::sync::atomic::AtomicU64::new(0);
    let done = tiers.close_and_spill(&|s| {
        let secs = started.elapsed().as_secs();
        if secs > last.load(std::sync::atomic::Ordering::Relaxed) {
            last.store(secs, std::sync::atomic::Ordering::Relaxed);
            tracing::info!("stopping: {} of {} written to disk", ByteSize(s.bytes), ByteSize(held.mem_used));
        }
    })?;
    if done.left_chunks > 0 {
        tracing::error!(
            "stopping: disk has no room for {} chunks ({}) of memory: they are not kept by this worker",
            done.left_chunks,
            ByteSize(done.left_bytes)
        );
    } else {
        tracing::info!(
            "stopping: {} chunks ({}) written to disk in {:.1?}",
            done.chunks,
            ByteSize(done.bytes),
            started.elapsed()
        );
    }
    Ok(done.left_chunks == 0)
}

fn write_addr_file(path: &std::path::Path, addr: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, addr)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
