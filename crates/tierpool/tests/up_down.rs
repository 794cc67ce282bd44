//! The embedded pool: `tierpool up` and `tierpool down`, and how commands
//! on the same machine find its secret with no flags. Every command runs
//! with `HOME` in the test's directory, so the registry of pools
//! (`~/.tierpool/pools/`) is the test's own.

mod common;
use common::{free_port, BIN};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// `tierpool` with `HOME` at `home` and no secret file named by the environment.
fn tierpool(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("HOME", home).env_remove("TIERPOOL_SECRET_FILE").env_remove("TIERPOOL_COORDINATOR");
    c
}

/// How many chunk files are under `dir`.
fn chunk_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            n += chunk_files(&p);
        } else if !p.to_string_lossy().ends_with(".tmp") {
            n += 1;
        }
    }
    n
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn up_starts_a_ready_pool_and_down_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let run = |args: &[&str]| tierpool(tmp.path()).args(args).env("TIERPOOL_COORDINATOR", &addr).output().unwrap();
    let d = dir.to_str().unwrap();
    let out = run(&["up", "--dir", d, "--port", &port, "--workers", "2", "--mem", "16MiB", "--disk", "64MiB"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let msg = String::from_utf8_lossy(&out.stdout);
    assert!(msg.starts_with(&format!("pool up: coordinator {addr}, 2 workers with MEM 16MiB + DISK 64MiB")), "{msg}");
    // The secret: 32 random bytes in hex, private, recorded for the address.
    let secret = dir.canonicalize().unwrap().join("coordinator/secret");
    assert!(msg.trim_end().ends_with(&format!("; secret in {}", secret.display())), "{msg}");
    let key = std::fs::read_to_string(&secret).unwrap();
    assert!(key.trim().len() == 64 && key.trim().bytes().all(|b| b.is_ascii_hexdigit()), "{key:?}");
    let entry = tmp.path().join(".tierpool/pools").join(&addr);
    assert_eq!(std::fs::read_to_string(&entry).unwrap(), format!("{}\n", secret.display()));
    assert_eq!((mode(&secret), mode(&entry), mode(entry.parent().unwrap())), (0o600, 0o600, 0o700));
    // Another user's home has no record of it: refused, saying why.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = tierpool(elsewhere.path()).args(["ls", "/", "--coordinator", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "tierpool: the pool at {addr} refused this client, which has no secret: name the pool's secret \
             file with --secret-file or TIERPOOL_SECRET_FILE\n"
        )
    );
    // The record names exactly this pool's secret: it comes before a variable
    // naming another's, and an explicit --secret-file comes before both.
    let other = tmp.path().join("other-secret");
    std::fs::write(&other, "5eb3c1e7".repeat(8)).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out =
        tierpool(tmp.path()).args(["ls", "/", "--coordinator", &addr]).env("TIERPOOL_SECRET_FILE", &other).output();
    assert!(out.unwrap().status.success());
    let out = run(&["ls", "/", "--secret-file", other.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused this client's secret"));
    let again = run(&["up", "--dir", d, "--port", &port]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));
    let st: serde_json::Value = serde_json::from_slice(&run(&["status", "--json"]).stdout).unwrap();
    let workers = st["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    assert!(workers.iter().all(|w| w["alive"] == true && w["mem"]["capacity"] == 16 << 20));
    let out = run(&["down", "--dir", d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!entry.exists(), "down forgets the pool");
    let out = run(&["ls", "/"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the coordinator"));
    assert!(!run(&["down", "--dir", d]).status.success());
}

/// Whether process `pid` has exited (reaped or not).
fn gone(pid: i64) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
    !matches!(state.as_deref(), Some(s) if s != "Z" && s != "X")
}

fn wait_gone(pids: &[i64], limit: std::time::Duration) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed() < limit {
        if pids.iter().all(|p| gone(*p)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn up_on_port_0_reports_json_and_its_servers_stop_with_the_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let mut owner = Command::new("sleep").arg("120").spawn().unwrap();
    let out = tierpool(tmp.path())
        .args(["up", "--dir", dir.to_str().unwrap(), "--port", "0", "--workers", "2", "--mem", "16MiB"])
        .args(["--disk", "64MiB", "--partitions", "64", "--json", "--stop-with", &owner.id().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let up: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let addr = up["coordinator"].as_str().unwrap().to_string();
    let port: u16 = addr.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
    assert_ne!(port, 0);
    assert_eq!(up["dir"], dir.canonicalize().unwrap().to_str().unwrap());
    assert_eq!(up["secret_file"], dir.canonicalize().unwrap().join("coordinator/secret").to_str().unwrap());
    assert_eq!(
        (up["workers"].as_u64(), up["mem"].as_u64(), up["partitions"].as_u64()),
        (Some(2), Some(16 << 20), Some(64))
    );
    let mut pids = vec![up["coordinator_pid"].as_i64().unwrap()];
    pids.extend(up["worker_pids"].as_array().unwrap().iter().map(|p| p.as_i64().unwrap()));
    assert!(pids.iter().all(|p| !gone(*p)));
    let st = tierpool(tmp.path()).args(["status", "--json", "--coordinator", &addr]).output().unwrap();
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["partitions"], 64);
    assert!(st["workers"].as_array().unwrap().iter().all(|w| w["alive"] == true));

    // SIGKILL, as when a notebook is killed: nothing gets to clean up.
    owner.kill().unwrap();
    owner.wait().unwrap();
    assert!(wait_gone(&pids, std::time::Duration::from_secs(10)), "servers outlived their owner");
    let log = std::fs::read_to_string(dir.join("logs/coordinator.log")).unwrap();
    assert!(log.contains(&format!("process {} is gone; coordinator stopping", owner.id())), "{log}");
}

#[test]
fn up_refuses_bad_arguments_before_starting_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("pool");
    let d = d.to_str().unwrap();
    for (args, says) in [
        (["--workers", "0"], "'--workers <WORKERS>': 0 is not in 1..=256"),
        (["--partitions", "0"], "'--partitions <PARTITIONS>': 0 is not in 1..=1048576"),
        (["--mem", "lots"], "invalid size 'lots'"),
    ] {
        let out = Command::new(BIN).args(["up", "--dir", d, "--port", "0"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!tmp.path().join("pool").exists());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN).args(["up", "--dir", d, "--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("port {port} is in use")));
}

#[test]
fn a_server_whose_owner_is_already_gone_does_not_start() {
    let tmp = tempfile::tempdir().unwrap();
    let mut owner = Command::new("true").spawn().unwrap();
    let pid = owner.id().to_string();
    owner.wait().unwrap();
    let dir = tmp.path().join("c");
    let mut server = Command::new(BIN)
        .args(["coordinator", "--dir", dir.to_str().unwrap(), "--listen", "127.0.0.1:0", "--stop-with", &pid])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while server.try_wait().unwrap().is_none() {
        if t.elapsed() > std::time::Duration::from_secs(5) {
            server.kill().unwrap();
            panic!("a coordinator whose owner {pid} had exited kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("process {pid} is gone")));
}

#[test]
fn down_then_up_on_the_same_dir_serves_what_memory_held() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let run = |args: &[&str]| {
        let out = tierpool(tmp.path()).args(args).env("TIERPOOL_COORDINATOR", &addr).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let up = ["up", "--dir", d, "--port", &port, "--workers", "2", "--mem", "64MiB", "--disk", "256MiB"];
    run(&up);
    let sizes = [0usize, 1, 4 << 20, (9 << 20) + 7, 300_000];
    let mut files = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let bytes = common::data(i as u64, *n);
        let local = tmp.path().join(format!("f{i}"));
        std::fs::write(&local, &bytes).unwrap();
        run(&["put", local.to_str().unwrap(), &format!("/f{i}")]);
        files.push(bytes);
    }
    let used = |tier: &str| -> (u64, u64) {
        let st: serde_json::Value = serde_json::from_slice(&run(&["status", "--json"]).stdout).unwrap();
        let ws = st["workers"].as_array().unwrap().clone();
        (
            ws.iter().map(|w| w[tier]["used"].as_u64().unwrap()).sum(),
            ws.iter().map(|w| w[tier]["chunks"].as_u64().unwrap()).sum(),
        )
    };
    let held = used("mem");
    // Two copies of each byte, all in memory, but for the 1-byte file, which
    // the metadata keeps.
    assert_eq!((held.0, used("disk").0), (2 * (sizes.iter().sum::<usize>() as u64 - 1), 0));
    run(&["down", "--dir", d]);
    for w in ["worker-0", "worker-1"] {
        let log = std::fs::read_to_string(dir.join(format!("logs/{w}.log"))).unwrap();
        assert!(log.contains("from memory to disk") && log.contains("written to disk in"), "{log}");
    }
    // Every chunk held in memory is a file on disk now.
    let on_disk: usize = ["worker-0", "worker-1"].iter().map(|w| chunk_files(&dir.join(w).join("chunks"))).sum();
    assert_eq!(on_disk as u64, held.1);
    run(&up);
    // The workers stopped cleanly: each keeps its copies, none is copied again.
    assert_eq!((used("mem"), used("disk")), ((0, 0), held), "memory came back on disk");
    for (i, bytes) in files.iter().enumerate() {
        let out = run(&["cat", &format!("/f{i}")]);
        assert!(out.stdout == *bytes, "/f{i}: {} bytes read, {} written", out.stdout.len(), bytes.len());
    }
    run(&["down", "--dir", d]);
}
