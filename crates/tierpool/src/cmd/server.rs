//! `tierpool coordinator` and `tierpool worker`: the server processes, in the foreground.

use crate::cli::WorkerArgs;
use anyhow::Result;
use std::path::PathBuf;
use tierpool_coordinator::CoordinatorConfig;
use tierpool_worker::WorkerConfig;

pub async fn coordinator(dir: PathBuf, listen: String, partitions: u32) -> Result<()> {
    anyhow::ensure!(partitions > 0, "--partitions must be at least 1");
    let mut cfg = CoordinatorConfig::new(dir, listen);
    cfg.partitions = partitions;
    tokio::select! {
        r = tierpool_coordinator::run(cfg) => r?,
        _ = shutdown_signal() => tracing::info!("coordinator stopping"),
    }
    Ok(())
}

pub async fn worker(a: WorkerArgs) -> Result<()> {
    let host = a.host.unwrap_or_else(hostname);
    let cfg = WorkerConfig {
        dir: a.dir,
        coordinator: a.conn.coordinator,
        listen: a.listen,
        host,
        rack: a.rack,
        mem: a.mem,
        disk: a.disk,
    };
    tokio::select! {
        r = tierpool_worker::run(cfg) => r?,
        _ = shutdown_signal() => tracing::info!("worker stopping"),
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
