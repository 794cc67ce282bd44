//! Many hosts on one machine: `scripts/netns-pool.sh` runs a coordinator and
//! three workers in network namespaces of their own, on one bridge. A shaped
//! link carries its rate (iperf3), bytes go through every link from the root
//! namespace and come back exact, a cut worker is reported dead, its
//! replicas are copied again from the others, and it comes back once
//! healed, and `down` leaves no process, namespace or link behind.
//!
//! Needs root and network namespaces (the suite runs as root), and iperf3
//! (`scripts/test.sh` installs it); without them the test fails and says so.

mod common;
use common::BIN;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SHAPED_MBIT: f64 = 100.0;
const RESHAPED_MBIT: f64 = 40.0;

/// A pool started by the script, taken down when dropped (also on a failed assertion).
struct NetnsPool {
    name: String,
    /// The first three octets of the pool's /24.
    net: String,
    dir: tempfile::TempDir,
    secret: Option<String>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns-pool.sh")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

impl NetnsPool {
    fn script(&self, args: &[&str]) -> Output {
        run(Command::new(script()).arg("--name").arg(&self.name).args(args).env("TIERPOOL_BIN", BIN))
    }

    /// Runs the script, asserts success, returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.script(args);
        assert!(out.status.success(), "netns-pool.sh {args:?} failed: {}{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    }

    /// `up` with 3 workers of 64MiB + 256MiB, 256 partitions, stopped with
    /// this process, and `extra`; keeps the secret it prints. Returns its output.
    fn up(&mut self, dir: &std::path::Path, extra: &[&str]) -> String {
        let (subnet, pid) = (format!("{}.0/24", self.net), std::process::id().to_string());
        let mut args = vec!["up", "--workers", "3", "--mem", "64MiB", "--disk", "256MiB", "--dir"];
        args.extend([dir.to_str().unwrap(), "--subnet", &subnet, "--partitions", "256", "--stop-with", &pid]);
        args.extend(extra);
        let out = self.ok(&args);
        self.secret = out.lines().find_map(|l| l.strip_prefix("export TIERPOOL_SECRET_FILE=")).map(str::to_string);
        out
    }

    fn coordinator(&self) -> String {
        format!("{}.1:7700", self.net)
    }

    fn ip(&self, worker: u32) -> String {
        format!("{}.{}", self.net, 10 + worker)
    }

    /// The CLI in the root namespace, against the pool.
    fn cli(&self, args: &[&str]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args).env("TIERPOOL_COORDINATOR", self.coordinator());
        if let Some(s) = &self.secret {
            c.env("TIERPOOL_SECRET_FILE", s);
        }
        run(&mut c)
    }

    fn status(&self) -> Value {
        let out = self.cli(&["status", "--json"]);
        assert!(out.status.success(), "status: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The pool's entry for worker `host{i}`.
    fn worker(&self, i: u32) -> Value {
        let st = self.status();
        let host = format!("host{i}");
        let w = st["workers"].as_array().unwrap().iter().find(|w| w["host"] == host.as_str()).cloned();
        w.unwrap_or_else(|| panic!("no worker {host} in {st}"))
    }

    /// Writes and reads back `data` (from `local`) until `done` holds for the
    /// pool; returns how long it took.
    fn traffic_until(&self, local: &std::path::Path, data: &[u8], done: impl Fn(&NetnsPool) -> bool) -> Duration {
        let t = Instant::now();
        while !done(self) {
            assert!(t.elapsed() < Duration::from_secs(90), "not within 90 s: {}", self.status());
            let out = self.cli(&["put", "--chunk-size", "1MiB", local.to_str().unwrap(), "/traffic.bin"]);
            assert!(out.status.success(), "put: {}", text(&out.stderr));
            let got = self.cli(&["cat", "/traffic.bin"]);
            assert!(got.status.success() && got.stdout == data, "cat: {}", text(&got.stderr));
        }
        t.elapsed()
    }

    /// Polls until no partition is left to move.
    fn wait_settled(&self, limit: Duration) {
        let t = Instant::now();
        loop {
            let m = self.status()["migration"].clone();
            if m["active"] == false && m["partitions_moving"] == 0 {
                return;
            }
            assert!(t.elapsed() < limit, "partitions still moving after {limit:?}: {m}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Polls until worker `i` is reported `alive`; returns how long it took.
    fn wait_alive(&self, i: u32, alive: bool, limit: Duration) -> Duration {
        let t = Instant::now();
        while self.worker(i)["alive"] != alive {
            assert!(t.elapsed() < limit, "worker {i} not reported alive={alive} within {limit:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        t.elapsed()
    }

    /// The script's status line of `id`: its pid, and the other columns
    /// (namespace, address, process, link, rate in, rate out, pool alive)
    /// joined by one space.
    fn status_of(&self, id: &str) -> (String, String) {
        let out = self.ok(&["status"]);
        let line = out.lines().find(|l| l.split_whitespace().next() == Some(id));
        let cols: Vec<&str> =
            line.unwrap_or_else(|| panic!("no line for {id} in:\n{out}")).split_whitespace().collect();
        (cols[3].to_string(), [&cols[1..3], &cols[4..]].concat().join(" "))
    }

    /// iperf3 between the root namespace and worker `i`, in Mbit/s as received:
    /// towards the worker, or from it with `reverse`.
    fn iperf(&self, i: u32, reverse: bool) -> f64 {
        let ip = self.ip(i);
        let mut server: Child = Command::new(script())
            .args(["--name", &self.name, "exec", &i.to_string(), "iperf3", "-s", "-1", "-B", &ip, "-p", "5201"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // iperf3 -J exits 0 also when it could not connect: its JSON says so.
        let t = Instant::now();
        let v: Value = loop {
            let mut c = Command::new("iperf3");
            c.args(["-c", &ip, "-p", "5201", "-t", "1", "-J"]);
            if reverse {
                c.arg("-R");
            }
            let out = run(&mut c);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if out.status.success() && v["error"].is_null() && v["end"]["sum_received"].is_object() {
                break v;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "iperf3 to {ip}: {}{}", text(&out.stdout), text(&out.stderr));
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = server.kill();
        let _ = server.wait();
        v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap() / 1e6
    }

    /// Namespaces and root-namespace links whose names start with this pool's.
    fn leftovers(&self) -> Vec<String> {
        let prefix = format!("{}-", self.name);
        let ns = text(&run(Command::new("ip").args(["netns", "list"])).stdout);
        let links = text(&run(Command::new("ip").args(["-o", "link", "show"])).stdout);
        let names = ns.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string);
        let links =
            links.lines().filter_map(|l| l.split(": ").nth(1)).map(|n| n.split('@').next().unwrap().to_string());
        names.chain(links).filter(|n| n.starts_with(&prefix)).collect()
    }
}

impl Drop for NetnsPool {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

/// Fails with a clear message where the test cannot run, rather than passing.
fn require_root_netns_and_iperf3(name: &str) {
    let probe = format!("{name}-probe");
    let out = run(Command::new("ip").args(["netns", "add", &probe]));
    assert!(
        out.status.success(),
        "this test needs root and network namespaces: `ip netns add` failed ({}); the suite runs as root",
        text(&out.stderr).trim()
    );
    run(Command::new("ip").args(["netns", "delete", &probe]));
    let have = |t: &str| run(Command::new(t).arg("--version")).status.success();
    if !have("iperf3") {
        let install = "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3";
        let _ = run(Command::new("sh").args(["-c", install]));
    }
    assert!(have("iperf3"), "this test needs iperf3 (apt-get install iperf3; scripts/test.sh installs it)");
}

/// Whether process `pid` has exited (reaped or not).
fn gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
    !matches!(state.as_deref(), Some(s) if s != "Z" && s != "X")
}

fn within(measured: f64, rate: f64) -> bool {
    (0.6 * rate..=1.05 * rate).contains(&measured)
}

#[test]
fn a_pool_of_namespaces_carries_shaped_links_survives_a_cut_and_leaves_nothing_behind() {
    let t0 = Instant::now();
    let pid = std::process::id();
    // Names and a subnet of this run's own, beside any other pool on the machine.
    let name = format!("tpt{}", pid % 100_000);
    let net = format!("10.{}.{}", 200 + (pid / 250) % 50, pid % 250);
    require_root_netns_and_iperf3(&name);
    let mut pool = NetnsPool { name, net, dir: tempfile::tempdir().unwrap(), secret: None };

    eprintln!("== up: a coordinator and 3 workers over 2 racks, worker 3 shaped to {SHAPED_MBIT}mbit");
    let dir = pool.dir.path().join("pool");
    let out = pool.up(
        &dir,
        &[
            "--racks",
            "2",
            "--rate",
            &format!("3={SHAPED_MBIT}mbit"),
            // Shares by capacity: the links measured here are not to move
            // partitions under the measurements (the pool below checks that).
            "--coordinator-arg",
            "--bandwidth-threshold",
            "--coordinator-arg",
            "0",
        ],
    );
    assert!(out.contains(&format!("export TIERPOOL_COORDINATOR={}\n", pool.coordinator())), "{out}");
    let st = pool.status();
    let workers: Vec<(u64, String, String, String, bool)> = (st["workers"].as_array().unwrap().iter())
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap().to_string();
            (w["id"].as_u64().unwrap(), s("address"), s("host"), s("rack"), w["alive"] == true)
        })
        .collect();
    let want: Vec<(u64, String, String, String, bool)> = (1..=3u32)
        .map(|i| (i as u64, format!("{}:7701", pool.ip(i)), format!("host{i}"), format!("r{}", 2 - i % 2), true))
        .collect();
    assert_eq!(workers, want);
    let (n, ip) = (&pool.name, |i| pool.ip(i));
    assert_eq!(pool.status_of("3").1, format!("{n}-w3 {} alive up 100Mbit 100Mbit up", ip(3)));
    assert_eq!(pool.status_of("1").1, format!("{n}-w1 {} alive up - - up", ip(1)));
    assert_eq!(pool.status_of("coord").1, format!("{n}-coord {}.1 alive up - - -", pool.net));

    eprintln!("== iperf3: the shaped link carries its rate both ways, an unshaped one far more");
    let (to3, from3, to1) = (pool.iperf(3, false), pool.iperf(3, true), pool.iperf(1, false));
    eprintln!("   to worker 3 {to3:.1} Mbit/s, from it {from3:.1}, to worker 1 (unshaped) {to1:.1}");
    assert!(within(to3, SHAPED_MBIT) && within(from3, SHAPED_MBIT), "worker 3 at {to3:.1}/{from3:.1} Mbit/s");
    assert!(to1 > 4.0 * SHAPED_MBIT, "the unshaped link carries only {to1:.1} Mbit/s");

    eprintln!("== shape: worker 3 down to {RESHAPED_MBIT}mbit while the pool runs, then off");
    pool.ok(&["shape", "3", &format!("{RESHAPED_MBIT}mbit")]);
    let to3 = pool.iperf(3, false);
    eprintln!("   to worker 3 {to3:.1} Mbit/s");
    assert!(within(to3, RESHAPED_MBIT), "worker 3 reshaped to {RESHAPED_MBIT}mbit carries {to3:.1} Mbit/s");
    assert_eq!(pool.status_of("3").1, format!("{n}-w3 {} alive up 40Mbit 40Mbit up", ip(3)));

    eprintln!("== put and get 32MiB in 1MiB chunks from the root namespace, through every worker");
    let data: Vec<u8> = (0..32u64 << 20).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect();
    let local = pool.dir.path().join("in.bin");
    std::fs::write(&local, &data).unwrap();
    let out = pool.cli(&["put", "--chunk-size", "1MiB", local.to_str().unwrap(), "/big.bin"]);
    assert!(out.status.success(), "put: {}", text(&out.stderr));
    pool.ok(&["shape", "3", "off"]);
    assert_eq!(pool.status_of("3").1, format!("{n}-w3 {} alive up - - up", ip(3)));
    let got = pool.cli(&["cat", "/big.bin"]);
    assert!(got.status.success(), "cat: {}", text(&got.stderr));
    assert!(got.stdout == data, "read back {} bytes that differ from the 32MiB written", got.stdout.len());
    for i in 1..=3 {
        let w = pool.worker(i);
        assert!(w["mem"]["chunks"].as_u64().unwrap() > 0, "worker {i} holds none of the chunks: {w}");
    }

    eprintln!("== cut worker 2: reported dead while its process runs, its replicas copied again; healed: alive again");
    let (w2, _) = pool.status_of("2");
    pool.ok(&["cut", "2"]);
    let dead_after = pool.wait_alive(2, false, Duration::from_secs(8));
    assert_eq!(pool.status_of("2"), (w2.clone(), format!("{n}-w2 {} alive cut - - DOWN", ip(2))));
    let during = pool.cli(&["cat", "/big.bin"]);
    assert!(during.status.success() && during.stdout == data, "read while cut: {}", text(&during.stderr));
    let t = Instant::now();
    loop {
        let r = pool.status()["replication"].clone();
        if r["workers_down"] == serde_json::json!([2]) && r["replicas_missing"] == 0 && r["degraded"] == false {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "not repaired while worker 2 is cut: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(pool.worker(2)["partitions"], 0, "a cut worker holds no replica once repaired");
    pool.ok(&["heal", "2"]);
    let back_after = pool.wait_alive(2, true, Duration::from_secs(15));
    eprintln!("   reported dead {dead_after:.1?} after the cut, repaired, alive {back_after:.1?} after healing");
    assert_eq!(pool.status_of("2"), (w2, format!("{n}-w2 {} alive up - - up", ip(2))));
    pool.wait_settled(Duration::from_secs(60));
    let again = pool.cli(&["cat", "/big.bin"]);
    assert!(again.status.success() && again.stdout == data, "read after heal: {}", text(&again.stderr));
    // One owner per replica: every worker holds a share again, the slots add up.
    let st = pool.status();
    let parts: Vec<u64> = (1..=3).map(|i| pool.worker(i)["partitions"].as_u64().unwrap()).collect();
    assert_eq!(parts.iter().sum::<u64>(), 2 * st["partitions"].as_u64().unwrap(), "{parts:?}");
    assert!(parts.iter().all(|p| *p > 0), "{parts:?}");
    assert_eq!(st["replication"]["replicas_missing"], 0);

    eprintln!("== down: no process, namespace or link is left, and down again is harmless");
    let pids: Vec<String> = std::fs::read_dir(dir.join("pids"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "one pid file per process");
    assert_eq!(pool.ok(&["down"]), format!("pool {} down\n", pool.name));
    assert_eq!(pool.leftovers(), Vec::<String>::new());
    for p in &pids {
        assert!(gone(p.trim()), "process {p} outlived down");
    }
    assert_eq!(pool.ok(&["down"]), format!("pool {} down\n", pool.name));
    let status = pool.script(&["status"]);
    assert!(!status.status.success() && text(&status.stderr).contains("no pool named"));
    drop(pool);

    eprintln!("== a second pool, shares by bandwidth: worker 3 at {SHAPED_MBIT}mbit gets fewer partitions, then its share back");
    let name = format!("tpb{}", pid % 100_000);
    let net = format!("10.{}.{}", 150 + (pid / 250) % 50, pid % 250);
    let mut pool = NetnsPool { name, net, dir: tempfile::tempdir().unwrap(), secret: None };
    let dir = pool.dir.path().join("pool");
    let local = pool.dir.path().join("in.bin");
    pool.up(
        &dir,
        &[
            // A short window for a short test; on 2 busy cores unshaped links
            // measure anywhere within ±30% of one another (their rate is the
            // CPU's), so a slow link is one at half the others or less.
            "--coordinator-arg",
            "--bandwidth-window",
            "--coordinator-arg",
            "3s",
            // One copy per chunk: a partition's share is a worker's share.
            "--coordinator-arg",
            "--replicas",
            "--coordinator-arg",
            "1",
            "--coordinator-arg",
            "--bandwidth-threshold",
            "--coordinator-arg",
            "50",
        ],
    );
    let share = |pool: &NetnsPool, i| pool.worker(i)["partitions"].as_u64().unwrap();
    std::fs::write(&local, &data).unwrap();
    pool.traffic_until(&local, &data, |p| (1..=3).all(|i| !p.worker(i)["bandwidth"].is_null()));
    pool.wait_settled(Duration::from_secs(60));
    let even = |pool: &NetnsPool| (1..=3).all(|i| (85..=86).contains(&share(pool, i)));
    assert!(even(&pool), "shares by capacity: {}", pool.status());
    pool.ok(&["shape", "3", &format!("{SHAPED_MBIT}mbit")]);
    let t = Instant::now();
    let slowed = pool.traffic_until(&local, &data, |p| p.worker(3)["speed"].as_u64().unwrap() < 100);
    let speed = pool.worker(3)["speed"].as_u64().unwrap();
    assert!(speed <= 25, "worker 3 at {SHAPED_MBIT}mbit delivers {speed}% of the others");
    pool.wait_settled(Duration::from_secs(60));
    let (s1, s2, s3) = (share(&pool, 1), share(&pool, 2), share(&pool, 3));
    eprintln!("   speed {speed}% after {slowed:.1?}, partitions moved by {:.1?}: shares {s1}/{s2}/{s3}", t.elapsed());
    assert!(s3 < 86 / 2 && s1 + s2 + s3 == 256, "worker 3 keeps {s3} of 256 partitions");
    pool.ok(&["shape", "3", "off"]);
    let t = Instant::now();
    let back = pool.traffic_until(&local, &data, |p| p.worker(3)["speed"].as_u64().unwrap() == 100);
    pool.wait_settled(Duration::from_secs(60));
    eprintln!("   full speed again after {back:.1?}, partitions back by {:.1?}", t.elapsed());
    assert!(even(&pool), "shares by capacity again: {}", pool.status());
    let again = pool.cli(&["cat", "/traffic.bin"]);
    assert!(again.status.success() && again.stdout == data, "read after the moves: {}", text(&again.stderr));

    assert_eq!(pool.ok(&["down"]), format!("pool {} down\n", pool.name));
    assert_eq!(pool.leftovers(), Vec::<String>::new());
    eprintln!("== done in {:.1?}", t0.elapsed());
}
