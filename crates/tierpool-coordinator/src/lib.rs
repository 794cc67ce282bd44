//! The coordinator: owns the metadata, never touches chunk bytes.
//!
//! - [`records`]: the versioned bytes of log records and snapshots;
//! - [`log`]: the durable metadata log (segments + snapshot, group commit, recovery);
//! - [`service`]: the shell around the pure [`tierpool_meta::engine::Engine`]:
//!   one handler per request, the clock, the log;
//! - [`effects`]: carries out what the engine decides (attribute pushes,
//!   deletion of garbage from the workers);
//! - [`sweep`]: finds and deletes orphaned chunks on the workers;
//! - [`migrate`]: moves partitions between workers toward the goal the
//!   engine sets (after a join, a drain, a rebalance), and gives workers
//!   the partition table.
//!
//! A metadata change is acknowledged only after the log record holding it is
//! on disk; reads wait until everything they may have seen is on disk too.
//!
//! The coordinator holds the pool's secret: `DIR/secret`, made on first
//! start, unless `secret_file` names another. Every peer proves it knows
//! it, and so does the coordinator to the workers it calls.

pub mod effects;
mod feed;
pub mod log;
pub mod migrate;
pub mod pages;
pub mod records;
pub mod replication;
pub mod service;
mod status;
pub mod sweep;
mod written;

pub use log::LogSync;

use std::path::PathBuf;
use std::time::Duration;
use tierpool_meta::engine::EngineConfig;
use tierpool_net::{Background, Limits, Secret};
use tierpool_types::{Error, Result};

/// Copies of each chunk a new pool keeps unless told otherwise: one worker
/// can die (or lose its memory) without losing a byte.
pub const DEFAULT_REPLICAS: u8 = 2;

/// How often the coordinator lets time act (liveness, garbage due).
const TICK: Duration = Duration::from_millis(500);

/// How a coordinator runs.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// State directory: metadata log and snapshots live in `DIR/meta`.
    pub dir: PathBuf,
    /// Address to listen on, e.g. `127.0.0.1:7700` (port 0 picks a free port).
    pub listen: String,
    /// Partition count of a new pool; ignored when the pool exists.
    pub partitions: u32,
    /// Copies of each chunk a new pool keeps at most (the default of every
    /// path); `None`: [`DEFAULT_REPLICAS`]. An existing pool keeps its own,
    /// and refuses to start with another.
    pub replicas: Option<u8>,
    /// What a new pool keeps replicas apart by (`None`: hosts); an
    /// existing pool keeps its own, and refuses to start with another.
    pub spread: Option<tierpool_types::Spread>,
    /// A worker without a heartbeat for this long is reported dead.
    pub dead_after: Duration,
    /// Chunks of a removed or replaced file are deleted after this grace period,
    /// so readers that resolved the old file can finish.
    pub gc_grace: Duration,
    /// Take a snapshot after this many log records.
    pub snapshot_every: u64,
    /// A client's hold on the inodes it has open (so their chunks outlive
    /// their names) lapses this long after its last renewal. Clients renew
    /// well within it; it must exceed `gc_grace` less their renewal period.
    pub hold_period: Duration,
    /// How often every worker's chunks are checked for orphans (chunks no
    /// file, hold or writer will ever use), which are then deleted.
    pub sweep_every: Duration,
    /// What peers may make the coordinator hold (see `tierpool_net::Limits`).
    pub limits: Limits,
    /// Most partitions moving between workers at once.
    pub max_moving: usize,
    /// Most bytes a second all moves of partitions copy together (0: no limit).
    pub move_rate: u64,
    /// The pool's secret; `None`: `DIR/secret`, made on first start.
    pub secret_file: Option<PathBuf>,
    /// Percent points a worker's measured bandwidth must fall below the
    /// fastest worker's before its share shrinks with it (0: shares by
    /// capacity only).
    pub speed_threshold: u8,
    /// How long a worker's bandwidth must stay off before its share
    /// changes; also the window it is measured over.
    pub speed_window: Duration,
    /// Most files one transaction may write.
    pub tx_max_files: usize,
    /// Most region pages one transaction may write.
    pub tx_max_pages: usize,
    /// Largest file the metadata keeps inline, bytes and all (0: none;
    /// at most `tierpool_meta::INLINE_MAX`).
    pub inline_max: u64,
    /// Most bytes of files the metadata keeps inline in all; past it,
    /// small files go to the workers.
    pub inline_total: u64,
    /// Whether transactions' commits are checked for write-write conflicts
    /// (off only to show that a history checker notices lost updates).
    pub check_writes: bool,
    /// When the metadata log is fsynced: before every acknowledgement, or
    /// within a period (acknowledged once written: see [`LogSync`]).
    pub log_sync: LogSync,
}

/// Files of up to 4 KiB are kept inline by default.
pub const DEFAULT_INLINE_MAX: u64 = 4 << 10;
/// At most 256 MiB of them by default (they are in every snapshot, which
/// is written while the metadata waits).
pub const DEFAULT_INLINE_TOTAL: u64 = 256 << 20;

impl CoordinatorConfig {
    pub fn new(dir: PathBuf, listen: String) -> Self {
        CoordinatorConfig {
            dir,
            listen,
            partitions: tierpool_types::DEFAULT_PARTITIONS,
            replicas: None,
            spread: None,
            dead_after: Duration::from_secs(3),
            gc_grace: Duration::from_secs(5),
            snapshot_every: 100_000,
            hold_period: Duration::from_secs(10),
            sweep_every: Duration::from_secs(60),
            limits: Limits::default(),
            max_moving: 64,
            move_rate: 0,
            secret_file: None,
            speed_threshold: 20,
            speed_window: Duration::from_secs(30),
            tx_max_files: tierpool_meta::engine::transactions::MAX_TX_FILES,
            tx_max_pages: tierpool_meta::engine::transactions::MAX_TX_PAGES,
            inline_max: DEFAULT_INLINE_MAX,
            inline_total: DEFAULT_INLINE_TOTAL,
            check_writes: true,
            log_sync: LogSync::Always,
        }
    }

    /// The pool's secret: `secret_file`, or `DIR/secret`, made now if it is not there.
    pub fn secret(&self) -> Result<Secret> {
        if let Some(path) = &self.secret_file {
            return Secret::load(path);
        }
        let path = self.dir.join("secret");
        let (secret, made) = Secret::load_or_create(&path)?;
        if made {
            tracing::info!("made the pool's secret in {}", path.display());
        }
        Ok(secret)
    }

    pub(crate) fn engine(&self) -> EngineConfig {
        EngineConfig {
            dead_after: self.dead_after,
            gc_grace: self.gc_grace,
            hold_period: self.hold_period,
            gc_batch: 10_000,
            max_moving: self.max_moving,
            speed_threshold: self.speed_threshold,
            speed_window: self.speed_window,
            tx_max_files: self.tx_max_files,
            tx_max_pages: self.tx_max_pages,
        }
    }
}

/// Reads (or makes) the pool's secret, recovers the state, binds, writes
/// `DIR/coordinator.addr`, and serves until the process ends.
pub async fn run(cfg: CoordinatorConfig) -> Result<()> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| Error::from(e).context(cfg.dir.display()))?;
    let secret = cfg.secret()?;
    let started = std::time::Instant::now();
    let (state, lsn, writer) = log::open_with(&cfg.dir.join("meta"), cfg.log_sync)?;
    tracing::info!("recovered metadata at lsn {lsn} ({} inodes) in {:?}", state.inode_count(), started.elapsed());
    let listener = tierpool_net::bind(&cfg.listen).await?;
    let addr = listener.local_addr()?;
    let svc = service::Coordinator::new(cfg.clone(), secret.clone().into(), state, lsn, writer);
    svc.initialise().await?;
    svc.pages.serving_at(&addr);
    write_addr_file(&cfg.dir.join("coordinator.addr"), &addr)?;
    tracing::info!("coordinator listening on {addr}");
    let ticker = svc.clone();
    let _tick = Background::every("policy", TICK, move || {
        let svc = ticker.clone();
        async move {
            svc.tick();
            Ok(tierpool_net::Step::Continue)
        }
    });
    tokio::spawn(effects::mark_reclaimable(svc.clone()));
    tokio::spawn(migrate::drive(svc.clone()));
    tokio::spawn(migrate::probe(svc.clone()));
    tokio::spawn(pages::drive(svc.clone()));
    let sweeper = svc.clone();
    let _sweep = Background::every("orphan sweep", cfg.sweep_every, move || {
        let svc = sweeper.clone();
        async move {
            sweep::sweep_all(&svc).await?;
            Ok(tierpool_net::Step::Continue)
        }
    });
    tierpool_net::serve(listener, svc, cfg.limits.clone(), secret).await?;
    Ok(())
}

/// Writes `addr` to `path` atomically, so a reader never sees half an address.
pub fn write_addr_file(path: &std::path::Path, addr: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, addr)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
