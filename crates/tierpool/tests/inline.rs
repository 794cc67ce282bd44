//! Small files kept inline by the metadata, with real processes: written
//! and read without a worker, counted in `status`, kept across a
//! coordinator `kill -9`, readable with every worker down, written whole
//! through the mount, turned into an ordinary file by a write through the
//! mount that grows it past the limit and back, and bounded by the
//! coordinator's `--inline-max` and `--inline-total`.

mod common;
use common::{data, Mount, Pool};
use serde_json::Value;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};

fn stat(pool: &Pool, path: &str) -> Value {
    serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap()
}

#[test]
fn small_files_live_in_the_metadata_through_crashes_and_without_workers() {
    let mut pool = Pool::start(2, "16MiB", "64MiB");
    let small = data(1, 4096);
    pool.put("/small", &small);
    pool.put("/tiny", b"tiny");
    pool.put("/larger", &data(2, 4097));
    assert_eq!(stat(&pool, "/small")["inline"], true);
    assert_eq!(stat(&pool, "/tiny")["inline"], true);
    assert_eq!(stat(&pool, "/larger")["inline"], false, "past --inline-max (4KiB by default)");
    let st = pool.fresh_status();
    assert_eq!(st["inline"]["files"], 2, "{st}");
    assert_eq!(st["inline"]["bytes"], 4100, "{st}");
    assert_eq!(st["inline"]["max_file"], 4096, "{st}");
    assert_eq!(pool.used(), 4097, "only the larger file is on the workers: {st}");
    assert!(pool.ok(&["status"]).contains("small files kept inline by the metadata: 2"));
    // Acknowledged is durable: the log has the bytes, then the snapshot
    // written after the replay (the second restart starts from it).
    for _ in 0..2 {
        pool.kill_coordinator();
        pool.start_coordinator();
        pool.wait_alive(2);
        assert!(pool.get("/small") == small);
        assert_eq!(pool.get("/tiny"), b"tiny");
    }
    assert!(pool.dir().join("coordinator/meta/snapshot").exists());
    // With every worker gone, small files are still read.
    pool.kill_worker(0);
    pool.kill_worker(1);
    assert!(pool.get("/small") == small);
    pool.put("/while-down", b"written with no worker up");
    assert_eq!(pool.get("/while-down"), b"written with no worker up");
    let e = pool.err(&["cat", "/larger"]);
    assert!(e.starts_with("tierpool: /larger: chunk 0"), "{e}");
    // Replaced and removed: their bytes go with them.
    pool.put("/tiny", b"TINY!");
    pool.ok(&["rm", "/while-down"]);
    assert_eq!(pool.get("/tiny"), b"TINY!");
    let st = pool.status();
    assert_eq!((st["inline"]["files"].as_u64(), st["inline"]["bytes"].as_u64()), (Some(2), Some(4096 + 5)), "{st}");
}

#[test]
fn a_write_through_the_mount_turns_a_small_file_into_an_ordinary_one_and_back() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    pool.put("/f", b"0123456789");
    assert_eq!(fs::read(m.p("f")).unwrap(), b"0123456789");
    {
        let mut f = fs::OpenOptions::new().read(true).write(true).open(m.p("f")).unwrap();
        f.seek(SeekFrom::Start(4)).unwrap();
        f.write_all(b"abc").unwrap();
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(&[b'z'; 5000]).unwrap();
    }
    let mut want = b"0123abc789".to_vec();
    want.extend([b'z'; 5000]);
    assert!(pool.get("/f") == want);
    assert_eq!(stat(&pool, "/f")["inline"], false);
    assert_eq!(pool.status()["inline"]["files"], 0);
    // Cut back to a few bytes, the mount publishes it inline again, and
    // its chunks on the worker go.
    fs::OpenOptions::new().write(true).open(m.p("f")).unwrap().set_len(3).unwrap();
    assert_eq!(pool.get("/f"), b"012");
    assert_eq!(stat(&pool, "/f")["inline"], true);
    pool.settle(0);
    // A small file open on the mount is still read after it loses its name.
    pool.put("/held", b"held bytes");
    let mut f = fs::File::open(m.p("held")).unwrap();
    pool.ok(&["rm", "/held"]);
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"held bytes");
}

#[test]
fn small_files_written_through_the_mount_are_published_with_their_bytes() {
    let mut pool = Pool::start_with(1, "16MiB", "64MiB", &["--inline-total", "4200"]);
    let m = Mount::new(&pool, "mnt");
    let small = data(8, 4096);
    fs::write(m.p("small"), &small).unwrap();
    fs::write(m.p("empty"), b"").unwrap();
    {
        // Written in pieces, with a hole, then given times and a mode:
        // the times set last are kept.
        let mut f = fs::File::create(m.p("pieces")).unwrap();
        f.write_all(b"abc").unwrap();
        f.seek(SeekFrom::Start(10)).unwrap();
        f.write_all(b"xyz").unwrap();
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000)).unwrap();
    }
    assert!(pool.get("/small") == small);
    assert_eq!(pool.get("/pieces"), b"abc\0\0\0\0\0\0\0xyz");
    assert_eq!(pool.get("/empty"), b"");
    for p in ["/small", "/pieces"] {
        assert_eq!(stat(&pool, p)["inline"], true, "{p}");
    }
    let st = stat(&pool, "/pieces");
    assert_eq!(
        (st["mode"].as_str(), st["mtime_ns"].as_u64()),
        (Some("640"), Some(1_000_000_000 * 1_000_000_000)),
        "{st}"
    );
    assert_eq!(pool.fresh_status()["inline"]["bytes"], 4096 + 13);
    assert_eq!(pool.used(), 0, "nothing of them is on the worker");
    // Past the room the coordinator gives (--inline-total 4200): on the worker.
    let more = data(9, 4000);
    fs::write(m.p("more"), &more).unwrap();
    assert!(pool.get("/more") == more);
    assert_eq!(stat(&pool, "/more")["inline"], false);
    assert_eq!(pool.used(), 4000);
    // Rewritten through the mount: the new bytes, still inline.
    fs::write(m.p("small"), b"rewritten").unwrap();
    assert_eq!(pool.get("/small"), b"rewritten");
    assert_eq!(fs::read(m.p("small")).unwrap(), b"rewritten");
    // Acknowledged is durable.
    drop(m);
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(1);
    assert_eq!(pool.get("/small"), b"rewritten");
    assert_eq!(pool.get("/pieces"), b"abc\0\0\0\0\0\0\0xyz");
    assert!(pool.get("/more") == more);
}

#[test]
fn the_coordinator_bounds_what_it_keeps_inline() {
    let pool = Pool::start_with(1, "16MiB", "64MiB", &["--inline-max", "100", "--inline-total", "150"]);
    pool.put("/a", &data(3, 100));
    pool.put("/b", &data(4, 101));
    pool.put("/c", &data(5, 80));
    assert_eq!(stat(&pool, "/a")["inline"], true);
    assert_eq!(stat(&pool, "/b")["inline"], false, "larger than --inline-max");
    assert_eq!(stat(&pool, "/c")["inline"], false, "past --inline-total: on the workers");
    assert!(pool.get("/c") == data(5, 80));
    let st = pool.status();
    assert_eq!((st["inline"]["bytes"].as_u64(), st["inline"]["max_bytes"].as_u64()), (Some(100), Some(150)));
    // Room comes back when an inline file goes.
    pool.ok(&["rm", "/a"]);
    pool.put("/d", &data(6, 80));
    assert_eq!(stat(&pool, "/d")["inline"], true);

    let most = Pool::start_with(1, "16MiB", "64MiB", &["--inline-max", "64KiB"]);
    let big = data(7, 64 << 10);
    most.put("/big", &big);
    assert_eq!(stat(&most, "/big")["inline"], true);
    assert!(most.get("/big") == big);

    let none = Pool::start_with(1, "16MiB", "64MiB", &["--inline-max", "0"]);
    none.put("/a", b"x");
    assert_eq!(stat(&none, "/a")["inline"], false);
    assert_eq!(none.get("/a"), b"x");
    let e = none.err(&["coordinator", "--dir", "/nonexistent", "--inline-max", "65KiB"]);
    assert_eq!(e, "tierpool: --inline-max must be at most 64KiB");
}
