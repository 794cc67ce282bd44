//! Under-stores on real processes: a directory and a real S3 server
//! (s3s-fs) attached at pool paths. Listing copies no data; reads load
//! chunks lazily and byte-exact; `load`, `free`, `sync-meta`; writes,
//! directories, renames and removals reach the store in `through` mode and
//! never in `pool-only`; a read-only attachment refuses changes; an object
//! changed behind the pool's back is refused as stale, never served;
//! attachments survive a coordinator `kill -9`, and chunks every worker
//! lost are read from the store; bad stores give one-line errors; `back`
//! mode acknowledges from the workers' disks and writes below in the
//! background, also after every process was killed and while the store
//! was down; in `through` mode a store that is down fails the write (not
//! acknowledged; the pool keeps the bytes as changes not below) and `sync`
//! delivers them when it returns; bytes a crash left below unrecorded are
//! recorded, not written again; the mount's names reach the store as
//! paths do; a nearly full pool lets go of the clean files used (read or
//! changed) longest ago.

mod common;
#[path = "../../tierpool-under/tests/common/s3_server.rs"]
mod s3_server;

use common::{data, json, Mount, Pool};
use s3_server::S3Server;
use std::path::Path;

const MIB: usize = 1 << 20;

/// Asserts `got == want` without printing megabytes: length and first difference.
fn same(got: &[u8], want: &[u8], what: &str) {
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(got == want, "{what}: {} bytes, {} expected, first difference at {first:?}", got.len(), want.len());
}

/// A source tree: `big.bin` (3 chunks), `sub/a.txt`, `sub/deeper/b.txt`, an empty directory.
fn source(dir: &Path) -> Vec<u8> {
    let big = data(7, 9 * MIB + 123);
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    std::fs::write(dir.join("sub/a.txt"), b"hello\n").unwrap();
    std::fs::write(dir.join("sub/deeper/b.txt"), b"deep\n").unwrap();
    big
}

#[test]
fn a_directory_attached_reads_lazily_writes_through_and_notices_changes_below() {
    let pool = Pool::start(2, "64MiB", "256MiB");
    let src = tempfile::tempdir().unwrap();
    let big = source(src.path());
    let uri = format!("file://{}", src.path().display());

    let done = json(&pool.ok(&["attach", &uri, "/in", "--json"]));
    assert_eq!((done["files"].as_u64(), done["dirs"].as_u64()), (Some(3), Some(3)));
    assert_eq!(done["bytes"].as_u64(), Some(big.len() as u64 + 11));
    assert_eq!(pool.ok(&["ls", "/in"]), "big.bin\nempty/\nsub/\n");
    assert_eq!(pool.under_chunks("/in/big.bin"), (0, 3, false), "attaching copies no data");
    let list = json(&pool.ok(&["attachments", "--json"]));
    assert_eq!((list[0]["path"].as_str(), list[0]["mode"].as_str()), (Some("/in"), Some("through")));

    // Lazy reads, byte-exact; what was read stays in the pool.
    assert_eq!(pool.get("/in/sub/deeper/b.txt"), b"deep\n");
    assert_eq!(pool.get("/in/big.bin"), big);
    assert_eq!(pool.under_chunks("/in/big.bin"), (3, 0, false));

    // free lets go of clean copies; reading loads them again.
    let freed = json(&pool.ok(&["free", "-r", "/in", "--json"]));
    assert_eq!(freed["files"].as_u64(), Some(2));
    assert_eq!(pool.under_chunks("/in/big.bin"), (0, 3, false));
    assert!(pool.err(&["free", "/in"]).contains("is a directory"));
    let loaded = json(&pool.ok(&["load", "-r", "/in", "--json"]));
    assert_eq!(loaded["files"].as_u64(), Some(3));
    assert_eq!(pool.under_chunks("/in/big.bin"), (3, 0, false));
    let st = pool.status();
    let a = &st["attachments"][0];
    assert_eq!((a["path"].as_str(), a["files"].as_u64(), a["bytes_below"].as_u64()), (Some("/in"), Some(3), Some(0)));
    assert_eq!(a["bytes_in_pool"].as_u64(), Some(big.len() as u64 + 11));
    pool.ok(&["free", "/in/big.bin"]);
    let a = &pool.status()["attachments"][0];
    assert_eq!((a["bytes_in_pool"].as_u64(), a["bytes_below"].as_u64()), (Some(11), Some(big.len() as u64)));
    assert!(pool.ok(&["status"]).contains("under-store file://"), "status names the under-store");
    pool.ok(&["load", "/in/big.bin"]);

    // Through: a new file, a directory, a rename and a removal reach the store.
    pool.put("/in/new.txt", b"written in the pool");
    assert_eq!(std::fs::read(src.path().join("new.txt")).unwrap(), b"written in the pool");
    assert_eq!(pool.under_chunks("/in/new.txt"), (1, 0, false));
    pool.ok(&["mkdir", "/in/made"]);
    assert!(src.path().join("made").is_dir());
    pool.ok(&["mv", "/in/new.txt", "/in/made/moved.txt"]);
    assert_eq!(std::fs::read(src.path().join("made/moved.txt")).unwrap(), b"written in the pool");
    assert!(!src.path().join("new.txt").exists());
    assert_eq!(pool.get("/in/made/moved.txt"), b"written in the pool");
    pool.ok(&["rm", "/in/sub/a.txt"]);
    assert!(!src.path().join("sub/a.txt").exists());
    // Replacing a file writes the new bytes below.
    pool.put("/in/made/moved.txt", b"second");
    assert_eq!(std::fs::read(src.path().join("made/moved.txt")).unwrap(), b"second");

    // Moves across the attachment's boundary are refused, and change nothing below.
    let e = pool.err(&["mv", "/in/made/moved.txt", "/outside.txt"]);
    assert!(e.contains("boundary of an attached under-store"), "{e}");
    assert!(src.path().join("made/moved.txt").exists());

    // Changed behind the pool's back: refused as stale, loaded or not, until sync-meta.
    std::fs::write(src.path().join("sub/deeper/b.txt"), b"changed below\n").unwrap();
    let e = pool.err(&["cat", "/in/sub/deeper/b.txt"]);
    assert!(e.contains("changed in the under-store"), "{e}");
    pool.ok(&["free", "-r", "/in"]);
    std::fs::write(src.path().join("big.bin"), b"short now").unwrap();
    std::fs::write(src.path().join("sub/fresh.txt"), b"appeared below").unwrap();
    std::fs::remove_dir(src.path().join("empty")).unwrap();
    let e = pool.err(&["cat", "/in/big.bin"]);
    assert!(e.contains("changed in the under-store"), "{e}");
    let synced = json(&pool.ok(&["sync-meta", "/in", "--json"]));
    assert_eq!((synced["added"].as_u64(), synced["changed"].as_u64()), (Some(1), Some(2)), "{synced}");
    assert_eq!(pool.get("/in/big.bin"), b"short now");
    assert_eq!(pool.get("/in/sub/deeper/b.txt"), b"changed below\n");
    assert_eq!(pool.get("/in/sub/fresh.txt"), b"appeared below");

    // Detach: the pool forgets the tree, the store keeps it.
    pool.ok(&["detach", "/in"]);
    assert_eq!(pool.ok(&["ls", "/in"]), "");
    assert_eq!(pool.ok(&["attachments"]), "no under-store is attached\n");
    assert_eq!(std::fs::read(src.path().join("sub/fresh.txt")).unwrap(), b"appeared below");
}

#[test]
fn the_mount_reads_an_attached_tree_lazily_and_writes_files_through() {
    // No write-back round runs on its own here.
    let pool = Pool::start_with(2, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let src = tempfile::tempdir().unwrap();
    let big = source(src.path());
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/in"]);
    let m = Mount::new(&pool, "mnt");
    let mut names: Vec<String> =
        std::fs::read_dir(m.p("in")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["big.bin", "empty", "sub"]);
    assert_eq!(std::fs::metadata(m.p("in/big.bin")).unwrap().len(), big.len() as u64);
    assert_eq!(std::fs::read(m.p("in/big.bin")).unwrap(), big);
    assert_eq!(pool.under_chunks("/in/big.bin"), (3, 0, false));
    std::fs::write(m.p("in/sub/via-mount.txt"), b"through the mount").unwrap();
    assert_eq!(std::fs::read(src.path().join("sub/via-mount.txt")).unwrap(), b"through the mount");
    // A partial overwrite of a file whose chunks are below: the rest comes from the store.
    pool.ok(&["free", "-r", "/in"]);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(m.p("in/big.bin")).unwrap();
        f.write_all_at(b"XYZ", 5 * MIB as u64).unwrap();
    }
    let mut want = big.clone();
    want[5 * MIB..5 * MIB + 3].copy_from_slice(b"XYZ");
    same(&std::fs::read(m.p("in/big.bin")).unwrap(), &want, "the mount");
    same(&std::fs::read(src.path().join("big.bin")).unwrap(), &want, "the store");
    std::fs::write(src.path().join("sub/a.txt"), b"changed below").unwrap();
    let e = std::fs::read(m.p("in/sub/a.txt")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE));

    // Names changed through the mount reach the store first.
    std::fs::create_dir(m.p("in/made")).unwrap();
    assert!(src.path().join("made").is_dir());
    std::fs::rename(m.p("in/sub/via-mount.txt"), m.p("in/made/moved.txt")).unwrap();
    assert_eq!(std::fs::read(src.path().join("made/moved.txt")).unwrap(), b"through the mount");
    assert!(!src.path().join("sub/via-mount.txt").exists());
    assert_eq!(std::fs::remove_dir(m.p("in/made")).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    assert!(src.path().join("made/moved.txt").exists(), "nothing removed below");
    std::fs::remove_file(m.p("in/made/moved.txt")).unwrap();
    assert!(!src.path().join("made/moved.txt").exists());
    std::fs::remove_dir(m.p("in/made")).unwrap();
    assert!(!src.path().join("made").exists());

    // Writing back: close returns before the store has the file, fsync
    // (and sync) wait for it.
    let back = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", back.path().display()), "/back", "--mode", "back"]);
    {
        use std::io::Write;
        let mut f = std::fs::File::create(m.p("back/f.txt")).unwrap();
        f.write_all(b"first").unwrap();
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(back.path().join("f.txt")).unwrap(), b"first", "fsync waits for the store");
        f.write_all(b" and more").unwrap();
    }
    assert!(pool.under_chunks("/back/f.txt").2, "closed, not yet below");
    assert_eq!(std::fs::read(back.path().join("f.txt")).unwrap(), b"first");
    pool.ok(&["sync", "/back"]);
    assert_eq!(std::fs::read(back.path().join("f.txt")).unwrap(), b"first and more");
    std::fs::rename(m.p("back/f.txt"), m.p("back/g.txt")).unwrap();
    assert_eq!(std::fs::read(back.path().join("g.txt")).unwrap(), b"first and more");
    assert!(!back.path().join("f.txt").exists());
}

#[test]
fn pool_only_and_read_only_attachments_never_write_below() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let src = tempfile::tempdir().unwrap();
    source(src.path());
    let uri = format!("file://{}", src.path().display());

    pool.ok(&["attach", &uri, "/ro", "--readonly"]);
    assert_eq!(pool.get("/ro/sub/a.txt"), b"hello\n");
    for args in [vec!["mkdir", "/ro/d"], vec!["rm", "/ro/sub/a.txt"], vec!["mv", "/ro/sub/a.txt", "/ro/sub/c.txt"]] {
        let e = pool.err(&args);
        assert!(e.contains("attached read-only"), "{args:?}: {e}");
    }
    let local = src.path().join("../upload-ro.tmp");
    std::fs::write(&local, b"x").unwrap();
    let e = pool.err(&["put", local.to_str().unwrap(), "/ro/x"]);
    assert!(e.contains("attached read-only"), "{e}");
    assert_eq!(pool.get("/ro/sub/a.txt"), b"hello\n");
    pool.ok(&["detach", "/ro"]);

    pool.ok(&["attach", &uri, "/po", "--mode", "pool-only"]);
    pool.put("/po/only-here.txt", b"pool only");
    pool.ok(&["rm", "/po/sub/a.txt"]);
    assert!(!src.path().join("only-here.txt").exists());
    assert!(src.path().join("sub/a.txt").exists());
    assert_eq!(pool.under_chunks("/po/only-here.txt"), (1, 0, true));
    // free keeps what only the pool has; detach refuses to drop it without --force.
    let freed = json(&pool.ok(&["free", "-r", "/po", "--json"]));
    assert_eq!(freed["skipped"][0].as_str(), Some("/po/only-here.txt"));
    let e = pool.err(&["detach", "/po"]);
    assert!(e.contains("not in the under-store yet"), "{e}");
    // sync writes it below on request.
    pool.ok(&["sync", "/po"]);
    assert_eq!(std::fs::read(src.path().join("only-here.txt")).unwrap(), b"pool only");
    assert_eq!(pool.under_chunks("/po/only-here.txt"), (1, 0, false));
    // A file that cannot be written below (a directory has its name there)
    // does not hold back the others; sync fails naming it.
    pool.put("/po/blocked.txt", b"b");
    pool.put("/po/fine.txt", b"f");
    std::fs::create_dir(src.path().join("blocked.txt")).unwrap();
    let e = pool.err(&["sync", "/po"]);
    assert!(e.contains("/po/blocked.txt"), "{e}");
    assert_eq!(std::fs::read(src.path().join("fine.txt")).unwrap(), b"f");
    assert_eq!((pool.under_chunks("/po/blocked.txt").2, pool.under_chunks("/po/fine.txt").2), (true, false));
    pool.ok(&["detach", "/po", "--force"]);
}

#[test]
fn bad_under_stores_are_one_line_errors_and_nothing_is_attached() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let e = pool.err(&["attach", "file:///no/such/dir", "/a"]);
    assert!(e.contains("/no/such/dir"), "{e}");
    let e = pool.err(&["attach", "ftp://host/x", "/a"]);
    assert!(e.contains("ftp"), "{e}");
    let src = tempfile::tempdir().unwrap();
    pool.ok(&["mkdir", "/full"]);
    pool.put("/full/f", b"x");
    let e = pool.err(&["attach", &format!("file://{}", src.path().display()), "/full"]);
    assert!(e.contains("empty directory"), "{e}");
    assert_eq!(pool.ok(&["attachments"]), "no under-store is attached\n");
    let e = pool.err(&["detach", "/full"]);
    assert!(e.contains("no under-store is attached here"), "{e}");
}

#[test]
fn an_s3_bucket_attached_reads_lazily_and_writes_through() {
    let s3 = S3Server::start();
    s3.create_bucket("lake");
    let prefix = s3.bucket_dir("lake").join("2026");
    std::fs::create_dir_all(prefix.join("day1")).unwrap();
    let big = data(11, 5 * MIB + 7);
    std::fs::write(prefix.join("day1/part-0.bin"), &big).unwrap();
    std::fs::write(prefix.join("readme.txt"), b"the lake\n").unwrap();

    let pool = Pool::start(2, "64MiB", "256MiB");
    let ep = s3.endpoint();
    let (ak, sk) = (format!("access_key_id={}", s3.access_key), format!("secret_access_key={}", s3.secret_key));
    let wrong =
        pool.err(&["attach", "s3://lake/2026", "/lake", "--endpoint", &ep, "-o", &ak, "-o", "secret_access_key=nope"]);
    assert!(wrong.contains("s3://lake"), "{wrong}");
    let missing = pool.err(&["attach", "s3://nobucket/x", "/lake", "--endpoint", &ep, "-o", &ak, "-o", &sk]);
    assert!(missing.contains("nobucket"), "{missing}");

    let done =
        json(&pool.ok(&["attach", "s3://lake/2026", "/lake", "--endpoint", &ep, "-o", &ak, "-o", &sk, "--json"]));
    assert_eq!(done["files"].as_u64(), Some(2));
    let list = json(&pool.ok(&["attachments", "--json"]));
    assert_eq!(list[0]["options"]["secret_access_key"].as_str(), Some("***"));
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (0, 2, false));
    assert_eq!(pool.get("/lake/day1/part-0.bin"), big);
    assert_eq!(pool.get("/lake/readme.txt"), b"the lake\n");

    pool.ok(&["mkdir", "/lake/day2"]);
    pool.put("/lake/day2/part-0.bin", &data(12, MIB + 3));
    assert_eq!(std::fs::read(prefix.join("day2/part-0.bin")).unwrap(), data(12, MIB + 3));
    pool.ok(&["rm", "/lake/readme.txt"]);
    assert!(!prefix.join("readme.txt").exists());

    // Freed, then read again from the bucket.
    pool.ok(&["free", "-r", "/lake"]);
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (0, 2, false));
    assert_eq!(pool.get("/lake/day1/part-0.bin"), big);
    pool.ok(&["load", "-r", "/lake/day2"]);
    pool.ok(&["free", "-r", "/lake/day1"]);
    // The store gone: what the pool holds is served, what it does not is a clear error.
    drop(s3);
    let out = pool.cli(&["cat", "/lake/day2/part-0.bin"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, data(12, MIB + 3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without checking its under-store"));
    let e = pool.err(&["cat", "/lake/day1/part-0.bin"]);
    assert!(e.contains("s3://lake"), "{e}");
}

#[test]
fn attachments_and_loaded_files_survive_a_coordinator_kill() {
    let mut pool = Pool::start(2, "64MiB", "256MiB");
    let src = tempfile::tempdir().unwrap();
    let big = source(src.path());
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/in"]);
    assert_eq!(pool.get("/in/big.bin"), big);
    pool.put("/in/new.txt", b"acknowledged");
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(2);
    assert_eq!(pool.under_chunks("/in/big.bin"), (3, 0, false));
    assert_eq!(pool.get("/in/big.bin"), big);
    assert_eq!(pool.get("/in/sub/a.txt"), b"hello\n");
    assert_eq!(pool.under_chunks("/in/new.txt"), (1, 0, false));
    assert_eq!(pool.ok(&["attachments"]).split('\t').next(), Some("/in"));

    // Every worker killed: what only their memory held is gone from the
    // pool, but not from the store, which serves it; `free` and a read
    // bring it back into the pool.
    pool.kill_worker(0);
    pool.kill_worker(1);
    pool.start_worker(0);
    pool.start_worker(1);
    pool.wait_alive(2);
    let out = pool.cli(&["cat", "/in/big.bin"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    same(&out.stdout, &big, "read from the store");
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading it from its under-store"));
    pool.ok(&["free", "/in/big.bin"]);
    pool.ok(&["load", "/in/big.bin"]);
    assert_eq!(pool.under_chunks("/in/big.bin"), (3, 0, false));
    let out = pool.cli(&["cat", "/in/big.bin"]);
    same(&out.stdout, &big, "loaded again");
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Waits (up to 30 s) until `path` holds `want`.
fn wait_below(path: &Path, want: &[u8]) {
    let t = std::time::Instant::now();
    while std::fs::read(path).ok().as_deref() != Some(want) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "{} never held the {} bytes",
            path.display(),
            want.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn writes_back_in_the_background_and_after_every_process_is_killed() {
    // First no write-back round runs at all: what is acknowledged lives in the pool only.
    let mut pool = Pool::start_with(2, "64MiB", "256MiB", &["--write-back-every", "1h", "--replicas", "2"]);
    let src = tempfile::tempdir().unwrap();
    source(src.path());
    let uri = format!("file://{}", src.path().display());
    pool.ok(&["attach", &uri, "/wb", "--mode", "back"]);
    let new = data(11, 5 * MIB + 3);
    pool.put("/wb/sub/new.bin", &new);
    pool.put("/wb/sub/a.txt", b"changed\n");
    pool.put("/wb/tmp.txt", b"renamed before it was below");
    // Names change below at once; a file not below yet just takes its new key.
    pool.ok(&["mkdir", "/wb/made"]);
    pool.ok(&["mv", "/wb/tmp.txt", "/wb/made/kept.txt"]);
    pool.ok(&["rm", "/wb/sub/deeper/b.txt"]);
    assert!(src.path().join("made").is_dir() && !src.path().join("sub/deeper/b.txt").exists());
    assert!(!src.path().join("sub/new.bin").exists() && !src.path().join("made/kept.txt").exists());
    assert_eq!(std::fs::read(src.path().join("sub/a.txt")).unwrap(), b"hello\n");
    assert_eq!(pool.under_chunks("/wb/sub/new.bin"), (2, 0, true));
    let st = pool.fresh_status();
    let a = &st["attachments"][0];
    assert_eq!((a["mode"].as_str(), a["dirty_files"].as_u64()), (Some("back"), Some(3)));
    assert_eq!(a["dirty_bytes"].as_u64(), Some(new.len() as u64 + 8 + 27));
    // Acknowledged means on the workers' disks: nothing of it is in memory only.
    let workers = st["workers"].as_array().unwrap();
    assert_eq!(workers.iter().map(|w| w["mem"]["used"].as_u64().unwrap()).sum::<u64>(), 0, "{st}");

    // kill -9 of every process; the pool comes back with a write-back every 100ms.
    pool.kill_worker(0);
    pool.kill_worker(1);
    pool.kill_coordinator();
    pool.coordinator_args = vec!["--write-back-every".into(), "100ms".into(), "--replicas".into(), "2".into()];
    pool.start_coordinator();
    pool.start_worker(0);
    pool.start_worker(1);
    pool.wait_alive(2);
    wait_below(&src.path().join("sub/new.bin"), &new);
    wait_below(&src.path().join("sub/a.txt"), b"changed\n");
    wait_below(&src.path().join("made/kept.txt"), b"renamed before it was below");
    let t = std::time::Instant::now();
    while pool.fresh_status()["attachments"][0]["dirty_files"].as_u64() != Some(0) {
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "still dirty: {}", pool.fresh_status());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(pool.under_chunks("/wb/sub/new.bin"), (2, 0, false));
    assert!(pool.log("coordinator.log").contains("write-back: "), "{}", pool.log("coordinator.log"));

    // Later versions of one file land in order: the last one is what stays below.
    for i in 0..5 {
        pool.put("/wb/sub/a.txt", format!("version {i}\n").as_bytes());
    }
    wait_below(&src.path().join("sub/a.txt"), b"version 4\n");
    // `sync` writes at once and waits.
    pool.kill_coordinator();
    pool.coordinator_args = vec!["--write-back-every".into(), "1h".into(), "--replicas".into(), "2".into()];
    pool.start_coordinator();
    pool.wait_alive(2);
    pool.put("/wb/sub/a.txt", b"synced\n");
    assert_eq!(std::fs::read(src.path().join("sub/a.txt")).unwrap(), b"version 4\n");
    pool.ok(&["sync", "/wb"]);
    assert_eq!(std::fs::read(src.path().join("sub/a.txt")).unwrap(), b"synced\n");
}

#[test]
fn a_back_attachment_whose_store_is_down_keeps_writes_and_delivers_them_when_it_returns() {
    let mut s3 = S3Server::start();
    s3.create_bucket("lake");
    let pool = Pool::start_with(2, "64MiB", "256MiB", &["--write-back-every", "100ms"]);
    let (ak, sk) = (format!("access_key_id={}", s3.access_key), format!("secret_access_key={}", s3.secret_key));
    let ep = s3.endpoint();
    pool.ok(&["attach", "s3://lake/wb", "/wb", "--mode", "back", "--endpoint", &ep, "-o", &ak, "-o", &sk]);
    let part = data(21, 4 * MIB + 5);
    s3.stop();
    // Acknowledged from the pool while the store is down.
    pool.put("/wb/part-0.bin", &part);
    let object = s3.bucket_dir("lake").join("wb/part-0.bin");
    let t = std::time::Instant::now();
    while !pool.log("coordinator.log").contains("not written to s3://lake/wb") {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{}", pool.log("coordinator.log"));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!object.exists());
    assert_eq!(pool.fresh_status()["attachments"][0]["dirty_files"].as_u64(), Some(1));
    let e = pool.err(&["sync", "/wb"]);
    assert!(e.contains("s3://lake"), "{e}");
    assert_eq!(pool.get("/wb/part-0.bin"), part, "the pool serves it meanwhile");
    s3.restart();
    wait_below(&object, &part);
    let t = std::time::Instant::now();
    while pool.fresh_status()["attachments"][0]["dirty_files"].as_u64() != Some(0) {
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "still dirty");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn an_attached_store_larger_than_the_pool_is_read_whole_and_clean_files_make_room() {
    // 32 MiB of tiers; 48 MiB below.
    let pool = Pool::start_with(1, "8MiB", "24MiB", &["--write-back-every", "100ms"]);
    let src = tempfile::tempdir().unwrap();
    let files: Vec<Vec<u8>> = (0..12).map(|i| data(100 + i, 4 * MIB - 1)).collect();
    for (i, f) in files.iter().enumerate() {
        std::fs::write(src.path().join(format!("f{i:02}")), f).unwrap();
    }
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/big"]);
    for round in 0..2 {
        for (i, f) in files.iter().enumerate() {
            let out = pool.cli(&["cat", &format!("/big/f{i:02}")]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            same(&out.stdout, f, &format!("round {round}, /big/f{i:02}"));
        }
    }
    let t = std::time::Instant::now();
    while !pool.log("coordinator.log").contains("clean files") {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{}", pool.log("coordinator.log"));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let st = pool.fresh_status();
    let a = &st["attachments"][0];
    assert!(a["bytes_below"].as_u64().unwrap() > 0, "some files were let go: {a}");
    assert!(a["bytes_in_pool"].as_u64().unwrap() <= 32 * MIB as u64, "{a}");
    // A pinned file is never let go.
    pool.ok(&["pin", "/big/f00"]);
    // `load` insists on keeping: while the pool is full it fails, saying so,
    // until the upkeep has made room.
    let t = std::time::Instant::now();
    loop {
        let out = pool.cli(&["load", "/big/f00"]);
        if out.status.success() {
            break;
        }
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("pool full") && t.elapsed() < std::time::Duration::from_secs(20), "{e}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for (i, f) in files.iter().enumerate().skip(1) {
        same(&pool.get(&format!("/big/f{i:02}")), f, "after pinning");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(pool.under_chunks("/big/f00").0, 1, "pinned: kept");
}

#[test]
fn a_nearly_full_pool_lets_go_of_the_files_used_longest_ago_not_the_oldest() {
    // 32 MiB of tiers; ten files of 3 MiB below, the first changed longest ago.
    let pool = Pool::start_with(1, "8MiB", "24MiB", &["--write-back-every", "100ms"]);
    let src = tempfile::tempdir().unwrap();
    let files: Vec<Vec<u8>> = (0..10).map(|i| data(200 + i, 3 * MIB)).collect();
    let hour = std::time::Duration::from_secs(3600);
    for (i, f) in files.iter().enumerate() {
        let path = src.path().join(format!("f{i}"));
        std::fs::write(&path, f).unwrap();
        let changed = std::time::SystemTime::now() - hour * (10 - i as u32);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(changed).unwrap();
    }
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/lru"]);
    // Loaded in order (27 MiB, under the 90% that starts letting go), then
    // the three oldest read again: f3 and f4 are now the files used longest ago.
    for i in 0..9 {
        pool.ok(&["load", &format!("/lru/f{i}")]);
    }
    for (i, f) in files.iter().enumerate().take(3) {
        same(&pool.get(&format!("/lru/f{i}")), f, "read again");
    }
    // 30 MiB of 32: the upkeep lets go of two files (down to about 80%).
    pool.ok(&["load", "/lru/f9"]);
    let t = std::time::Instant::now();
    while !pool.log("coordinator.log").contains("let go of 2 clean files") {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{}", pool.log("coordinator.log"));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let in_pool: Vec<u64> = (0..10).map(|i| pool.under_chunks(&format!("/lru/f{i}")).0).collect();
    assert_eq!(in_pool, vec![1, 1, 1, 0, 0, 1, 1, 1, 1, 1], "f3 and f4 were let go");
    for (i, f) in files.iter().enumerate() {
        same(&pool.get(&format!("/lru/f{i}")), f, "after letting go");
    }
}

#[test]
fn a_through_attachment_whose_store_is_down_refuses_writes_and_recovers_when_it_returns() {
    let mut s3 = S3Server::start();
    s3.create_bucket("lake");
    let pool = Pool::start(1, "64MiB", "256MiB");
    let (ak, sk) = (format!("access_key_id={}", s3.access_key), format!("secret_access_key={}", s3.secret_key));
    let ep = s3.endpoint();
    pool.ok(&["attach", "s3://lake/t", "/t", "--endpoint", &ep, "-o", &ak, "-o", &sk]);
    let first = data(31, MIB + 9);
    pool.put("/t/first.bin", &first);
    let dir = s3.bucket_dir("lake").join("t");
    let below = |name: &str| dir.join(name);
    assert_eq!(std::fs::read(below("first.bin")).unwrap(), first);
    s3.stop();
    // Not acknowledged: the put fails naming the path and the store.
    let second = data(32, 2 * MIB + 1);
    let local = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(local.path(), &second).unwrap();
    let e = pool.err(&["put", local.path().to_str().unwrap(), "/t/second.bin"]);
    assert!(e.contains("/t/second.bin") && e.contains("s3://lake"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    // The pool keeps the bytes as changes not below, and serves everything meanwhile.
    assert!(pool.under_chunks("/t/second.bin").2, "changes not below");
    assert_eq!(pool.get("/t/second.bin"), second);
    assert_eq!(pool.get("/t/first.bin"), first);
    assert_eq!(pool.status()["attachments"][0]["dirty_files"].as_u64(), Some(1));
    let e = pool.err(&["sync", "/t"]);
    assert!(e.contains("s3://lake"), "{e}");
    assert!(!below("second.bin").exists());
    // Back: sync writes it, byte-exact, and the file is clean.
    s3.restart();
    pool.ok(&["sync", "/t"]);
    assert_eq!(std::fs::read(below("second.bin")).unwrap(), second);
    assert!(!pool.under_chunks("/t/second.bin").2, "clean");
    assert_eq!(std::fs::read(below("first.bin")).unwrap(), first);
}

#[test]
fn every_process_killed_during_the_write_back_loses_nothing_and_versions_land_in_order() {
    const FILES: usize = 16;
    let mut pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "100ms"]);
    let src = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/wb", "--mode", "back"]);
    let version = |f: usize, round: usize| data((100 * round + f) as u64, 256 * 1024 + 7 * round + f);
    for round in 0..3 {
        for f in 0..FILES {
            pool.put(&format!("/wb/f{f}.bin"), &version(f, round));
        }
        // Killed at once: the write-back, running meanwhile every 100 ms,
        // still owes this round's last files and may be writing one.
        pool.kill_worker(0);
        pool.kill_coordinator();
        pool.start_coordinator();
        pool.start_worker(0);
        pool.wait_alive(1);
        for f in 0..FILES {
            wait_below(&src.path().join(format!("f{f}.bin")), &version(f, round));
        }
        let t = std::time::Instant::now();
        while pool.status()["attachments"][0]["dirty_files"].as_u64() != Some(0) {
            assert!(t.elapsed() < std::time::Duration::from_secs(30), "still dirty: {}", pool.status());
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Nothing older lands later.
        std::thread::sleep(std::time::Duration::from_millis(300));
        for f in 0..FILES {
            assert!(std::fs::read(src.path().join(format!("f{f}.bin"))).unwrap() == version(f, round), "f{f}");
        }
    }
}

#[test]
fn bytes_already_below_after_a_crash_are_recorded_not_written_again() {
    let pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let src = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/wb", "--mode", "back"]);
    let (same, other) = (data(51, 5 * MIB + 3), data(52, 2 * MIB));
    pool.put("/wb/same.bin", &same);
    pool.put("/wb/other.bin", &other);
    // As a write-back that finished just before a crash leaves them: the
    // bytes below, the pool not knowing. One object holds the file's bytes,
    // the other as many bytes but not the file's.
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let mut wrong = other.clone();
    wrong[MIB] ^= 1;
    for (name, bytes) in [("same.bin", &same), ("other.bin", &wrong)] {
        std::fs::write(src.path().join(name), bytes).unwrap();
        std::fs::File::options().write(true).open(src.path().join(name)).unwrap().set_modified(old).unwrap();
    }
    let done = json(&pool.ok(&["sync", "/wb", "--json"]));
    assert_eq!(done["files"].as_u64(), Some(2));
    let mtime = |name: &str| std::fs::metadata(src.path().join(name)).unwrap().modified().unwrap();
    assert_eq!(mtime("same.bin"), old, "the object holding the file's bytes is not written again");
    assert_ne!(mtime("other.bin"), old, "the other one is");
    assert_eq!(std::fs::read(src.path().join("other.bin")).unwrap(), other);
    assert_eq!(std::fs::read(src.path().join("same.bin")).unwrap(), same);
    assert!(!pool.under_chunks("/wb/same.bin").2 && !pool.under_chunks("/wb/other.bin").2, "both clean");
    // Clean means clean: freed, the file reads back from the object.
    pool.ok(&["free", "-r", "/wb"]);
    assert_eq!(pool.get("/wb/same.bin"), same);
}
