//! Strangers kept out: a command with a wrong secret or none, a raw peer
//! that sends a request without the handshake, and a worker with a wrong
//! secret are refused; each refusal is one clear line for the one refused
//! and one log line at the server naming the peer, and nothing in the pool
//! changes.

mod common;
use common::{data, Pool, BIN};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tierpool_meta::{MetaOp, Owner};
use tierpool_proto::frame::{FrameHeader, KIND_COORD_REQUEST, KIND_WORKER_REQUEST};
use tierpool_proto::{CoordRequest, WorkerRequest};
use tierpool_types::InodeId;

/// A secret file of another pool, private as it should be.
fn other_secret(dir: &Path) -> PathBuf {
    let p = dir.join("other-secret");
    std::fs::write(&p, "5eb3c1e7".repeat(8)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// The one line a failed command printed, after checking it failed with 1.
fn refusal(out: std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let e = String::from_utf8(out.stderr).unwrap();
    assert_eq!(e.lines().count(), 1, "{e}");
    e.trim_end().to_string()
}

#[test]
fn commands_with_a_wrong_secret_or_none_are_refused_in_one_line() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    pool.put("/kept", &data(1, 10_000));
    let wrong = other_secret(pool.dir());
    let out = pool.cmd(&["ls", "/"]).env("TIERPOOL_SECRET_FILE", &wrong).output().unwrap();
    let expected = format!(
        "tierpool: the pool at {} refused this client's secret (from {}): it is not that pool's",
        pool.addr,
        wrong.display()
    );
    assert_eq!(refusal(out), expected);
    let home = tempfile::tempdir().unwrap();
    let out = pool.cmd(&["rm", "/kept"]).env_remove("TIERPOOL_SECRET_FILE").env("HOME", home.path()).output().unwrap();
    let expected = format!(
        "tierpool: the pool at {} refused this client, which has no secret: name the pool's secret file \
         with --secret-file or TIERPOOL_SECRET_FILE",
        pool.addr
    );
    assert_eq!(refusal(out), expected);
    // A secret file others may read is not used at all: nothing is sent.
    let open = pool.dir().join("open-secret");
    std::fs::copy(pool.secret_file(), &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = pool.cmd(&["rm", "/kept"]).arg("--secret-file").arg(&open).output().unwrap();
    let shown = open.display();
    let expected = format!(
        "tierpool: secret file {shown}: others may read or change it (mode 644); make it private with `chmod 600 {shown}`"
    );
    assert_eq!(refusal(out), expected);
    assert_eq!(pool.get("/kept"), data(1, 10_000));
    // Two lines each at the coordinator, naming the peer and why: the CLI
    // runs on its machine, so it came through the local socket first, then
    // over TCP (a refusal on a local socket may come from an impostor).
    let log = pool.log("coordinator.log");
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("failed the handshake")).collect();
    assert_eq!(refused.len(), 4, "{log}");
    for (line, why) in refused.iter().zip(["wrong secret", "wrong secret", "it has no secret", "it has no secret"]) {
        assert!(line.ends_with(&format!("failed the handshake: {why}")), "{line}");
    }
    for local in [refused[0], refused[2]] {
        assert!(local.contains("dropping connection from process ") && local.contains(" on this machine: "), "{local}");
    }
    for tcp in [refused[1], refused[3]] {
        assert!(tcp.contains("dropping connection from 127.0.0.1:"), "{tcp}");
    }
}

/// A request frame as a peer that skips the handshake sends it.
fn frame(kind: u8, msg: &[u8]) -> Vec<u8> {
    let fh = FrameHeader { kind, header_len: msg.len() as u32, payload_len: 0 };
    [&fh.encode()[..], msg].concat()
}

/// Connects to `addr`, sends `bytes` at once and reads until the server closes.
fn send_raw(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    // The server closes with our bytes unread: a reset may come instead of the end.
    let _ = s.read_to_end(&mut got);
    got
}

#[test]
fn a_request_without_the_handshake_is_refused_and_changes_nothing() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let content = data(2, 3 << 20);
    pool.put("/victim", &content);
    let before = (pool.ok(&["ls", "-l", "/"]), pool.ok(&["stat", "--json", "/victim"]));
    let inode: u64 = serde_json::from_str::<serde_json::Value>(&before.1).unwrap()["inode"].as_u64().unwrap();
    let worker = pool.status()["workers"][0]["address"].as_str().unwrap().to_string();

    let remove =
        CoordRequest::Meta { op: MetaOp::Remove { path: "/victim".into(), recursive: true }, owner: Owner::default() };
    let got = send_raw(&pool.addr, &frame(KIND_COORD_REQUEST, &tierpool_proto::encode(&remove)));
    let delete = WorkerRequest::DeleteInodes { inodes: vec![InodeId(inode)] };
    let got_worker = send_raw(&worker, &frame(KIND_WORKER_REQUEST, &tierpool_proto::encode(&delete)));
    for got in [got, got_worker] {
        // The server's hello, then at most its refusal: never an answer.
        let v = tierpool_proto::PROTOCOL_VERSION;
        assert_eq!(&got[..4], [b'T', b'P', v, 0x10], "{got:?}");
        assert!(got.len() == 36 || got[36..] == [b'T', b'P', v, 0x13, 2], "{got:?}");
    }

    assert_eq!((pool.ok(&["ls", "-l", "/"]), pool.ok(&["stat", "--json", "/victim"])), before);
    assert_eq!(pool.get("/victim"), content);
    for log in ["coordinator.log", "worker-0.log"] {
        let text = pool.log(log);
        let refused: Vec<&str> = text.lines().filter(|l| l.contains("failed the handshake")).collect();
        assert_eq!(refused.len(), 1, "{log}: {text}");
        assert!(refused[0].contains("dropping connection from 127.0.0.1:"), "{}", refused[0]);
        assert!(refused[0].ends_with("failed the handshake: a request without the handshake"), "{}", refused[0]);
    }
}

/// Runs a worker of `pool` with `secret_file` until it exits (at most 20 s): its code and log.
fn lone_worker(pool: &Pool, secret: Option<&Path>, home: &Path) -> (Option<i32>, String) {
    let dir = pool.dir().join("stranger");
    let mut cmd = Command::new(BIN);
    cmd.args(["worker", "--dir", dir.to_str().unwrap(), "--mem", "16MiB", "--disk", "64MiB"]);
    cmd.args(["--coordinator", &pool.addr]).env_remove("TIERPOOL_SECRET_FILE").env("HOME", home);
    if let Some(s) = secret {
        cmd.arg("--secret-file").arg(s);
    }
    let mut child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("a worker with a wrong secret kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_worker_with_a_wrong_secret_or_none_cannot_register() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let wrong = other_secret(pool.dir());
    let home = tempfile::tempdir().unwrap();
    let (code, log) = lone_worker(&pool, Some(&wrong), home.path());
    assert_eq!(code, Some(1), "{log}");
    let expected = format!(
        "tierpool: registering with the coordinator: the pool at {} refused this client's secret (from {}): \
         it is not that pool's",
        pool.addr,
        wrong.display()
    );
    assert_eq!(log.lines().last(), Some(expected.as_str()), "{log}");
    let (code, log) = lone_worker(&pool, None, home.path());
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.ends_with(
            "tierpool: a worker needs the pool's secret: name the file with --secret-file or \
         TIERPOOL_SECRET_FILE (the coordinator keeps it as `secret` in its --dir)\n"
        ),
        "{log}"
    );
    assert_eq!(pool.status()["workers"].as_array().unwrap().len(), 1, "no worker was added");
    // Once through the local socket, once over TCP.
    let log = pool.log("coordinator.log");
    assert_eq!(log.matches("failed the handshake: wrong secret").count(), 2, "{log}");
}
