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

#[test]
fn fsck_and_status_report_a_dead_workers_chunks_short_or_lost() {
    // Two workers keeping two copies: a dead one leaves nowhere to copy its
    // replicas to, so what it held stays short of copies.
    let mut pool = Pool::start_with(2, "64MiB", "256MiB", &["--replicas", "2", "--dead-after", "2s"]);
    let (two, one) = (data(3, 600 * KIB), data(4, 2048 * KIB));
    put(&pool, "/two", &two);
    put(&pool, "/one", &one);
    assert!(pool.ok(&["replicas", "/one", "1"]).starts_with("/one: 1 file keeps 1 copy (32 chunks"));
    assert_eq!(code(&pool.cli(&["fsck"])), 0);

    eprintln!("phase: a worker dies");
    pool.kill_worker(1);
    let t = Instant::now();
    let r = loop {
        let r = pool.status()["replication"].clone();
        if r["workers_down"].as_array().is_some_and(|d| !d.is_empty()) {
            break r;
        }
        assert!(t.elapsed() < Duration::from_secs(15), "the dead worker is not reported down: {r}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let down = r["workers_down"][0].as_u64().unwrap();
    assert_eq!((r["possible"].as_u64(), &r["degraded"]), (Some(1), &Value::Bool(true)), "{r}");
    assert!(r["chunks_under"].as_u64().unwrap() > 0 && r["chunks_lost"].as_u64().unwrap() > 0, "{r}");
    let text = pool.ok(&["status"]);
    assert!(text.contains("replication: 2 copies; too few workers to keep 2"), "{text}");
    assert!(text.contains(&format!("workers down: w{down}")), "{text}");

    eprintln!("phase: fsck names both files; a lost chunk is exit status 1, short copies only 3");
    let out = pool.cli(&["fsck", "--json"]);
    let found = json(&String::from_utf8_lossy(&out.stdout));
    let entry = |path: &str| found.as_array().unwrap().iter().find(|e| e["path"] == path).cloned().unwrap();
    let (e_two, e_one) = (entry("/two"), entry("/one"));
    assert_eq!((code(&out), found.as_array().unwrap().len()), (1, 2), "{found}");
    assert_eq!(
        (e_two["replicas"].as_u64(), e_two["chunks"].as_u64(), e_two["lost"].as_u64()),
        (Some(2), Some(10), Some(0))
    );
    assert!(e_two["under"].as_u64().unwrap() > 0, "{e_two}");
    assert_eq!((e_one["replicas"].as_u64(), e_one["chunks"].as_u64()), (Some(1), Some(32)));
    assert!(e_one["lost"].as_u64().unwrap() > 0, "{e_one}");
    let out = pool.cli(&["fsck", "/two"]);
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("/two: 1 file short of copies"));

    eprintln!("phase: a file short of copies still reads from the copy that is left");
    assert_eq!(pool.get("/two"), two);
}
