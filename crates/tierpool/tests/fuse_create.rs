//! New files the mount answers the create of itself, made in the pool by
//! their first publish: their bytes, owner, group and mode as a create by
//! the pool would have given them; seen by other clients at the publish,
//! or soon if the file stays open; renamed, linked or removed before it;
//! and a name another client took meanwhile, which only one of the two
//! gets.

mod common;
use common::{data, Mount, Pool};
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far above the half second a file answered here waits for its publish.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

/// Waits until `check` holds, for at most `SEEN_WITHIN`.
fn seen(what: &str, check: impl Fn() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(t.elapsed() < SEEN_WITHIN, "{what}: not seen within {SEEN_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `(size, mode bits, uid, gid)` of `path` in the pool, as the CLI says.
fn pool_stat(pool: &Pool, path: &str) -> (u64, u32, u64, u64) {
    let s = common::json(&pool.ok(&["stat", path, "--json"]));
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}"));
    let mode = u32::from_str_radix(s["mode"].as_str().unwrap_or_else(|| panic!("mode in {s}")), 8).unwrap();
    (n("size"), mode, n("uid"), n("gid"))
}

#[test]
fn new_files_are_made_by_their_publish_with_their_bytes_owner_group_and_mode() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let a = Mount::new(&pool, "a");
    fs::create_dir(a.p("d")).unwrap();
    // A set-group-id directory of group 50: its new files take that group.
    std::os::unix::fs::chown(a.p("d"), None, Some(50)).unwrap();
    fs::set_permissions(a.p("d"), fs::Permissions::from_mode(0o2775)).unwrap();
    fs::write(a.p("d/first"), b"made by the pool at its create").unwrap();
    let sizes = [0usize, 1, 100, 4096, 100_000, 5 << 20];
    for (i, len) in sizes.iter().enumerate() {
        let bytes = data(i as u64, *len);
        let path = a.p(&format!("d/f{i}"));
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o640).open(&path).unwrap();
        f.write_all(&bytes).unwrap();
        // The mount's view before the publish: as the pool will make it.
        let md = fs::metadata(&path).unwrap();
        assert_eq!((md.size(), md.mode() & 0o7777, md.uid(), md.gid()), (*len as u64, 0o640, 0, 50), "f{i} open");
        drop(f);
        assert_eq!(pool.get(&format!("/d/f{i}")), bytes, "f{i} through the CLI");
        assert_eq!(pool_stat(&pool, &format!("/d/f{i}")), (*len as u64, 0o640, 0, 50), "f{i} in the pool");
        assert_eq!(fs::read(&path).unwrap(), bytes, "f{i} read back through the mount");
        let md = fs::metadata(&path).unwrap();
        assert_eq!((md.size(), md.mode() & 0o7777, md.gid(), md.nlink()), (*len as u64, 0o640, 50, 1), "f{i} closed");
    }
    // An empty file made by `touch`-like opens, closed without a write.
    fs::File::create(a.p("d/empty")).unwrap();
    assert_eq!(pool.get("/d/empty"), b"");
    // Created read-only (as lock files are): made by its close all the same.
    let lock = std::ffi::CString::new(a.p("d/lock").into_os_string().into_vec()).unwrap();
    // SAFETY: plain system calls on a path and on the descriptor they return.
    let fd = unsafe { libc::open(lock.as_ptr(), libc::O_RDONLY | libc::O_CREAT, 0o644) };
    assert!(fd >= 0, "{}", std::io::Error::last_os_error());
    assert_eq!(unsafe { libc::close(fd) }, 0);
    assert_eq!(pool_stat(&pool, "/d/lock"), (0, 0o644, 0, 50));
    // O_EXCL of a name made that way fails; a plain open of it truncates.
    let e = fs::OpenOptions::new().write(true).create_new(true).open(a.p("d/f2")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    fs::write(a.p("d/f2"), b"again").unwrap();
    assert_eq!(pool.get("/d/f2"), b"again");
    let mut names: Vec<String> =
        fs::read_dir(a.p("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["empty", "f0", "f1", "f2", "f3", "f4", "f5", "first", "lock"]);
    assert_eq!(fs::metadata(a.p("d")).unwrap().size(), 9, "the directory counts its entries");
}

#[test]
fn a_new_file_kept_open_is_seen_by_other_clients_and_renamed_linked_or_removed_before_its_publish() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    fs::create_dir(a.p("d")).unwrap();
    fs::write(a.p("d/first"), b"1").unwrap();
    // Kept open: the other mount and the CLI see the name (empty) before it is closed.
    let mut held = fs::File::create(a.p("d/held")).unwrap();
    held.write_all(b"written while held").unwrap();
    seen("a file kept open, in the other mount", || b.p("d/held").exists());
    assert!(pool.ok(&["ls", "/d"]).lines().any(|l| l == "held"));
    held.sync_all().unwrap();
    assert_eq!(fs::read(b.p("d/held")).unwrap(), b"written while held");
    drop(held);
    // Renamed before its first close: the bytes go with the new name.
    let mut f = fs::File::create(a.p("d/old")).unwrap();
    f.write_all(b"moved").unwrap();
    fs::rename(a.p("d/old"), a.p("d/new")).unwrap();
    drop(f);
    assert_eq!(pool.get("/d/new"), b"moved");
    assert!(!a.p("d/old").exists() && !b.p("d/old").exists());
    // Linked before its first close: both names, one inode.
    let mut f = fs::File::create(a.p("d/one")).unwrap();
    fs::hard_link(a.p("d/one"), a.p("d/two")).unwrap();
    f.write_all(b"linked").unwrap();
    drop(f);
    assert_eq!((pool.get("/d/one"), pool.get("/d/two")), (b"linked".to_vec(), b"linked".to_vec()));
    assert_eq!(fs::metadata(b.p("d/one")).unwrap().ino(), fs::metadata(b.p("d/two")).unwrap().ino());
    // Removed before its first close: nothing stays, and the close is clean.
    let mut f = fs::File::create(a.p("d/gone")).unwrap();
    f.write_all(b"never published").unwrap();
    fs::remove_file(a.p("d/gone")).unwrap();
    f.write_all(b", still writable").unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert!(!a.p("d/gone").exists());
    assert!(!pool.ok(&["ls", "/d"]).lines().any(|l| l == "gone"));
    // Listed through the same mount while still open: there.
    let f = fs::File::create(a.p("d/listed")).unwrap();
    assert!(fs::read_dir(a.p("d")).unwrap().any(|e| e.unwrap().file_name() == "listed"));
    assert!(pool.ok(&["ls", "/d"]).lines().any(|l| l == "listed"), "made before the listing was read");
    drop(f);
}

#[test]
fn a_name_another_client_takes_before_the_publish_goes_to_one_of_them_only() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let a = Mount::new(&pool, "a");
    fs::create_dir(a.p("d")).unwrap();
    fs::write(a.p("d/first"), b"1").unwrap();
    let theirs = pool.dir().join("theirs");
    fs::write(&theirs, b"the other client's").unwrap();
    let mut put_first = 0;
    for i in 0..5 {
        let name = format!("d/x{i}");
        // The other client's put waits for a word: started before the file
        // is opened, so that it does not inherit (and close, publishing it)
        // the mount's descriptor.
        let put = pool.cmd(&["put", "--no-clobber", theirs.to_str().unwrap(), &format!("/{name}")]);
        let put = Command::new("sh")
            .args(["-c", "read go && exec \"$0\" \"$@\""])
            .arg(put.get_program())
            .args(put.get_args())
            .envs(put.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut f = fs::File::create(a.p(&name)).unwrap();
        f.write_all(b"this mount's").unwrap();
        let mut put = put;
        writeln!(put.stdin.take().unwrap(), "go").unwrap();
        let put = put.wait_with_output().unwrap();
        let synced = f.sync_all();
        drop(f);
        let got = pool.get(&format!("/{name}"));
        if put.status.success() {
            // The other client took the name first: this mount's file was never made.
            let e = synced.expect_err("the publish of a name taken meanwhile");
            assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{e}");
            assert_eq!(got, b"the other client's");
            // The kernel drops the file it was told of (at once, not when the feed brings the put).
            let theirs_here = || fs::read(a.p(&name)).is_ok_and(|b| b == b"the other client's");
            seen("the other client's file through the mount", theirs_here);
        } else {
            // This mount's file was made first (it waited long enough): the put found it.
            let stderr = String::from_utf8_lossy(&put.stderr);
            assert!(stderr.contains("exists"), "{stderr}");
            synced.unwrap();
            assert_eq!(got, b"this mount's");
        }
        assert_eq!(fs::read(a.p(&name)).unwrap(), got, "the mount reads what the pool holds");
        put_first += usize::from(put.status.success());
    }
    assert!(put_first > 0, "the other client's put never came first");
}
