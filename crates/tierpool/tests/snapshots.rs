//! Snapshots with real processes: taken without copying data, sharing
//! every unchanged chunk with the live files (a rewritten chunk costs one
//! chunk), read byte-exact at PATH/.snapshots/NAME through coordinator
//! `kill -9`s and on the mount, restored in one step, read-only, and
//! freeing what only they kept when removed.

mod common;
use common::{data, Mount, Pool};
use serde_json::Value;
use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

const CHUNK: u64 = 64 << 10;

fn snapshots(pool: &Pool) -> Value {
    pool.fresh_status()["snapshots"].clone()
}

#[test]
fn snapshots_share_chunks_survive_crashes_restore_and_free_what_they_kept() {
    let mut pool = Pool::start(2, "16MiB", "64MiB");
    pool.ok(&["mkdir", "/d"]);
    let big = data(1, 4 * CHUNK as usize);
    let local = pool.dir().join("big");
    std::fs::write(&local, &big).unwrap();
    pool.ok(&["put", local.to_str().unwrap(), "/d/big", "--chunk-size", "64KiB"]);
    pool.put("/d/small", b"small bytes, kept inline");
    pool.settle(4 * CHUNK);

    let out = pool.ok(&["snapshot", "create", "/d", "monday"]);
    assert!(out.starts_with("/d@monday\t"), "{out}");
    assert!(out.contains("3 entries"), "{out}");
    assert_eq!(pool.used(), 4 * CHUNK, "taking a snapshot copies nothing");
    let e = pool.err(&["snapshot", "create", "/d", "monday"]);
    assert_eq!(e, "tierpool: /d@monday: a snapshot of that name exists");

    // Rewriting 10 bytes of chunk 1 costs one chunk: the old one is kept.
    let mut want = big.clone();
    {
        let m = Mount::new(&pool, "mnt");
        let mut f = std::fs::OpenOptions::new().write(true).open(m.p("d/big")).unwrap();
        f.seek(SeekFrom::Start(CHUNK + 100)).unwrap();
        f.write_all(b"0123456789").unwrap();
        drop(f);
        // On the mount: .snapshots is found by name (not listed), read-only.
        let names = |p: &str| {
            let mut v: Vec<String> =
                std::fs::read_dir(m.p(p)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            v.sort();
            v
        };
        assert_eq!(names("d"), ["big", "small"]);
        assert_eq!(names("d/.snapshots"), ["monday"]);
        assert_eq!(names("d/.snapshots/monday"), ["big", "small"]);
        assert!(std::fs::read(m.p("d/.snapshots/monday/big")).unwrap() == big);
        assert!(std::fs::read(m.p("d/big")).unwrap() != big);
        assert_eq!(std::fs::read(m.p("d/.snapshots/monday/small")).unwrap(), b"small bytes, kept inline");
        let meta = std::fs::metadata(m.p("d/.snapshots/monday/big")).unwrap();
        assert_eq!((meta.len(), meta.permissions().readonly()), (4 * CHUNK, true));
        let erofs = |r: std::io::Result<()>| assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EROFS));
        erofs(std::fs::OpenOptions::new().write(true).open(m.p("d/.snapshots/monday/big")).map(|_| ()));
        erofs(std::fs::write(m.p("d/.snapshots/monday/new"), b"x"));
        erofs(std::fs::remove_file(m.p("d/.snapshots/monday/big")));
        erofs(std::fs::create_dir(m.p("d/.snapshots/monday/sub")));
        erofs(std::fs::rename(m.p("d/.snapshots/monday/big"), m.p("d/moved")));
        erofs(std::fs::remove_dir(m.p("d/.snapshots")));
        erofs(std::fs::rename(m.p("d/.snapshots"), m.p("d/elsewhere")));
    }
    want[CHUNK as usize + 100..CHUNK as usize + 110].copy_from_slice(b"0123456789");
    pool.put("/d/small", b"changed");
    std::thread::sleep(Duration::from_secs(7));
    pool.settle(5 * CHUNK);
    let s = snapshots(&pool);
    assert_eq!((s["count"].as_u64(), s["kept_bytes"].as_u64()), (Some(1), Some(CHUNK)), "{s}");
    assert!(pool.get("/d/big") == want);
    assert!(pool.get("/d/.snapshots/monday/big") == big);
    assert_eq!(pool.get("/d/.snapshots/monday/small"), b"small bytes, kept inline");
    assert_eq!(pool.ok(&["ls", "/d/.snapshots"]).lines().count(), 1);
    let listed = pool.ok(&["ls", "/d/.snapshots/monday"]);
    assert!(listed.contains("big") && listed.contains("small"), "{listed}");

    // Acknowledged snapshots are durable: from the log, then from the
    // metadata snapshot written after the replay.
    for _ in 0..2 {
        pool.kill_coordinator();
        pool.start_coordinator();
        pool.wait_alive(2);
        assert!(pool.get("/d/.snapshots/monday/big") == big);
    }
    let ls: Value = serde_json::from_str(&pool.ok(&["snapshot", "ls", "--json"])).unwrap();
    assert_eq!(ls[0]["path"], "/d");
    assert_eq!(ls[0]["name"], "monday");
    assert_eq!(ls[0]["bytes"].as_u64(), Some(4 * CHUNK + 24));
    let st: Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/d"])).unwrap();
    assert_eq!(st["snapshots"][0]["name"], "monday");
    assert_eq!(st["snapshots"][0]["kept_bytes"].as_u64(), Some(CHUNK));
    assert!(pool.ok(&["stat", "/d"]).contains(" snaps: monday (keeps 64KiB)"));

    // Read-only: nothing changes through .snapshots.
    let e = pool.err(&["rm", "/d/.snapshots/monday/big"]);
    assert_eq!(e, "tierpool: /d/.snapshots/monday/big: snapshots are read-only");
    let e = pool.err(&["mkdir", "/d/.snapshots"]);
    assert_eq!(e, "tierpool: /d/.snapshots: snapshots are read-only");

    // A removed file stays readable in the snapshot; restore brings the
    // tree back as it was, sharing the snapshot's chunks.
    pool.ok(&["rm", "/d/big"]);
    std::thread::sleep(Duration::from_secs(7));
    pool.settle(4 * CHUNK);
    assert!(pool.get("/d/.snapshots/monday/big") == big);
    let out = pool.ok(&["snapshot", "restore", "/d", "monday"]);
    assert_eq!(out.trim(), "/d: restored from snapshot monday");
    assert!(pool.get("/d/big") == big);
    assert_eq!(pool.get("/d/small"), b"small bytes, kept inline");
    assert_eq!(pool.used(), 4 * CHUNK);

    // Removing the snapshot frees nothing the live files use; removing them then frees everything.
    pool.ok(&["snapshot", "rm", "/d", "monday"]);
    assert_eq!(pool.ok(&["snapshot", "ls"]).trim(), "no snapshot");
    let e = pool.err(&["snapshot", "rm", "/d", "monday"]);
    assert_eq!(e, "tierpool: /d@monday: no such snapshot");
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(pool.used(), 4 * CHUNK);
    pool.ok(&["rm", "-r", "/d"]);
    pool.settle(0);
}

#[test]
fn a_snapshot_file_open_on_the_mount_outlives_the_snapshot_and_never_reads_the_live_file() {
    use std::io::Read;
    let pool = Pool::start(1, "16MiB", "64MiB");
    pool.ok(&["mkdir", "/d"]);
    // Far more chunks than a read fetches ahead.
    let old = data(5, 40 * CHUNK as usize);
    let local = pool.dir().join("old");
    std::fs::write(&local, &old).unwrap();
    pool.ok(&["put", local.to_str().unwrap(), "/d/f", "--chunk-size", "64KiB"]);
    pool.ok(&["snapshot", "create", "/d", "s"]);
    // Replaced: the old file's inode is gone, its chunks kept by the snapshot only.
    std::fs::write(&local, data(6, 40 * CHUNK as usize)).unwrap();
    pool.ok(&["put", local.to_str().unwrap(), "/d/f", "--chunk-size", "64KiB"]);
    let m = Mount::new(&pool, "mnt");
    let mut f = std::fs::File::open(m.p("d/.snapshots/s/f")).unwrap();
    let mut first = vec![0u8; 10];
    f.read_exact(&mut first).unwrap();
    assert_eq!(first, old[..10]);
    // The snapshot goes while the file is open: the mount's hold keeps its chunks.
    pool.ok(&["snapshot", "rm", "/d", "s"]);
    std::thread::sleep(Duration::from_secs(7));
    // The last chunks, which no read fetched ahead yet.
    f.seek(SeekFrom::Start(38 * CHUNK)).unwrap();
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).unwrap();
    assert!(rest == old[38 * CHUNK as usize..]);
    drop(f);
    drop(m);
    pool.settle(40 * CHUNK);
}
