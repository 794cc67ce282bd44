//! `--log-sync`, with real processes: a coordinator that fsyncs its log
//! within a period acknowledges changes once written, and every one of
//! them survives `kill -9` of its process (the kernel holds what was
//! written); `status` says how the log is fsynced, and by whom; bad periods are refused
//! with one line.

mod common;
use common::{data, json, Pool, BIN};
use std::process::Command;

#[test]
fn changes_acknowledged_before_their_fsync_survive_the_coordinators_kill_9() {
    // No fsync within the test's time: whatever survives, the kernel kept.
    let mut pool = Pool::start_with(1, "16MiB", "64MiB", &["--log-sync", "10s"]);
    let st = pool.fresh_status();
    assert_eq!(st["metadata_log"]["sync_every_ms"], 10_000, "{st}");
    assert!(pool.ok(&["status"]).contains("metadata log: fsynced every 10000ms"));
    let files: Vec<(String, Vec<u8>)> =
        (0..12u8).map(|i| (format!("/d/f{i}"), data(u64::from(i), if i % 2 == 0 { 100 } else { 300_000 }))).collect();
    pool.ok(&["mkdir", "/d"]);
    for (path, bytes) in &files {
        pool.put(path, bytes);
    }
    pool.ok(&["rm", "/d/f0"]);
    pool.ok(&["mv", "/d/f1", "/d/moved"]);
    let st = pool.fresh_status();
    let log = &st["metadata_log"];
    assert!(log["synced_lsn"].as_u64() < log["lsn"].as_u64(), "acknowledged before an fsync: {st}");
    assert_eq!(log["writer_syncs"], 0, "no change waits for an fsync: {st}");
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(1);
    assert_eq!(pool.err(&["cat", "/d/f0"]), "tierpool: /d/f0: no such file or directory");
    assert!(pool.get("/d/moved") == files[1].1);
    for (path, bytes) in &files[2..] {
        assert!(pool.get(path) == *bytes, "{path}");
    }
    // Ids a lost change may have handed out are not handed out again.
    let before: u64 = files[2..].iter().map(|(p, _)| id(&pool, p)).max().unwrap();
    pool.ok(&["mkdir", "/after"]);
    assert!(id(&pool, "/after") > before + (1 << 32), "{} after {before}", id(&pool, "/after"));
}

fn id(pool: &Pool, path: &str) -> u64 {
    json(&pool.ok(&["stat", "--json", path]))["inode"].as_u64().unwrap()
}

#[test]
fn a_coordinator_fsyncing_before_each_acknowledgement_says_nothing_of_it() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    // Changes one after another (a process each): each waits alone, and
    // its writer fsyncs it (the syncer thread may take one first, rarely).
    for i in 0..5 {
        pool.put(&format!("/f{i}"), b"a");
    }
    let st = pool.fresh_status();
    let log = &st["metadata_log"];
    assert_eq!(log["sync_every_ms"], 0, "{st}");
    assert_eq!(log["synced_lsn"], log["lsn"], "{st}");
    let (syncs, by_writers) = (log["syncs"].as_u64().unwrap(), log["writer_syncs"].as_u64().unwrap());
    assert!(by_writers >= 1 && by_writers <= syncs, "{st}");
    assert!(!pool.ok(&["status"]).contains("metadata log"));
}

#[test]
fn bad_periods_are_refused_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for (arg, says) in [
        ("never", "'never' is neither 'always' nor a duration such as 10ms or 1s"),
        ("0ms", "the period must be at least 1ms and at most 10s"),
        ("1m", "the period must be at least 1ms and at most 10s"),
    ] {
        for cmd in [&["coordinator", "--dir", dir][..], &["up", "--dir", dir][..]] {
            let out = Command::new(BIN).args(cmd).args(["--log-sync", arg]).output().unwrap();
            let e = String::from_utf8(out.stderr).unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd:?} {arg}: {e}");
            assert!(e.lines().next().unwrap().contains(says), "{cmd:?} {arg}: {e}");
        }
    }
}
