//! Workers read the chunks written to them into buffers they keep for
//! reuse: with `--prefault` a MEM budget's worth is ready from the start
//! (resident before any write), and those spare and in use together stay
//! within what MEM's other chunks leave of its budget, and 16 more;
//! without it, freed buffers are kept, up to 16. Chunks shorter than a
//! chunk buffer go into buffers of their size class, kept spare once freed
//! up to 64 MiB. Either way the bytes read back are exactly those written,
//! whether a chunk went into a fresh buffer or into one that held another
//! chunk.

mod common;
use common::{data, resident, BIN};
use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A pool started with `up` (one worker, one copy), stopped when dropped.
struct Up {
    tmp: tempfile::TempDir,
    addr: String,
    worker: u32,
}

impl Up {
    fn start(mem: &str, extra: &[&str]) -> Up {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pool");
        let out = Command::new(BIN)
            .env("HOME", tmp.path())
            .env("TIERPOOL_LOG", "info")
            .args(["up", "--dir", dir.to_str().unwrap(), "--port", "0", "--workers", "1", "--json"])
            .args(["--mem", mem, "--disk", "512MiB", "--partitions", "64"])
            .args(["--stop-with", &std::process::id().to_string()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let up: Value = serde_json::from_slice(&out.stdout).unwrap();
        let addr = up["coordinator"].as_str().unwrap().to_string();
        let worker = up["worker_pids"][0].as_u64().unwrap() as u32;
        Up { tmp, addr, worker }
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new(BIN)
            .env("HOME", self.tmp.path())
            .env("TIERPOOL_COORDINATOR", &self.addr)
            .env_remove("TIERPOOL_SECRET_FILE")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn put(&self, remote: &str, bytes: &[u8]) {
        let local = self.tmp.path().join("upload");
        std::fs::write(&local, bytes).unwrap();
        self.run(&["put", local.to_str().unwrap(), remote]);
    }

    /// The worker's `buffers` figures once they satisfy `want` (`status`
    /// asks the worker; `limit` is set at its heartbeats, every second).
    fn buffers_when(&self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let st: Value = serde_json::from_slice(&self.run(&["status", "--json"]).stdout).unwrap();
            let b = st["workers"][0]["buffers"].clone();
            if want(&b) {
                return b;
            }
            assert!(t.elapsed() < Duration::from_secs(40), "{what}: {b}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Up {
    fn log_says(&self, what: &str) {
        let t = Instant::now();
        loop {
            let log = std::fs::read_to_string(self.tmp.path().join("pool/logs/worker-0.log")).unwrap();
            if log.contains(what) {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(40), "the worker's log never said {what:?}: {log}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .env("HOME", self.tmp.path())
            .arg("down")
            .arg("--dir")
            .arg(self.tmp.path().join("pool"))
            .output();
    }
}

fn n(v: &Value, field: &str) -> u64 {
    v[field].as_u64().unwrap_or_else(|| panic!("{field} in {v}"))
}

const CHUNK: u64 = 4 << 20;

#[test]
fn prefault_fills_the_mem_budget_ahead_and_chunks_written_reuse_it() {
    let pool = Up::start("128MiB", &["--prefault"]);
    let b = pool.buffers_when("32 buffers ready", |b| b["spare"] == 32);
    assert_eq!((n(&b, "size"), n(&b, "keep"), n(&b, "limit"), n(&b, "lent")), (CHUNK, 32, 48, 0));
    assert_eq!((n(&b, "reused"), n(&b, "fresh")), (0, 0));
    pool.log_says("32 chunk buffers (128MiB) ready in");
    let rss = resident(pool.worker);
    assert!(rss >= 128 << 20, "the worker holds {} MiB before any write", rss >> 20);

    // Ten whole chunks and a short last one, which takes no chunk buffer.
    let bytes = data(7, 10 * CHUNK as usize + 1000);
    pool.put("/big", &bytes);
    let b = pool.buffers_when("10 buffers taken", |b| b["reused"] == 10);
    assert_eq!((n(&b, "spare"), n(&b, "lent"), n(&b, "fresh")), (22, 10, 0));
    assert_eq!(pool.run(&["cat", "/big"]).stdout, bytes);

    // Deleted, its chunks give their buffers back; the next file reuses
    // them, and reads back its own bytes, not the last one's.
    pool.run(&["rm", "/big"]);
    pool.buffers_when("the buffers back", |b| b["spare"] == 32 && b["lent"] == 0);
    let other = data(8, 10 * CHUNK as usize);
    pool.put("/other", &other);
    let b = pool.buffers_when("10 more taken", |b| b["reused"] == 20);
    assert_eq!((n(&b, "spare"), n(&b, "fresh")), (22, 0));
    assert_eq!(pool.run(&["cat", "/other"]).stdout, other);
    pool.run(&["rm", "/other"]);
    pool.buffers_when("the buffers back again", |b| b["spare"] == 32);

    // Chunks that take no chunk buffer (1 MiB ones) fill 100 MiB of MEM: the
    // buffers kept shrink to what is left of it, and 16 more.
    let small = data(9, 100 << 20);
    let local = pool.tmp.path().join("small");
    std::fs::write(&local, &small).unwrap();
    pool.run(&["put", "--chunk-size", "1MiB", local.to_str().unwrap(), "/small"]);
    let b = pool.buffers_when("kept to what MEM leaves", |b| b["limit"] == 23);
    assert_eq!((n(&b, "spare"), n(&b, "lent")), (23, 0));
    assert_eq!(pool.run(&["cat", "/small"]).stdout, small);
    pool.run(&["rm", "/small"]);
    pool.buffers_when("MEM's room back", |b| b["limit"] == 48);
}

#[test]
fn without_prefault_freed_buffers_are_kept_for_the_next_chunks() {
    let pool = Up::start("64MiB", &[]);
    let b = pool.buffers_when("the figures", |b| b["size"] == CHUNK);
    assert_eq!((n(&b, "keep"), n(&b, "spare"), n(&b, "reused"), n(&b, "fresh")), (16, 0, 0, 0));
    assert_eq!(b["limit"], Value::Null);
    let bytes = data(9, 4 * CHUNK as usize);
    pool.put("/a", &bytes);
    pool.buffers_when("4 fresh", |b| b["fresh"] == 4 && b["lent"] == 4);
    pool.run(&["rm", "/a"]);
    pool.buffers_when("4 spare", |b| b["spare"] == 4);
    let again = data(10, 4 * CHUNK as usize);
    pool.put("/b", &again);
    let b = pool.buffers_when("4 reused", |b| b["reused"] == 4);
    assert_eq!((n(&b, "spare"), n(&b, "fresh")), (0, 4));
    assert_eq!(pool.run(&["cat", "/b"]).stdout, again);
}

#[test]
fn small_chunks_deleted_leave_their_buffers_to_the_next_ones_within_mem() {
    let pool = Up::start("64MiB", &[]);
    let b = pool.buffers_when("the figures", |b| b["size"] == CHUNK);
    assert_eq!((n(&b, "small_room"), n(&b, "small_spare"), n(&b, "small_lent")), (64 << 20, 0, 0));
    // 10,000 bytes: past the metadata's inline limit, in buffers of 10 KiB.
    let first: Vec<Vec<u8>> = (0..12).map(|i| data(100 + i, 10_000)).collect();
    for (i, bytes) in first.iter().enumerate() {
        pool.put(&format!("/f{i}"), bytes);
    }
    let b = pool.buffers_when("12 small chunks held", |b| b["small_lent"] == 12 * 10_240);
    assert!(n(&b, "small_fresh") >= 12, "{b}");
    for i in 0..12 {
        pool.run(&["rm", &format!("/f{i}")]);
    }
    let b = pool.buffers_when("their buffers spare", |b| b["small_lent"] == 0);
    assert!(n(&b, "small_spare") >= 12 * 10_240, "{b}");
    let reused = n(&b, "small_reused");

    // Shorter ones of the same class take those pages, and read back
    // their own bytes, not what the pages held before.
    let second: Vec<Vec<u8>> = (0..12).map(|i| data(200 + i, 9_500)).collect();
    for (i, bytes) in second.iter().enumerate() {
        pool.put(&format!("/g{i}"), bytes);
    }
    let b = pool.buffers_when("12 more held", |b| b["small_lent"] == 12 * 10_240);
    assert!(n(&b, "small_reused") >= reused + 12, "{b}");
    for (i, bytes) in second.iter().enumerate() {
        assert_eq!(&pool.run(&["cat", &format!("/g{i}")]).stdout, bytes, "/g{i}");
    }
    assert_eq!((n(&b, "lent"), n(&b, "fresh")), (0, 0), "no chunk buffer taken");
}
