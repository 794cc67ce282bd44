//! `tierpool coordinator` and `tierpool worker`: the server processes, in the
//! foreground, until SIGTERM or Ctrl-C, or with `--stop-with PID`, until that
//! process is gone (so a pool started for a program never outlives it, even
//! when the program is killed with SIGKILL). Each holds its --dir's lock
//! while it runs (`dir_lock`): a second one of its role there is refused.
//! A stopping worker first writes what its MEM tier holds to its DISK tier
//! (see `tierpool_worker::run`).

use crate::cli::{CoordinatorArgs, WorkerArgs};
use anyhow::Result;
use std::time::Duration;
use tierpool_coordinator::CoordinatorConfig;
use tierpool_worker::WorkerConfig;

/// How often a server looks whether its `--stop-with` process still runs.
const WATCH_EVERY: Duration = Duration::from_millis(200);

pub async fn coordinator(a: CoordinatorArgs) -> Result<()> {
    let _lock = super::dir_lock::hold(&a.dir, "coordinator")?;
    let mut cfg = CoordinatorConfig::new(a.dir, a.listen);
    cfg.partitions = a.partitions;
    cfg.replicas = a.replicas;
    cfg.spread = a.spread;
    anyhow::ensure!(
        a.dead_after.0 >= Duration::from_secs(2),
        "--dead-after must be at least 2s (workers send a heartbeat every second)"
    );
    cfg.dead_after = a.dead_after.0;
    cfg.sweep_every = a.sweep_every.0;
    anyhow::ensure!(
        a.hold_period.0 >= std::time::Duration::from_secs(4),
        "--hold-period must be at least 4s (clients renew every 2s)"
    );
    cfg.hold_period = a.hold_period.0;
    cfg.max_moving = a.max_moving as usize;
    cfg.move_rate = a.move_rate.0;
    cfg.speed_threshold = a.bandwidth_threshold;
    cfg.speed_window = a.bandwidth_window.0;
    anyhow::ensure!(
        a.inline_max.0 <= tierpool_meta::INLINE_MAX,
        "--inline-max must be at most {}",
        tierpool_types::ByteSize(tierpool_meta::INLINE_MAX)
    );
    cfg.inline_max = a.inline_max.0;
    cfg.inline_total = a.inline_total.0;
    cfg.check_writes = !a.unsafe_no_write_check;
    cfg.tx_max_files = a.tx_max_files as usize;
    cfg.tx_max_pages = a.tx_max_pages as usize;
    cfg.log_sync = a.log_sync;
    if a.unsafe_no_write_check {
        tracing::warn!("transactions commit without the write-write check: updates will be lost");
    }
    cfg.limits = a.limits.apply(tierpool_net::Limits::default());
    cfg.secret_file = a.secret_file;
    anyhow::ensure!(a.write_back_every.0 >= Duration::from_millis(10), "--write-back-every must be at least 10ms");
    let write_back = super::write_back::run(cfg.clone(), a.write_back_every.0);
    tokio::select! {
        r = tierpool_coordinator::run(cfg) => r?,
        _ = write_back => {}
        _ = shutdown_signal() => tracing::info!("coordinator stopping"),
        pid = exit_of(a.stop_with) => tracing::info!("process {pid} is gone; coordinator stopping"),
    }
    Ok(())
}

/// A worker's memory is its MEM budget plus what requests in flight hold.
/// Chunk buffers (megabytes each) come and go; left to itself the C
/// allocator raises its threshold for mapping large blocks the first time
/// one is freed, after which freed chunk buffers stay in the heap and the
/// process keeps growing past its budget. A fixed threshold keeps every
/// chunk buffer in a mapping of its own, returned to the system when freed.
pub fn return_freed_memory() {
    // SAFETY: mallopt only tunes the allocator; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

pub async fn worker(a: WorkerArgs) -> Result<()> {
    let host = a.host.unwrap_or_else(hostname);
    let (Some(dir), Some(mem), Some(disk)) = (a.dir, a.mem, a.disk) else {
        anyhow::bail!("a worker needs --dir, --mem and --disk");
    };
    let _lock = super::dir_lock::hold(&dir, "worker")?;
    let found = tierpool_net::auth::find_secret(a.conn.secret_file.as_deref(), &a.conn.coordinator)?;
    let Some(secret) = found.secret().cloned() else {
        anyhow::bail!(
            "a worker needs the pool's secret: name the file with --secret-file or TIERPOOL_SECRET_FILE \
             (the coordinator keeps it as `secret` in its --dir)"
        );
    };
    let cfg = WorkerConfig {
        dir,
        coordinator: a.conn.coordinator,
        listen: a.listen,
        host,
        rack: a.rack,
        mem,
        disk,
        limits: a.limits.apply(tierpool_net::Limits::worker()),
        secret,
        prefault: a.prefault,
    };
    let stop = async move {
        tokio::select! {
            _ = shutdown_signal() => tracing::info!("worker stopping"),
            pid = exit_of(a.stop_with) => tracing::info!("process {pid} is gone; worker stopping"),
        }
    };
    tierpool_worker::run(cfg, stop).await?;
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

/// Resolves with `pid` once that process has exited (at once if it already
/// has); never without one.
async fn exit_of(pid: Option<u32>) -> u32 {
    let Some(pid) = pid else { return std::future::pending().await };
    let watched = Process::of(pid);
    while watched.running() {
        tokio::time::sleep(WATCH_EVERY).await;
    }
    pid
}

/// A process, told apart from a later one that reuses its id by its start time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Process {
    pid: u32,
    /// Clock ticks after boot at which it started (`/proc/PID/stat` field 22).
    started: Option<u64>,
}

impl Process {
    pub(crate) fn of(pid: u32) -> Process {
        Process { pid, started: proc_stat(pid).map(|s| s.1) }
    }

    /// Whether it still runs: it exists, has not exited (a zombie has), and is
    /// the same process as when first seen.
    pub(crate) fn running(&self) -> bool {
        let Ok(raw) = i32::try_from(self.pid) else { return false };
        // SAFETY: signal 0 only checks that the process exists.
        let exists =
            unsafe { libc::kill(raw, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return false;
        }
        match (proc_stat(self.pid), self.started) {
            (Some(('Z' | 'X', _)), _) => false,
            (Some((_, now)), Some(then)) => now == then,
            // No /proc to read: existing is all that can be known.
            _ => true,
        }
    }
}

/// `(state, start time)` of a process from `/proc/PID/stat`.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
    let rest = &s[s.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let started = fields.get(19)?.parse().ok()?;
    Some((state, started))
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_runs_and_an_exited_one_does_not() {
        let me = Process::of(std::process::id());
        assert!(me.started.is_some() && me.running());
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let watched = Process::of(child.id());
        assert!(watched.running());
        child.kill().unwrap();
        // Not reaped yet: a zombie has exited all the same.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!watched.running());
        child.wait().unwrap();
        assert!(!watched.running());
    }

    #[test]
    fn a_reused_process_id_is_another_process() {
        let me = Process::of(std::process::id());
        let earlier = Process { started: me.started.map(|t| t.wrapping_sub(1)), ..me };
        assert!(!earlier.running());
    }
}
