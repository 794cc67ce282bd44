//! Placement policies on real processes: `local` writes each chunk's
//! first copy on the writer's own worker, `local-only` one copy there and
//! nowhere else (and refuses a writer with no worker), `round-robin` an
//! equal share on every worker; every file reads back exactly, also after
//! its partitions moved away (a drain). And the read order: of replicas
//! equally near the reader, those holding a chunk in memory serve it.

mod common;

use common::{data, Pool};
use serde_json::Value;
use std::collections::BTreeMap;

const KIB: usize = 1024;

/// Bytes each worker holds, by host label, once each has reported them.
fn held(pool: &Pool) -> BTreeMap<String, u64> {
    let st = pool.fresh_status();
    (st["workers"].as_array().unwrap().iter())
        .filter(|w| w["alive"] == true)
        .map(|w| {
            let used = w["mem"]["used"].as_u64().unwrap() + w["disk"]["used"].as_u64().unwrap();
            (w["host"].as_str().unwrap().to_string(), used)
        })
        .collect()
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after.iter().map(|(h, n)| (h.clone(), n - before.get(h).copied().unwrap_or(0))).collect()
}

/// Puts `bytes` at `remote` in 64 KiB chunks, written from `host`.
fn put_from(pool: &Pool, host: &str, remote: &str, bytes: &[u8]) -> std::process::Output {
    let local = pool.dir().join("upload.tmp");
    std::fs::write(&local, bytes).unwrap();
    let mut c = pool.cmd(&["put", "--chunk-size", "64KiB", local.to_str().unwrap(), remote]);
    c.env("TIERPOOL_HOST", host).output().unwrap()
}

fn stat(pool: &Pool, path: &str) -> Value {
    serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap()
}

#[test]
fn policies_place_chunks_and_files_stay_readable_as_the_pool_changes() {
    let pool = Pool::start_with(3, "64MiB", "256MiB", &["--replicas", "2"]);
    let (size, chunks) = (960 * KIB, 15u64);

    eprintln!("phase: local: every first copy on the writer's worker");
    pool.ok(&["mkdir", "/near"]);
    let line = pool.ok(&["placement", "/near", "local"]);
    assert_eq!(line, "/near: new entries are placed local (what exists is unchanged: -r changes it too)\n");
    assert_eq!(stat(&pool, "/near")["placement"], "local");
    let before = held(&pool);
    let near = data(1, size);
    let out = put_from(&pool, "host1", "/near/f", &near);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = delta(&before, &held(&pool));
    assert_eq!(d["host1"], size as u64, "host1 holds one copy of every chunk: {d:?}");
    assert_eq!(d.values().sum::<u64>(), 2 * size as u64, "{d:?}");
    assert_eq!(stat(&pool, "/near/f")["placement"], "local");
    assert!(pool.ok(&["stat", "/near/f"]).contains(" place: local\n"));
    assert_eq!(pool.get("/near/f"), near);

    eprintln!("phase: local-only: one copy, on the writer's worker only");
    pool.ok(&["mkdir", "/scratch"]);
    pool.ok(&["placement", "/scratch", "local-only"]);
    assert_eq!(stat(&pool, "/scratch")["replicas"], 1, "a local-only path keeps one copy");
    let before = held(&pool);
    let scratch = data(2, size);
    assert!(put_from(&pool, "host2", "/scratch/s", &scratch).status.success());
    let d = delta(&before, &held(&pool));
    assert_eq!((d["host2"], d.values().sum::<u64>()), (size as u64, size as u64), "{d:?}");
    assert_eq!(pool.get("/scratch/s"), scratch);
    let out = put_from(&pool, "elsewhere", "/scratch/t", &scratch);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("a local-only file is written on a worker of this host (\"elsewhere\")"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    pool.err(&["stat", "/scratch/t"]);

    eprintln!("phase: round-robin: the chunks of a file dealt over the workers in turn");
    pool.ok(&["mkdir", "/rr"]);
    pool.ok(&["replicas", "/rr", "1"]);
    let json: Value = serde_json::from_str(&pool.ok(&["placement", "/rr", "round-robin", "-r", "--json"])).unwrap();
    assert_eq!((json["placement"].as_str(), json["inodes"].as_u64()), (Some("round-robin"), Some(1)));
    let before = held(&pool);
    let rr = data(3, 3 * size);
    assert!(put_from(&pool, "host0", "/rr/r", &rr).status.success());
    let d = delta(&before, &held(&pool));
    assert_eq!(d.values().copied().collect::<Vec<_>>(), vec![size as u64; 3], "{d:?}");
    assert_eq!(pool.get("/rr/r"), rr);

    eprintln!("phase: hash again for new files; the placed ones keep their places");
    pool.ok(&["placement", "/near", "hash"]);
    assert_eq!(stat(&pool, "/near/f")["placement"], "local");
    pool.ok(&["placement", "/near", "hash", "-r"]);
    assert_eq!(stat(&pool, "/near/f")["placement"], "hash");
    assert_eq!(pool.get("/near/f"), near);
    assert_eq!(stat(&pool, "/near/f")["chunks"], chunks);

    eprintln!("phase: the writer's worker drained: its partitions move, and the placed chunks with them");
    let st = pool.status();
    let id = (st["workers"].as_array().unwrap().iter()).find(|w| w["host"] == "host1").unwrap()["id"].to_string();
    pool.ok(&["worker", "drain", &id, "--wait"]);
    // What it held is deleted a little after its partitions left.
    let since = std::time::Instant::now();
    while held(&pool).get("host1").copied().unwrap_or(0) > 0 {
        assert!(since.elapsed().as_secs() < 30, "the drained worker still holds chunks: {:?}", held(&pool));
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(pool.get("/near/f"), near);
    assert_eq!(pool.get("/rr/r"), rr);
    assert_eq!(pool.get("/scratch/s"), scratch);
    let fsck = pool.cli(&["fsck"]);
    assert_eq!(fsck.status.code(), Some(0), "{}", String::from_utf8_lossy(&fsck.stdout));
}

/// Bytes each worker has served to readers, by host label.
fn served(pool: &Pool) -> BTreeMap<String, u64> {
    let st = pool.fresh_status();
    (st["workers"].as_array().unwrap().iter())
        .map(|w| (w["host"].as_str().unwrap().to_string(), w["bytes_read"].as_u64().unwrap()))
        .collect()
}

#[test]
fn equally_near_replicas_are_read_from_memory_before_disk() {
    // Two workers, both far from the reader, each holding a copy of every
    // chunk: host0 with room for all in memory, host1 for a quarter of a
    // mebibyte (most of its copies go to disk).
    let mut pool = Pool::start_with(1, "64MiB", "256MiB", &["--replicas", "2"]);
    pool.add_worker("256KiB", "256MiB");
    pool.wait_alive(2);
    pool.ok(&["rebalance", "--wait"]);
    let bytes = data(4, 4096 * KIB);
    let local = pool.dir().join("upload.tmp");
    std::fs::write(&local, &bytes).unwrap();
    pool.ok(&["put", "--chunk-size", "64KiB", local.to_str().unwrap(), "/f"]);
    let st = pool.fresh_status();
    let host1 = (st["workers"].as_array().unwrap().iter()).find(|w| w["host"] == "host1").unwrap().clone();
    assert!(host1["disk"]["used"].as_u64().unwrap() >= 3 << 20, "host1 keeps most copies on disk: {host1}");

    let before = served(&pool);
    assert_eq!(pool.get("/f"), bytes);
    let after = served(&pool);
    let from = |h: &str| after[h] - before[h];
    assert_eq!(from("host0") + from("host1"), bytes.len() as u64);
    // host1 served at most what its memory holds, host0 the rest
    assert!(from("host1") <= 256 * KIB as u64, "host1 served {} bytes, from disk", from("host1"));
}

#[test]
fn a_pool_spreading_replicas_by_rack_says_so() {
    let pool = Pool::start_with(2, "16MiB", "64MiB", &["--replicas", "2", "--spread", "rack"]);
    assert_eq!(pool.status()["replication"]["spread"], "rack");
    assert!(pool
        .ok(&["status"])
        .contains("replication: 2 copies on distinct racks where possible, all chunks complete"));
    let bytes = data(5, 300 * KIB);
    assert!(put_from(&pool, "host0", "/f", &bytes).status.success());
    assert_eq!(pool.get("/f"), bytes);
    let e = pool.err(&["placement", "/f", "nearby"]);
    assert!(e.contains("invalid value 'nearby'"), "{e}");
}
