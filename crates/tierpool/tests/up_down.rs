//! The embedded pool: `tierpool up` and `tierpool down`.

mod common;
use common::{free_port, BIN};
use std::process::Command;

#[test]
fn up_starts_a_ready_pool_and_down_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let run = |args: &[&str]| Command::new(BIN).args(args).env("TIERPOOL_COORDINATOR", &addr).output().unwrap();
    let d = dir.to_str().unwrap();
    let out = run(&["up", "--dir", d, "--port", &port, "--workers", "2", "--mem", "16MiB", "--disk", "64MiB"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let msg = String::from_utf8_lossy(&out.stdout);
    assert!(msg.starts_with(&format!("pool up: coordinator {addr}, 2 workers with MEM 16MiB + DISK 64MiB")), "{msg}");
    let again = run(&["up", "--dir", d, "--port", &port]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));
    let st: serde_json::Value = serde_json::from_slice(&run(&["status", "--json"]).stdout).unwrap();
    let workers = st["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    assert!(workers.iter().all(|w| w["alive"] == true && w["mem"]["capacity"] == 16 << 20));
    let out = run(&["down", "--dir", d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["ls", "/"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the coordinator"));
    assert!(!run(&["down", "--dir", d]).status.success());
}
