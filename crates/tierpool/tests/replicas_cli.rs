//! Copies per chunk through the command line: `stat` shows them,
//! `tierpool replicas` changes them (copying or dropping the copies of what
//! exists, every byte read back exactly), `tierpool fsck` and `status` say
//! what is short of copies, with exit statuses scripts can rely on.

mod common;

use common::{data, Pool};
use serde_json::Value;
use std::process::Output;
use std::time::{Duration, Instant};

const KIB: usize = 1024;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn copies(pool: &Pool, path: &str) -> u64 {
    json(&pool.ok(&["stat", "--json", path]))["replicas"].as_u64().unwrap()
}

/// Puts `bytes` at `remote` in chunks of 64 KiB (many chunks over many partitions).
fn put(pool: &Pool, remote: &str, bytes: &[u8]) {
    let local = pool.dir().join("upload.tmp");
    std::fs::write(&local, bytes).unwrap();
    pool.ok(&["put", "--chunk-size", "64KiB", local.to_str().unwrap(), remote]);
}

/// Bytes of chunks the workers hold, once each has reported its figures.
fn stored(pool: &Pool) -> u64 {
    let st = pool.fresh_status();
    (st["workers"].as_array().unwrap().iter())
        .filter(|w| w["alive"] == true)
        .map(|w| w["mem"]["used"].as_u64().unwrap() + w["disk"]["used"].as_u64().unwrap())
        .sum()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

#[test]
fn replicas_are_shown_changed_both_ways_and_checked() {
    let pool = Pool::start_with(3, "64MiB", "256MiB", &["--replicas", "2"]);
    eprintln!("phase: a pool of three workers keeping two copies");
    let r = &pool.status()["replication"];
    assert_eq!(
        (r["replicas"].as_u64(), r["possible"].as_u64(), &r["degraded"]),
        (Some(2), Some(2), &Value::Bool(false))
    );
    assert!(pool.ok(&["status"]).contains("replication: 2 copies, all chunks complete"));

    let bytes = data(1, 1000 * KIB);
    put(&pool, "/f", &bytes);
    assert_eq!(copies(&pool, "/f"), 2);
    assert!(pool.ok(&["stat", "/f"]).contains("copies: 2"));
    assert_eq!(stored(&pool), 2 * bytes.len() as u64);

    eprintln!("phase: down to one copy, then up to two again");
    let line = pool.ok(&["replicas", "/f", "1"]);
    assert_eq!(line, "/f: 1 file keeps 1 copy (16 chunks, 1000KiB of extra copies dropped)\n");
    assert_eq!(copies(&pool, "/f"), 1);
    assert_eq!(pool.get("/f"), bytes);
    assert_eq!(stored(&pool), bytes.len() as u64);

    let done = json(&pool.ok(&["replicas", "/f", "2", "--json"]));
    assert_eq!(
        (done["files"].as_u64(), done["chunks"].as_u64(), done["bytes"].as_u64()),
        (Some(1), Some(16), Some(bytes.len() as u64))
    );
    assert_eq!(copies(&pool, "/f"), 2);
    assert_eq!(pool.get("/f"), bytes);
    assert_eq!(stored(&pool), 2 * bytes.len() as u64);
    assert_eq!(pool.ok(&["replicas", "/f", "2"]), "/f: keeps 2 copies already\n");

    eprintln!("phase: a directory's copies are what new entries keep; -r changes what exists");
    pool.ok(&["mkdir", "/d"]);
    assert!(pool.ok(&["replicas", "/d", "1"]).starts_with("/d: new entries keep 1 copy"));
    put(&pool, "/d/g", &data(2, 200 * KIB));
    assert_eq!((copies(&pool, "/d"), copies(&pool, "/d/g")), (1, 1));
    let done = json(&pool.ok(&["replicas", "-r", "/d", "2", "--json"]));
    assert_eq!((done["files"].as_u64(), done["chunks"].as_u64()), (Some(1), Some(4)));
    assert_eq!(copies(&pool, "/d/g"), 2);
    assert_eq!(pool.get("/d/g"), data(2, 200 * KIB));

    eprintln!("phase: fsck of a healthy pool");
    let out = pool.cli(&["fsck", "--json"]);
    assert_eq!((code(&out), json(&String::from_utf8_lossy(&out.stdout))), (0, Value::Array(vec![])));
    assert_eq!(pool.ok(&["fsck"]), "/: every chunk has all its copies\n");

    eprintln!("phase: bad counts are one-line errors that change nothing");
    for bad in ["0", "9", "two"] {
        let e = pool.err(&["replicas", "/f", bad]);
        assert!(e.starts_with("tierpool: ") && e.contains(bad), "{e}");
        assert_eq!(code(&pool.cli(&["replicas", "/f", bad])), 2, "a usage error");
    }
    let e = pool.err(&["replicas", "/f", "3"]);
    assert!(e.contains("cannot keep 3 copies") && e.contains("at most 2"), "{e}");
    assert_eq!(code(&pool.cli(&["replicas", "/f", "3"])), 1);
    assert_eq!(pool.err(&["replicas", "/nowhere", "1"]), "tierpool: /nowhere: no such file or directory");
    assert_eq!(copies(&pool, "/f"), 2);
    let help = pool.ok(&["fsck", "--help"]);
    assert!(help.contains("Exit status:") && help.contains("3  some chunks are short of copies"), "{help}");
}

/// Waits until the pool reports a worker down; returns its replication figures.
fn wait_down(pool: &Pool) -> Value {
    let t = Instant::now();
    loop {
        let r = pool.status()["replication"].clone();
        if r["workers_down"].as_array().is_some_and(|d| !d.is_empty()) {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(15), "the dead worker is not reported down: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The harness index of the worker holding the first copy of chunk 0 of `path`.
fn first_copy_of(pool: &Pool, path: &str) -> usize {
    let inode = json(&pool.ok(&["stat", "--json", path]))["inode"].as_u64().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let layout = rt.block_on(async {
        let c = tierpool_client::Client::connect(pool.client_config()).await.unwrap();
        c.refresh_layout().await.unwrap()
    });
    let p = tierpool_placement::partition_of(tierpool_types::InodeId(inode), 0, layout.table.partitions());
    let owner = layout.table.owner(p).expect("replica 0 has an owner");
    let host = &layout.worker(owner).unwrap().host;
    host.strip_prefix("host").and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("harness host {host}"))
}

#[test]
fn fsck_and_status_report_chunks_short_of_copies_while_a_worker_is_down() {
    // Two workers keeping two copies: a dead one leaves nowhere to copy its
    // replicas to, so what it held stays short of copies.
    let mut pool = Pool::start_with(2, "64MiB", "256MiB", &["--replicas", "2", "--dead-after", "2s"]);
    let two = data(3, 600 * KIB);
    put(&pool, "/two", &two);
    assert_eq!(code(&pool.cli(&["fsck"])), 0);

    eprintln!("phase: a worker dies");
    pool.kill_worker(1);
    let r = wait_down(&pool);
    let down = r["workers_down"][0].as_u64().unwrap();
    assert_eq!((r["possible"].as_u64(), &r["degraded"]), (Some(1), &Value::Bool(true)), "{r}");
    assert_eq!(
        (r["chunks_under"].as_u64(), r["bytes_under"].as_u64(), r["chunks_lost"].as_u64()),
        (Some(10), Some(two.len() as u64), Some(0)),
        "{r}"
    );
    let text = pool.ok(&["status"]);
    assert!(text.contains("replication: 2 copies; too few workers to keep 2: chunks have 1 copy at most"), "{text}");
    assert!(text.contains("degraded: 10 chunks (600KiB) short of copies, 0 lost"), "{text}");
    assert!(text.contains(&format!("workers down: w{down}")), "{text}");

    eprintln!("phase: fsck lists the file, exit status 3: short of copies, nothing lost");
    let out = pool.cli(&["fsck", "--json"]);
    let found = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(code(&out), 3, "{found}");
    let want = serde_json::json!([{"path": "/two", "replicas": 2, "chunks": 10, "under": 10, "lost": 0}]);
    assert_eq!(found, want);
    let out = pool.cli(&["fsck", "/two"]);
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with(
            "/two: 1 file short of copies: 10 chunks with fewer copies than wanted, 0 chunks with none left\n"
        ),
        "{text}"
    );

    eprintln!("phase: a file short of copies still reads from the copy that is left");
    assert_eq!(pool.get("/two"), two);
}

#[test]
fn a_file_keeping_one_copy_on_a_dead_worker_is_reported_lost() {
    let mut pool = Pool::start_with(2, "64MiB", "256MiB", &["--replicas", "2", "--dead-after", "2s"]);
    let one = data(4, 2048 * KIB);
    put(&pool, "/one", &one);
    assert!(pool.ok(&["replicas", "/one", "1"]).starts_with("/one: 1 file keeps 1 copy (32 chunks"));

    eprintln!("phase: the worker holding its first chunk dies");
    pool.kill_worker(first_copy_of(&pool, "/one"));
    let r = wait_down(&pool);
    assert!(r["chunks_lost"].as_u64().unwrap() > 0, "{r}");
    assert!(pool.ok(&["status"]).contains(" lost; workers down: w"));
    let out = pool.cli(&["fsck", "--json"]);
    let found = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(code(&out), 1, "{found}");
    assert_eq!((found[0]["path"].as_str(), found[0]["replicas"].as_u64()), (Some("/one"), Some(1)), "{found}");
    assert!(found[0]["lost"].as_u64().unwrap() > 0, "{found}");
    assert!(pool.err(&["cat", "/one"]).contains("lost"));
}
