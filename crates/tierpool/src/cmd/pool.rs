//! `up`, `down` and `status`: the embedded pool and what a pool reports.
//!
//! `up` starts one coordinator and N workers as background processes (their
//! own session, logs under `DIR/logs`), records them in `DIR/pool.json`, and
//! returns once every worker is registered and alive and the partitions are
//! spread over them; `down` stops them. This
//! is the one launcher of local pools: `tierpool.local()` in Python runs
//! `up --port 0 --json --stop-with PID` and `down` too. With `--port 0` the
//! coordinator binds any free port and `up` reads the address it wrote to its
//! directory; with `--stop-with PID` every server exits by itself once that
//! process is gone.
//!
//! The pool's secret is the coordinator's (`DIR/coordinator/secret`, made on
//! its first start) unless `--secret-file` names one; `up` hands it to the
//! workers, and once the pool is ready records it for the coordinator's
//! address in `~/.tierpool/pools/` (`tierpool_net::auth::registry`), so
//! commands, Python and mounts on this machine find it with no flags.
//! `down` removes that record.

use super::server::Process;
use crate::cli::UpArgs;
use crate::output;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tierpool_client::view::StatusView;
use tierpool_client::{Client, ClientConfig};
use tierpool_net::auth::registry;
use tierpool_types::ByteSize;

#[derive(Serialize, Deserialize, Debug)]
struct PoolFile {
    coordinator: String,
    coordinator_pid: i32,
    worker_pids: Vec<i32>,
    /// The pool's secret (absent in files written before pools had one).
    #[serde(default)]
    secret_file: Option<PathBuf>,
}

/// Whether `pid` runs (exited but unreaped processes do not).
fn alive(pid: i32) -> bool {
    u32::try_from(pid).is_ok_and(|p| Process::of(p).running())
}

fn read_pool_file(dir: &Path) -> Option<PoolFile> {
    let s = std::fs::read_to_string(dir.join("pool.json")).ok()?;
    serde_json::from_str(&s).ok()
}

fn mem_total() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(4 << 30)
}

fn disk_free(dir: &Path) -> u64 {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else { return 8 << 30 };
    // SAFETY: statvfs fills the zeroed struct; the path is NUL-terminated.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) == 0 {
            s.f_bavail as u64 * s.f_frsize as u64
        } else {
            8 << 30
        }
    }
}

/// Defaults: a quarter of RAM and of free disk, split over the workers, capped.
fn default_budgets(a: &UpArgs) -> (u64, u64) {
    let n = u64::from(a.workers);
    let round = |x: u64| (x >> 20) << 20;
    let mem = a.mem.map(|m| m.0).unwrap_or_else(|| round((mem_total() / 4 / n).clamp(64 << 20, 4 << 30)));
    let disk = a.disk.map(|d| d.0).unwrap_or_else(|| round((disk_free(&a.dir) / 4 / n).clamp(256 << 20, 16 << 30)));
    (mem, disk)
}

pub(crate) fn spawn(exe: &Path, args: &[String], log: &Path) -> Result<i32> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(exe);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: setsid is async-signal-safe; it detaches the server from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("starting {}", exe.display()))?;
    Ok(child.id() as i32)
}

pub(crate) fn log_tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
}

pub fn up(a: &UpArgs) -> Result<()> {
    std::fs::create_dir_all(a.dir.join("logs")).with_context(|| format!("creating {}", a.dir.display()))?;
    let dir = a.dir.canonicalize()?;
    if let Some(p) = read_pool_file(&dir) {
        if alive(p.coordinator_pid) {
            bail!(
                "a pool is already running from {} (coordinator at {}); run `tierpool down` first",
                dir.display(),
                p.coordinator
            );
        }
    }
    if a.port != 0 && !tierpool_net::can_listen(&format!("127.0.0.1:{}", a.port)) {
        bail!("port {} is in use; choose another with --port", a.port);
    }
    let (mem, disk) = default_budgets(a);
    let exe = std::env::current_exe()?;
    let limit = Duration::from_secs(a.timeout);
    let stop_with: Vec<String> = a.stop_with.iter().flat_map(|p| ["--stop-with".into(), p.to_string()]).collect();
    let secret_file = match &a.secret_file {
        Some(f) => std::path::absolute(f)?,
        None => dir.join("coordinator/secret"),
    };
    let (cpid, addr) = start_coordinator(&exe, &dir, a, &stop_with, limit)?;
    let mut pids = vec![cpid];
    let mut worker_pids = Vec::new();
    let mut worker: Vec<String> =
        ["--mem", &mem.to_string(), "--disk", &disk.to_string(), "--coordinator", &addr].map(String::from).into();
    if a.prefault {
        worker.push("--prefault".into());
    }
    for i in 0..a.workers {
        let pid = start_worker(&exe, &dir, i, &worker, &secret_file, &stop_with)?;
        worker_pids.push(pid);
        pids.push(pid);
    }
    let pf = PoolFile {
        coordinator: addr.clone(),
        coordinator_pid: cpid,
        worker_pids: worker_pids.clone(),
        secret_file: Some(secret_file.clone()),
    };
    std::fs::write(dir.join("pool.json"), serde_json::to_string_pretty(&pf)?)?;
    if let Err(e) = wait_workers(&addr, &secret_file, a.workers as usize, &worker_pids, limit) {
        stop_all(&pids);
        let _ = std::fs::remove_file(dir.join("pool.json"));
        let tails: Vec<String> = (0..a.workers).map(|i| log_tail(&dir.join(format!("logs/worker-{i}.log")))).collect();
        bail!("workers did not start ({e}): {}", tails.join(" | "));
    }
    if let Err(e) = registry::record(&addr, &secret_file) {
        eprintln!("tierpool: the pool is up, but clients will need --secret-file: {e}");
    }
    let report = UpReport { pool: &pf, dir: &dir, workers: a.workers, mem, disk, partitions: a.partitions };
    report.print(a.json)
}

/// Starts worker `i` of the pool in `dir` with `args` and the pool's secret.
fn start_worker(
    exe: &Path,
    dir: &Path,
    i: u32,
    args: &[String],
    secret_file: &Path,
    stop_with: &[String],
) -> Result<i32> {
    let mut argv = vec!["worker".into(), "--dir".into(), path_arg(&dir.join(format!("worker-{i}")))];
    argv.extend(args.iter().cloned());
    argv.extend(["--secret-file".into(), path_arg(secret_file)]);
    argv.extend(stop_with.iter().cloned());
    spawn(exe, &argv, &dir.join(format!("logs/worker-{i}.log")))
}

/// What `up --json` prints: where the pool listens, its secret file, where
/// its state is, and its processes (the same ids `down` stops).
#[derive(Serialize)]
struct UpReport<'a> {
    #[serde(flatten)]
    pool: &'a PoolFile,
    dir: &'a Path,
    workers: u32,
    mem: u64,
    disk: u64,
    partitions: u32,
}

impl UpReport<'_> {
    fn print(&self, json: bool) -> Result<()> {
        if json {
            println!("{}", serde_json::to_string(self)?);
            return Ok(());
        }
        let secret = self.pool.secret_file.as_deref().unwrap_or(Path::new("?"));
        println!(
            "pool up: coordinator {}, {} workers with MEM {} + DISK {} each; state in {}; secret in {}",
            self.pool.coordinator,
            self.workers,
            ByteSize(self.mem),
            ByteSize(self.disk),
            self.dir.display(),
            secret.display()
        );
        Ok(())
    }
}

/// Starts the coordinator (on `--port`, or any free port for 0) and returns
/// its pid and the address it bound, read from the file it writes once it listens.
fn start_coordinator(
    exe: &Path,
    dir: &Path,
    a: &UpArgs,
    stop_with: &[String],
    limit: Duration,
) -> Result<(i32, String)> {
    let addr_file = dir.join("coordinator/coordinator.addr");
    let _ = std::fs::remove_file(&addr_file);
    let mut args = vec![
        "coordinator".into(),
        "--dir".into(),
        path_arg(&dir.join("coordinator")),
        "--listen".into(),
        format!("127.0.0.1:{}", a.port),
        "--partitions".into(),
        a.partitions.to_string(),
    ];
    // A new pool keeps two copies of each chunk, one with a single worker;
    // an existing one keeps its own unless told otherwise.
    let new_pool = !dir.join("coordinator/meta").exists();
    let replicas =
        a.replicas.or(new_pool.then_some(if a.workers < 2 { 1 } else { tierpool_coordinator::DEFAULT_REPLICAS }));
    if let Some(s) = a.spread {
        args.extend(["--spread".into(), s.to_string()]);
    }
    if let Some(r) = replicas {
        args.extend(["--replicas".into(), r.to_string()]);
    }
    if let Some(f) = &a.secret_file {
        args.extend(["--secret-file".into(), path_arg(&std::path::absolute(f)?)]);
    }
    args.extend(["--write-back-every".into(), a.write_back_every.to_string()]);
    args.extend(["--inline-max".into(), a.inline_max.0.to_string()]);
    args.extend(["--log-sync".into(), log_sync_arg(a.log_sync)]);
    args.extend(stop_with.iter().cloned());
    let clog = dir.join("logs/coordinator.log");
    let cpid = spawn(exe, &args, &clog)?;
    let started = wait_for(limit, || Ok(addr_file.exists()), || alive(cpid));
    let addr = started.and_then(|()| Ok(std::fs::read_to_string(&addr_file)?.trim().to_string()));
    match addr {
        Ok(addr) if !addr.is_empty() => Ok((cpid, addr)),
        other => {
            stop_all(&[cpid]);
            let why = other.err().map_or("no address".to_string(), |e| e.to_string());
            bail!("coordinator did not start ({why}): {}", log_tail(&clog))
        }
    }
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn wait_for(limit: Duration, mut ready: impl FnMut() -> Result<bool>, mut running: impl FnMut() -> bool) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if ready()? {
            return Ok(());
        }
        if !running() {
            bail!("process exited");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("timed out after {limit:?}")
}

fn wait_workers(addr: &str, secret_file: &Path, n: usize, pids: &[i32], limit: Duration) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut cfg = ClientConfig::new(addr);
    cfg.secret_file = Some(secret_file.to_path_buf());
    rt.block_on(async {
        let client = Client::connect(cfg).await?;
        let t = Instant::now();
        loop {
            let s = client.status().await?;
            if s.workers.iter().filter(|w| w.alive).count() >= n && !s.migration.active {
                return Ok(());
            }
            if let Some(p) = pids.iter().find(|p| !alive(**p)) {
                bail!("worker process {p} exited");
            }
            if t.elapsed() > limit {
                if s.workers.iter().filter(|w| w.alive).count() >= n {
                    // Up, still moving partitions (a pool restarted with
                    // data): usable meanwhile.
                    eprintln!("tierpool: {}", crate::output::migration_text(&StatusView::new(addr, &s).migration));
                    return Ok(());
                }
                bail!("timed out waiting for {n} workers");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// How long a stopping pool waits for its processes: workers write what
/// MEM holds to DISK first (about the MEM budget at disk speed).
const STOP_LIMIT: Duration = Duration::from_secs(600);

fn stop_all(pids: &[i32]) {
    for &p in pids.iter().rev() {
        // SAFETY: plain signal delivery to a process we started.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let t = Instant::now();
    let mut told = false;
    while pids.iter().any(|&p| alive(p)) && t.elapsed() < STOP_LIMIT {
        reap();
        if !told && t.elapsed() > Duration::from_secs(2) {
            eprintln!("tierpool: waiting for workers to write what they hold in memory to disk");
            told = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for &p in pids {
        if alive(p) {
            eprintln!("tierpool: process {p} did not stop within {STOP_LIMIT:?}; killed");
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    reap();
}

/// Collects exited children of this process so they stop counting as alive.
fn reap() {
    // SAFETY: non-blocking wait for any child.
    unsafe { while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {} }
}

pub fn down(dir: &Path) -> Result<()> {
    let Some(p) = read_pool_file(dir) else {
        bail!("no pool is running from {} (no pool.json)", dir.display());
    };
    let mut pids = vec![p.coordinator_pid];
    pids.extend(&p.worker_pids);
    stop_all(&pids);
    std::fs::remove_file(dir.join("pool.json"))?;
    if let Some(f) = &p.secret_file {
        registry::forget(&p.coordinator, f)?;
    }
    println!("pool down ({} processes stopped)", pids.len());
    Ok(())
}

pub async fn status(client: &Client, json: bool) -> Result<()> {
    let s = client.status().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&StatusView::new(client.coordinator_addr(), &s))?);
    } else {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
        print!("{}", output::status_text(&StatusView::new(client.coordinator_addr(), &s), tty));
    }
    Ok(())
}

/// `--log-sync`'s argument for `sync`.
fn log_sync_arg(sync: tierpool_coordinator::LogSync) -> String {
    match sync {
        tierpool_coordinator::LogSync::Always => "always".into(),
        tierpool_coordinator::LogSync::Every(p) => format!("{}s", p.as_secs_f64()),
    }
}
