//! kill -9 of the coordinator and of workers, and corrupted chunk files:
//! acknowledged data survives, chunks that lived only in a killed worker's
//! memory are reported lost, corrupted bytes are reported and never served.

mod common;
use common::{chunk_files, data, Pool};
use std::io::Write;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

#[test]
fn coordinator_recovers_namespace_after_kill() {
    let mut pool = Pool::start(3, "64MiB", "64MiB");
    pool.ok(&["mkdir", "-p", "/a/b/c"]);
    let big = data(1, 9 * MIB + 7);
    let small = data(2, 100);
    pool.put("/a/b/big", &big);
    pool.put("/a/small", &small);
    pool.put("/a/gone", b"bye");
    pool.ok(&["rm", "/a/gone"]);
    pool.ok(&["mv", "/a/b/c", "/a/c2"]);
    pool.ok(&["pin", "/a/small"]);
    let before = pool.ok(&["ls", "-l", "/a"]);
    eprintln!("phase: kill -9 coordinator");
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(3);
    assert_eq!(pool.ok(&["ls", "-l", "/a"]), before);
    assert!(pool.get("/a/b/big") == big);
    assert_eq!(pool.get("/a/small"), small);
    let st: serde_json::Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/a/small"])).unwrap();
    assert_eq!(st["pinned"], true);
    let e = pool.err(&["stat", "/a/gone"]);
    assert_eq!(e, "tierpool: /a/gone: no such file or directory");
    // The recovered pool takes new writes.
    pool.put("/a/after", b"new");
    assert_eq!(pool.get("/a/after"), b"new");
}

#[test]
fn worker_restart_serves_disk_chunks_and_reports_memory_only_chunks_lost() {
    let mut pool = Pool::start(1, "8MiB", "64MiB");
    let on_disk = data(3, 32 * MIB);
    let in_mem = data(4, 8 * MIB);
    pool.put("/disk", &on_disk);
    // Fills MEM exactly, pushing every chunk of /disk down to DISK.
    pool.put("/mem", &in_mem);
    let st = pool.fresh_status();
    assert_eq!(st["workers"][0]["disk"]["used"], 32 * MIB as u64, "{st}");
    eprintln!("phase: kill -9 worker");
    pool.kill_worker(0);
    let e = pool.err(&["cat", "/disk"]);
    assert!(e.contains("/disk: chunk") && e.contains("unreachable"), "{e}");
    pool.start_worker(0);
    pool.wait_registered(0, 2);
    pool.wait_alive(1);
    assert!(pool.get("/disk") == on_disk, "DISK chunks survive a worker crash");
    let e = pool.err(&["cat", "/mem"]);
    assert!(e.starts_with("tierpool: /mem: chunk 0 is lost"), "{e}");
    let out = pool.cli(&["get", "/mem", pool.dir().join("mem.out").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(!pool.dir().join("mem.out").exists(), "a failed get leaves no partial file");
}

#[test]
fn corrupted_disk_chunk_is_reported_never_served() {
    let pool = Pool::start(1, "8MiB", "64MiB");
    let on_disk = data(5, 16 * MIB);
    let in_mem = data(6, 8 * MIB);
    pool.put("/disk", &on_disk);
    pool.put("/mem", &in_mem);
    let files = chunk_files(&pool.workers[0].dir);
    assert_eq!(files.len(), 4, "the 4 chunks of /disk are on DISK: {files:?}");
    // Flip one byte in the middle of every chunk's data.
    for f in &files {
        let mut bytes = std::fs::read(f).unwrap();
        let mid = bytes.len() - (2 * MIB);
        bytes[mid] ^= 0x55;
        std::fs::write(f, bytes).unwrap();
    }
    let e = pool.err(&["cat", "/disk"]);
    assert!(e.starts_with("tierpool: /disk: chunk 0: "), "{e}");
    assert!(e.contains("is corrupt on disk") && !e.contains('\n'), "{e}");
    let out = pool.cli(&["get", "/disk", pool.dir().join("disk.out").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(!pool.dir().join("disk.out").exists(), "a failed get leaves no partial file");
    // The worker goes on serving everything else, byte-exact.
    assert!(pool.get("/mem") == in_mem);
    pool.ok(&["rm", "/disk"]);
    assert_eq!(pool.ok(&["ls", "/"]), "mem\n");
}

/// A `put` killed mid-stream leaves chunks no file references: once its
/// lease lapses (10 s) the next sweep deletes them, and its inode can never
/// be published. The space is there again.
#[test]
fn a_killed_writers_chunks_are_deleted_within_a_bound() {
    let pool = Pool::start(2, "32MiB", "64MiB");
    let mut put = pool
        .cmd(&["put", "-", "/never"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = put.stdin.take().unwrap();
    stdin.write_all(&data(8, 40 * MIB)).unwrap();
    // Wait until the full chunks are stored, then kill -9 the writer.
    let t = Instant::now();
    while pool.used() < 32 * MIB as u64 {
        assert!(t.elapsed() < Duration::from_secs(20), "chunks never stored: {}", pool.used());
        std::thread::sleep(Duration::from_millis(100));
    }
    put.kill().unwrap();
    put.wait().unwrap();
    drop(stdin);
    eprintln!("phase: writer killed with {} bytes stored", pool.used());
    let t = Instant::now();
    while pool.used() > 0 {
        assert!(t.elapsed() < Duration::from_secs(30), "orphans still stored after 30 s: {}", pool.used());
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("phase: orphans gone {:?} after the kill", t.elapsed());
    let st = pool.status();
    assert!(st["orphans"]["chunks"].as_u64().unwrap() >= 8, "{st}");
    assert!(pool.err(&["stat", "/never"]).contains("no such file"));
    pool.put("/after", &data(9, 64 * MIB));
    assert!(pool.get("/after") == data(9, 64 * MIB));
}
