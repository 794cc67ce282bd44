//! Test harness: a real pool of `tierpool` processes on loopback, each test
//! in its own temporary directory, with helpers to run the CLI against it
//! and to kill and restart processes. The coordinator makes the pool's
//! secret in its directory; workers and commands are given it explicitly
//! (`--secret-file`, `TIERPOOL_SECRET_FILE`), and raw peers do the handshake
//! with it ([`Pool::raw`]).

#![allow(dead_code)]

mod mount;
#[allow(unused_imports)]
pub use mount::Mount;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tierpool");

/// `out` parsed as JSON, or a panic showing it.
pub fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct WorkerProc {
    pub dir: PathBuf,
    pub mem: String,
    pub disk: String,
    pub child: Option<Child>,
}

/// A worker not yet handed to a pool is still stopped when a test fails.
impl Drop for WorkerProc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A server process taken out of a pool (to be killed and replaced by a
/// test), stopped when dropped, also on a failed assertion.
pub struct Reaped(pub Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub struct Pool {
    pub tmp: tempfile::TempDir,
    pub addr: String,
    pub coordinator: Option<Child>,
    pub workers: Vec<WorkerProc>,
    /// Flags every start of the coordinator gets besides the usual ones
    /// (`--replicas 1` unless they name `--replicas`).
    pub coordinator_args: Vec<String>,
    /// Environment of workers started from now on, besides the test's own.
    pub worker_env: Vec<(String, String)>,
}

fn log_file(dir: &Path, name: &str) -> std::fs::File {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name)).unwrap()
}

impl Pool {
    /// Starts a coordinator and `n` workers and waits until all are alive
    /// and the partitions are spread over them.
    pub fn start(n: usize, mem: &str, disk: &str) -> Pool {
        Pool::start_with(n, mem, disk, &[])
    }

    /// [`Pool::start`] with more flags for the coordinator. A pool keeps
    /// one copy of each chunk unless they say `--replicas N`.
    pub fn start_with(n: usize, mem: &str, disk: &str, coordinator_args: &[&str]) -> Pool {
        let tmp = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let coordinator_args = coordinator_args.iter().map(|s| s.to_string()).collect();
        let mut pool =
            Pool { tmp, addr, coordinator: None, workers: Vec::new(), coordinator_args, worker_env: Vec::new() };
        pool.start_coordinator();
        for _ in 0..n {
            pool.add_worker(mem, disk);
        }
        pool.wait_alive(n);
        pool.wait_balanced();
        pool
    }

    /// Waits until no partition is left to move.
    pub fn wait_balanced(&self) {
        let t = Instant::now();
        loop {
            let v = self.status();
            if v["migration"]["active"] == false {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "partitions still moving: {}", v["migration"]);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// The pool's secret file, made by the coordinator on its first start.
    pub fn secret_file(&self) -> PathBuf {
        self.tmp.path().join("coordinator").join("secret")
    }

    /// A client configuration for this pool, its secret included.
    pub fn client_config(&self) -> tierpool_client::ClientConfig {
        let mut cfg = tierpool_client::ClientConfig::new(self.addr.clone());
        cfg.secret_file = Some(self.secret_file());
        cfg
    }

    pub fn credentials(&self) -> tierpool_net::Credentials {
        tierpool_net::Secret::load(&self.secret_file()).unwrap().into()
    }

    /// A connection to `addr` (the coordinator or a worker) whose handshake
    /// is done: what is written to it next is read as frames.
    pub fn raw(&self, addr: &str) -> std::net::TcpStream {
        authenticated(addr, &self.credentials())
    }

    pub fn start_coordinator(&mut self) {
        let child = self.spawn_coordinator();
        self.coordinator = Some(child);
    }

    /// Starts the coordinator (again) and waits until it listens; the
    /// caller keeps the process.
    pub fn spawn_coordinator(&self) -> Child {
        let dir = self.tmp.path().join("coordinator");
        let log = log_file(self.tmp.path(), "coordinator.log");
        let boot_id = self.tmp.path().join("boot_id");
        let started = self.log("coordinator.log").matches("coordinator listening on").count();
        let child = Command::new(BIN)
            .args(["coordinator", "--dir", dir.to_str().unwrap(), "--listen", &self.addr, "--partitions", "256"])
            // Orphans are looked for every second, so every test that runs
            // longer than a hold period also checks that no live chunk is
            // ever taken for one.
            .args(["--sweep-every", "1s"])
            // One copy of each chunk, as pools had before replication,
            // unless the test asks for more.
            .args(if self.coordinator_args.iter().any(|a| a == "--replicas") { &[][..] } else { &["--replicas", "1"] })
            .args(&self.coordinator_args)
            // Gone with the test process, even one that fails without unwinding.
            .args(["--stop-with", &std::process::id().to_string()])
            .env("TIERPOOL_LOG", "info")
            // A test plays a restart of the machine by writing a boot id here.
            .envs(boot_id.exists().then(|| ("TIERPOOL_BOOT_ID_FILE", boot_id.clone())))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let t = Instant::now();
        // This start's own line in the log (not only a connection, which
        // another process holding the port would also accept).
        // Its start fsyncs (the secret, the log), which waits behind the
        // writeback of whatever other tests wrote meanwhile: long on a
        // loaded machine.
        while self.log("coordinator.log").matches("coordinator listening on").count() == started
            || std::net::TcpStream::connect(&self.addr).is_err()
        {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "coordinator did not start: {}",
                self.log("coordinator.log")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    /// Starts one more worker (index `workers.len()` before); returns its index.
    pub fn add_worker(&mut self, mem: &str, disk: &str) -> usize {
        let w = self.spawn_worker(self.workers.len(), mem, disk);
        self.workers.push(w);
        self.workers.len() - 1
    }

    /// Starts worker `i` (a new one: the caller adds it to `workers`).
    pub fn spawn_worker(&self, i: usize, mem: &str, disk: &str) -> WorkerProc {
        let mut w = WorkerProc {
            dir: self.tmp.path().join(format!("worker-{i}")),
            mem: mem.into(),
            disk: disk.into(),
            child: None,
        };
        w.child = Some(self.worker_child(i, &w));
        w
    }

    fn worker_child(&self, i: usize, w: &WorkerProc) -> Child {
        let log = log_file(self.tmp.path(), &format!("worker-{i}.log"));
        Command::new(BIN)
            .args(["worker", "--dir", w.dir.to_str().unwrap(), "--mem", &w.mem, "--disk", &w.disk])
            .args(["--coordinator", &self.addr, "--host", &format!("host{i}")])
            .args(["--stop-with", &std::process::id().to_string()])
            .arg("--secret-file")
            .arg(self.secret_file())
            .envs(self.worker_env.iter().map(|(k, v)| (k, v)))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    pub fn start_worker(&mut self, i: usize) {
        let child = self.worker_child(i, &self.workers[i]);
        self.workers[i].child = Some(child);
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.tmp.path().join(name)).unwrap_or_default()
    }

    /// kill -9 of worker `i`.
    pub fn kill_worker(&mut self, i: usize) {
        if let Some(mut c) = self.workers[i].child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// kill -9 of the coordinator.
    pub fn kill_coordinator(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Waits until worker `i`'s log shows it registered `times` times (a
    /// restarted worker is reported alive by its old heartbeats until then,
    /// at its old address).
    pub fn wait_registered(&self, i: usize, times: usize) {
        let t = Instant::now();
        while self.log(&format!("worker-{i}.log")).matches("registered as worker").count() < times {
            assert!(t.elapsed() < Duration::from_secs(30), "worker {i} did not register {times} times");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until at least `n` workers are reported alive.
    pub fn wait_alive(&self, n: usize) {
        let t = Instant::now();
        loop {
            let out = self.cli(&["status", "--json"]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                let alive = v["workers"].as_array().unwrap().iter().filter(|w| w["alive"] == true).count();
                if alive >= n {
                    return;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{n} workers not alive: {}{}\ncoordinator log:\n{}\nworker logs:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log("coordinator.log"),
                (0..self.workers.len())
                    .map(|i| self.log(&format!("worker-{i}.log")))
                    .collect::<Vec<_>>()
                    .join("\n--\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).env("TIERPOOL_COORDINATOR", &self.addr).env("TIERPOOL_SECRET_FILE", self.secret_file());
        c.stdin(Stdio::null());
        c
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs the CLI, asserts success, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "tierpool {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs the CLI, asserts failure with a one-line error, returns it.
    pub fn err(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(!out.status.success(), "tierpool {args:?} should have failed");
        let e = String::from_utf8(out.stderr).unwrap();
        assert_eq!(e.trim_end().lines().count(), 1, "error is not one line: {e}");
        e.trim_end().to_string()
    }

    /// `(chunks in the pool, chunks below, dirty)` of a file of an
    /// attached store, as `stat --json` says.
    pub fn under_chunks(&self, path: &str) -> (u64, u64, bool) {
        let v = json(&self.ok(&["stat", "--json", path]));
        let u = &v["under"];
        (u["chunks_in_pool"].as_u64().unwrap(), u["chunks_below"].as_u64().unwrap(), u["dirty"].as_bool().unwrap())
    }

    pub fn status(&self) -> Value {
        serde_json::from_str(&self.ok(&["status", "--json"])).unwrap()
    }

    /// Bytes the workers hold now, MEM + DISK (a status asks each live worker).
    pub fn used(&self) -> u64 {
        let st = self.status();
        (st["workers"].as_array().unwrap().iter())
            .map(|w| w["mem"]["used"].as_u64().unwrap() + w["disk"]["used"].as_u64().unwrap())
            .sum()
    }

    /// Waits until the workers hold exactly `want` bytes (garbage is
    /// collected after a grace period of a few seconds).
    pub fn settle(&self, want: u64) {
        let t = Instant::now();
        loop {
            let used = self.used();
            if used == want {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(40), "the workers hold {used} bytes, not {want}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Status after every worker has sent a heartbeat with current figures.
    pub fn fresh_status(&self) -> Value {
        std::thread::sleep(Duration::from_millis(1500));
        self.status()
    }

    /// Writes `data` to a local file and puts it at `remote`.
    pub fn put(&self, remote: &str, data: &[u8]) {
        let local = self.tmp.path().join("upload.tmp");
        std::fs::write(&local, data).unwrap();
        self.ok(&["put", local.to_str().unwrap(), remote]);
    }

    pub fn get(&self, remote: &str) -> Vec<u8> {
        let out = self.cli(&["cat", remote]);
        assert!(out.status.success(), "cat {remote}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for w in &mut self.workers {
            if let Some(c) = w.child.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(c) = self.coordinator.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A connection to `addr` whose handshake with `creds` is done.
pub fn authenticated(addr: &str, creds: &tierpool_net::Credentials) -> std::net::TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let s = rt.block_on(async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        tierpool_net::auth::introduce(&mut s, creds, addr, Duration::from_secs(5)).await.unwrap();
        s.into_std().unwrap()
    });
    s.set_nonblocking(false).unwrap();
    s
}

/// Deterministic pseudo-random bytes.
pub fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Resident memory of a running process, in bytes (VmRSS).
pub fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// Whether a child process is still running.
pub fn running(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

/// Every chunk file under a worker's directory.
pub fn chunk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.join("chunks")];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A Rust client of a pool with a runtime of its own, for tests that drive
/// the client library directly (each test file adds the calls it needs).
pub struct Session {
    pub rt: tokio::runtime::Runtime,
    pub client: tierpool_client::Client,
}

impl Session {
    pub fn new(pool: &Pool) -> Session {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let client = rt.block_on(tierpool_client::Client::connect(pool.client_config())).unwrap();
        Session { rt, client }
    }
}
