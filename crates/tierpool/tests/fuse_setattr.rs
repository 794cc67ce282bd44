//! `chmod`, `utimens` and `chown` through a real FUSE mount: permission bits,
//! owners and times are kept by the pool (the CLI and a second mount see
//! them), writes after `chmod` keep the mode, `mkdir` keeps its mode, and
//! the kernel checks permissions against the pool's owners and modes for
//! another user. Changes to a file being written are published with its
//! bytes (at `close` or `fsync`), and a write after them moves its time on.

mod common;
use common::{Mount, Pool};
use serde_json::Value;
use std::fs::{self, File, FileTimes, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, UNIX_EPOCH};

/// Taken whole by the test that holds a descriptor of a file whose publish
/// waits for a worker that is gone, shared by the others. A process
/// another test started meanwhile would inherit the descriptor and close it
/// as it starts (on `exec`), which publishes and so waits as long, holding
/// that test up.
static ALONE: RwLock<()> = RwLock::new(());

fn not_alone() -> RwLockReadGuard<'static, ()> {
    ALONE.read().unwrap_or_else(PoisonError::into_inner)
}

fn stat_json(pool: &Pool, path: &str) -> Value {
    serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn chmod_and_utimens_are_kept_by_the_pool() {
    let _shared = not_alone();
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::write(m.p("f"), b"data").unwrap();
    fs::create_dir(m.p("d")).unwrap();
    // chmod of a file and of a directory
    fs::set_permissions(m.p("f"), Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(m.p("d"), Permissions::from_mode(0o711)).unwrap();
    assert_eq!((mode(&m.p("f")), mode(&m.p("d"))), (0o600, 0o711));
    assert_eq!(stat_json(&pool, "/f")["mode"], "600");
    assert_eq!(stat_json(&pool, "/d")["mode"], "711");
    // utimens: an exact modification time, to the nanosecond
    let t = UNIX_EPOCH + Duration::new(1_000_000_000, 123_456_789);
    File::open(m.p("f")).unwrap().set_times(FileTimes::new().set_modified(t)).unwrap();
    assert_eq!(fs::metadata(m.p("f")).unwrap().modified().unwrap(), t);
    assert_eq!(stat_json(&pool, "/f")["mtime_ns"], 1_000_000_000_123_456_789u64);
    assert_eq!(fs::read(m.p("f")).unwrap(), b"data");
    // a write after chmod keeps the mode; times set on an open, written file stick
    {
        let mut f = OpenOptions::new().append(true).open(m.p("f")).unwrap();
        f.write_all(b"+more").unwrap();
        fs::set_permissions(m.p("f"), Permissions::from_mode(0o640)).unwrap();
        f.set_times(FileTimes::new().set_modified(t)).unwrap();
    }
    assert_eq!(fs::read(m.p("f")).unwrap(), b"data+more");
    assert_eq!(mode(&m.p("f")), 0o640);
    assert_eq!(stat_json(&pool, "/f")["mtime_ns"], 1_000_000_000_123_456_789u64);
    // a second mount sees the same
    let other = Mount::new(&pool, "mnt2");
    assert_eq!(mode(&other.p("f")), 0o640);
    assert_eq!(fs::metadata(other.p("f")).unwrap().modified().unwrap(), t);
    // owners are kept: root gives the file away; the CLI and the other mount see it
    std::os::unix::fs::chown(m.p("f"), Some(4242), Some(4343)).unwrap();
    let md = fs::metadata(m.p("f")).unwrap();
    assert_eq!((md.uid(), md.gid()), (4242, 4343));
    assert_eq!(
        (stat_json(&pool, "/f")["uid"].as_u64(), stat_json(&pool, "/f")["gid"].as_u64()),
        (Some(4242), Some(4343))
    );
    std::thread::sleep(Duration::from_millis(1100)); // the kernel keeps attributes for 1 s
    assert_eq!(fs::metadata(other.p("f")).unwrap().uid(), 4242);
    // mkdir keeps the mode it is given; a name longer than 255 bytes is ENAMETOOLONG
    std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700).create(m.p("private")).unwrap();
    assert_eq!(mode(&m.p("private")), 0o700);
    assert_eq!(stat_json(&pool, "/private")["mode"], "700");
    let e = fs::write(m.p(&"n".repeat(256)), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG));
    // and a missing file is ENOENT
    let e = fs::set_permissions(m.p("nope"), Permissions::from_mode(0o600)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
}

#[test]
fn attribute_changes_of_a_file_being_written_are_published_with_it() {
    let _shared = not_alone();
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    let t = UNIX_EPOCH + Duration::new(1_000_000_000, 5);
    let (mut f, big) = (File::create(m.p("f")).unwrap(), File::create(m.p("big")).unwrap());
    f.write_all(b"being written").unwrap();
    (&big).write_all(&vec![7u8; 100_000]).unwrap();
    for (file, name) in [(&f, "f"), (&big, "big")] {
        // As `tar` does: owner, mode, then times, on the open file.
        std::os::unix::fs::fchown(file, Some(4242), Some(4343)).unwrap();
        file.set_permissions(Permissions::from_mode(0o604)).unwrap();
        file.set_times(FileTimes::new().set_modified(t).set_accessed(t)).unwrap();
        // This mount shows them at once, others once the file is published
        // (a process started meanwhile publishes it: its copy of the
        // descriptor is closed when it starts).
        let md = fs::metadata(m.p(name)).unwrap();
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777, md.modified().unwrap()), (4242, 4343, 0o604, t));
    }
    f.sync_all().unwrap();
    drop(big);
    for name in ["/f", "/big"] {
        let st = stat_json(&pool, name);
        assert_eq!(
            (st["uid"].as_u64(), st["gid"].as_u64(), st["mode"].as_str()),
            (Some(4242), Some(4343), Some("604"))
        );
        assert_eq!(
            (st["mtime_ns"].as_u64(), st["atime_ns"].as_u64()),
            (Some(1_000_000_000_000_000_005), Some(1_000_000_000_000_000_005))
        );
    }
    assert_eq!(pool.get("/f"), b"being written");
    assert_eq!(fs::read(m.p("big")).unwrap(), vec![7u8; 100_000]);
    // A write after the time was set moves it on; the mode set stays.
    f.write_all(b" more").unwrap();
    f.set_permissions(Permissions::from_mode(0o600)).unwrap();
    f.set_times(FileTimes::new().set_modified(t)).unwrap();
    f.write_all(b"!").unwrap();
    drop(f);
    let st = stat_json(&pool, "/f");
    assert_eq!(st["mode"], "600");
    let now = std::time::SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mtime = st["mtime_ns"].as_u64().unwrap();
    assert!(now - mtime < 60_000_000_000, "the write after utimens set the time to now: {st}");
    assert_eq!(pool.get("/f"), b"being written more!");
}

#[test]
fn writes_after_attribute_changes_of_a_large_file_keep_their_bytes() {
    let _shared = not_alone();
    // A file past the metadata's inline room has its unsent chunks sent
    // when its attributes change; writes after that replace what was sent.
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    let mut want = common::data(1, 60_000);
    let mut f = File::create(m.p("f")).unwrap();
    f.write_all(&want).unwrap();
    f.set_permissions(Permissions::from_mode(0o640)).unwrap();
    // Into the chunk just sent, and past its end.
    f.write_all_at(b"overwritten", 10).unwrap();
    want[10..21].copy_from_slice(b"overwritten");
    let more = common::data(2, 40_000);
    f.write_all_at(&more, 60_000).unwrap();
    want.extend_from_slice(&more);
    std::os::unix::fs::fchown(&f, Some(4242), None).unwrap();
    drop(f);
    assert_eq!(pool.get("/f"), want);
    assert_eq!(fs::read(m.p("f")).unwrap(), want);
    let st = stat_json(&pool, "/f");
    assert_eq!(
        (st["mode"].as_str(), st["uid"].as_u64(), st["size"].as_u64()),
        (Some("640"), Some(4242), Some(100_000))
    );
    // The version sent before the last writes is discarded: one copy of
    // the file's bytes is left on the workers.
    pool.settle(100_000);
}

#[test]
fn a_file_with_more_unsent_chunks_than_go_at_once_keeps_its_bytes() {
    let _shared = not_alone();
    // Ten chunks begun and none finished: an attribute change hands out as
    // many as go at once, the publish at close the rest.
    const CHUNK: usize = 4 << 20;
    let pool = Pool::start(1, "64MiB", "256MiB");
    let m = Mount::new(&pool, "mnt");
    let mut want = vec![0u8; 9 * CHUNK + 1000];
    let f = File::create(m.p("f")).unwrap();
    for i in 0..10 {
        let piece = common::data(10 + i as u64, 1000);
        f.write_all_at(&piece, (i * CHUNK) as u64).unwrap();
        want[i * CHUNK..i * CHUNK + 1000].copy_from_slice(&piece);
    }
    f.set_permissions(Permissions::from_mode(0o640)).unwrap();
    drop(f);
    assert!(pool.get("/f") == want, "the file's bytes, holes as zeros");
    assert_eq!(stat_json(&pool, "/f")["mode"], "640");
}

#[test]
fn a_failed_early_store_is_left_to_the_publish() {
    let _alone = ALONE.write().unwrap_or_else(PoisonError::into_inner);
    // The chunks sent when attributes change are sent ahead of time: their
    // failure (the only worker is gone) is not the writer's error; the
    // publish at close sends them again, once the worker is back.
    let mut pool = Pool::start(1, "16MiB", "64MiB");
    let mut worker = common::Reaped(pool.workers[0].child.take());
    // Its replacement is started now and held by a shell until told to go:
    // a process started while the file is open closes its copy of the
    // descriptor as it starts, which publishes the file, which waits for
    // the worker being replaced.
    let log = || {
        let path = pool.tmp.path().join("worker-0.log");
        std::fs::OpenOptions::new().append(true).open(path).unwrap()
    };
    let mut gate = common::Reaped(Some(
        Command::new("sh")
            .args(["-c", "read go && exec \"$0\" \"$@\"", common::BIN, "worker", "--dir"])
            .arg(&pool.workers[0].dir)
            .args(["--mem", "16MiB", "--disk", "64MiB", "--coordinator", &pool.addr, "--host", "host0"])
            .args(["--stop-with", &std::process::id().to_string(), "--secret-file"])
            .arg(pool.secret_file())
            .stdin(Stdio::piped())
            .stdout(log())
            .stderr(log())
            .spawn()
            .unwrap(),
    ));
    let m = Mount::new(&pool, "mnt");
    let mut want = common::data(3, 60_000);
    let mut f = File::create(m.p("f")).unwrap();
    f.write_all(&want).unwrap();
    let w = worker.0.as_mut().unwrap();
    w.kill().unwrap();
    w.wait().unwrap();
    f.set_permissions(Permissions::from_mode(0o600)).unwrap();
    // The early store gives up after the client's patience for a worker (30 s).
    std::thread::sleep(Duration::from_secs(33));
    f.write_all(b"after").unwrap();
    want.extend_from_slice(b"after");
    writeln!(gate.0.as_mut().unwrap().stdin.take().unwrap(), "go").unwrap();
    pool.wait_registered(0, 2);
    drop(f);
    assert_eq!(pool.get("/f"), want);
    assert_eq!(stat_json(&pool, "/f")["mode"], "600");
}

/// Runs `sh -c script` as user and group `id`; returns whether it succeeded and its stderr.
fn as_user(id: u32, script: &str) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("sh").args(["-c", script]).uid(id).gid(id).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn permissions_are_checked_against_the_pools_owners() {
    let _shared = not_alone();
    let pool = Pool::start(1, "16MiB", "64MiB");
    // The test directory is private; the other user must reach the mount point.
    fs::set_permissions(pool.dir(), Permissions::from_mode(0o755)).unwrap();
    let m = Mount::new(&pool, "mnt");
    let nobody = 65534;
    fs::write(m.p("root-only"), b"secret").unwrap();
    fs::set_permissions(m.p("root-only"), Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(m.p("shared")).unwrap();
    fs::set_permissions(m.p("shared"), Permissions::from_mode(0o777)).unwrap();
    let dir = m.dir.to_str().unwrap();
    // another user cannot read a 0600 file of root's, nor write into root's 0755 root directory
    let (ok, err) = as_user(nobody, &format!("cat {dir}/root-only"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
    let (ok, err) = as_user(nobody, &format!("echo x > {dir}/mine"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
    // a file made by that user in a world-writable directory is theirs
    let (ok, err) = as_user(nobody, &format!("echo hello > {dir}/shared/mine && chmod 640 {dir}/shared/mine"));
    assert!(ok, "{err}");
    let md = fs::metadata(m.p("shared/mine")).unwrap();
    assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (nobody, nobody, 0o640));
    assert_eq!(stat_json(&pool, "/shared/mine")["uid"].as_u64(), Some(u64::from(nobody)));
    assert_eq!(fs::read(m.p("shared/mine")).unwrap(), b"hello\n");
    // and they cannot give it away
    let (ok, err) = as_user(nobody, &format!("chown 0 {dir}/shared/mine"));
    assert!(!ok && err.contains("not permitted"), "{err}");
}
