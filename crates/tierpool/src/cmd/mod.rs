//! Command implementations; `run` wires parsed arguments to them.

mod bench;
mod dir_lock;
mod fs;
mod members;
mod mount;
mod pool;
mod replicas;
mod server;
mod snapshot;
mod under;
mod write_back;

use crate::cli::{Cli, Cmd, Conn, WorkerAction, WorkerCmd};
use anyhow::Result;
use tierpool_client::{Client, ClientConfig};

pub fn run(cli: Cli) -> Result<()> {
    let server = matches!(cli.cmd, Cmd::Coordinator { .. } | Cmd::Worker(WorkerCmd { action: None, .. }));
    // The under-store libraries' own retries are not the user's concern; their outcome is.
    init_logging(if server { "info,opendal=error,hdfs_native=error" } else { "warn,opendal=error,hdfs_native=error" });
    if let Cmd::Up(a) = &cli.cmd {
        // `up` forks servers; it needs no runtime of its own.
        return pool::up(a);
    }
    if let Cmd::Down { dir } = &cli.cmd {
        return pool::down(dir);
    }
    match &cli.cmd {
        Cmd::Mount { mountpoint, cache, dirty, foreground, conn } => {
            let opts = tierpool_fuse::MountOptions { cache: *cache, dirty: *dirty };
            return mount::mount(mountpoint, &opts, *foreground, conn);
        }
        Cmd::Umount { mountpoint } => return mount::umount(mountpoint),
        Cmd::Worker(WorkerCmd { action: None, .. }) => server::return_freed_memory(),
        _ => {}
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Cmd::Bench(a) = &cli.cmd {
        rt.worker_threads(bench::client_threads(a)?);
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Coordinator(a) => server::coordinator(a).await,
            Cmd::Worker(WorkerCmd { action: Some(WorkerAction::Drain { worker, wait, conn }), .. }) => {
                members::drain(&connect(&conn).await?, worker, wait).await
            }
            Cmd::Worker(WorkerCmd { action: Some(WorkerAction::Remove { worker, conn }), .. }) => {
                members::remove(&connect(&conn).await?, worker).await
            }
            Cmd::Worker(WorkerCmd { action: None, run }) => server::worker(run).await,
            Cmd::Status { json, conn } => pool::status(&connect(&conn).await?, json).await,
            Cmd::Bench(a) => bench::run(&connect(&a.conn).await?, &a).await,
            Cmd::Rebalance { dry_run, wait, conn } => members::rebalance(&connect(&conn).await?, dry_run, wait).await,
            Cmd::Replicas { path, copies, recursive, json, conn } => {
                replicas::set(&connect(&conn).await?, &path, copies, recursive, json).await
            }
            Cmd::Placement { path, policy, recursive, json, conn } => {
                replicas::place(&connect(&conn).await?, &path, policy, recursive, json).await
            }
            Cmd::Fsck { path, json, conn } => replicas::fsck(&connect(&conn).await?, &path, json).await,
            Cmd::Attach { uri, path, mode, readonly, endpoint, region, profile, options, json, conn } => {
                let opts = under::options(endpoint, region, profile, &options)?;
                under::attach(&connect(&conn).await?, &uri, &path, mode, readonly, &opts, json).await
            }
            Cmd::Detach { path, force, json, conn } => under::detach(&connect(&conn).await?, &path, force, json).await,
            Cmd::Snapshot(cmd) => snapshot::run(cmd).await,
            Cmd::Attachments { json, conn } => under::list(&connect(&conn).await?, json).await,
            Cmd::Load { path, recursive, json, conn } => {
                under::load(&connect(&conn).await?, &path, recursive, json).await
            }
            Cmd::Free { path, recursive, json, conn } => {
                under::free(&connect(&conn).await?, &path, recursive, json).await
            }
            Cmd::Sync { path, json, conn } => under::sync(&connect(&conn).await?, &path, json).await,
            Cmd::WriteMode { path, mode, recursive, json, conn } => {
                under::write_mode(&connect(&conn).await?, &path, mode.map(|m| m.0), recursive, json).await
            }
            Cmd::SyncMeta { path, json, conn } => under::sync_meta(&connect(&conn).await?, &path, json).await,
            other => fs::run(other).await,
        }
    })
}

/// A command's verdict given as its exit status: what it found is printed
/// already, so nothing more is said (`main` exits with the status).
#[derive(Debug)]
pub struct ExitStatus(pub i32);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for ExitStatus {}

pub async fn connect(conn: &Conn) -> Result<Client> {
    Ok(Client::connect(client_config(conn)).await?)
}

/// How a command reaches the pool: its address and secret file.
pub fn client_config(conn: &Conn) -> ClientConfig {
    let mut cfg = ClientConfig::new(conn.coordinator.clone());
    cfg.secret_file = conn.secret_file.clone();
    cfg
}

fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIERPOOL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
