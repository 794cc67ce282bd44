//! A mount follows the pool's change feed: the kernel keeps names and
//! attributes past the second it kept them for without it, and drops them
//! when another client changes them, or when the feed was lost (a
//! coordinator started again).

mod common;
use common::{Mount, Pool, Reaped};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Far below the 30 s the kernel keeps answers for while the feed is
/// followed: a change seen within it was passed on, not waited out.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

fn signal(pid: u32, sig: i32) {
    // SAFETY: a plain system call on a child process of this test.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    if sig == libc::SIGSTOP {
        stopped(pid);
    }
}

/// Waits until every thread of `pid` is stopped: a thread woken by a
/// request before the stop reached it could still answer it.
fn stopped(pid: u32) {
    let t = Instant::now();
    loop {
        let tasks = fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let state = |task: fs::DirEntry| {
            let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the command name in parentheses.
            stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
        };
        if tasks.map(|t| state(t.unwrap())).all(|s| s == Some('T') || s == Some('t')) {
            return;
        }
        assert!(t.elapsed() < SEEN_WITHIN, "process {pid}: not stopped within {SEEN_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `check` holds, for at most `SEEN_WITHIN`.
fn seen(what: &str, check: impl Fn() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(t.elapsed() < SEEN_WITHIN, "{what}: not seen within {SEEN_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What `ask` answers, asked from another thread, which the coordinator
/// being stopped must not hold up: `None` if it took longer than `limit`.
fn alone<T: Send + 'static>(limit: Duration, ask: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ask());
    });
    rx.recv_timeout(limit).ok()
}

/// `stat` of `path` (ino, size, permission bits), asked `alone`.
fn stat_alone(path: &Path, limit: Duration) -> Option<(u64, u64, u32)> {
    let path = path.to_path_buf();
    alone(limit, move || {
        let md = fs::metadata(&path).unwrap();
        (md.ino(), md.size(), md.mode() & 0o7777)
    })
}

#[test]
fn the_kernel_keeps_names_and_attributes_and_drops_what_other_clients_change() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    fs::create_dir(b.p("d")).unwrap();
    for (name, bytes) in [("f", &b"one"[..]), ("g", b"short"), ("i", b"moved")] {
        fs::write(b.p(&format!("d/{name}")), bytes).unwrap();
    }
    seen("the mounts following the feed in the status", || pool.status()["change_feed"]["followers"] == 2);
    // The feed brings this mount the other one's changes (and the kernel
    // drops what they touched) within far less than a second.
    std::thread::sleep(Duration::from_secs(1));
    let f = fs::metadata(a.p("d/f")).unwrap();
    assert_eq!(fs::metadata(a.p("d/g")).unwrap().size(), 5);
    assert!(a.p("d/i").exists());
    assert!(!a.p("d/j").exists());
    // Kept: with the coordinator stopped, past the second, the kernel
    // answers alone.
    let coordinator = pool.coordinator.as_ref().unwrap().id();
    signal(coordinator, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1500));
    let kept = stat_alone(&a.p("d/f"), Duration::from_secs(3));
    signal(coordinator, libc::SIGCONT);
    assert_eq!(kept, Some((f.ino(), 3, f.mode() & 0o7777)), "kept by the kernel");
    // Another client's changes reach the kernel.
    fs::set_permissions(b.p("d/f"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(b.p("d/g"), b"much longer now").unwrap();
    fs::rename(b.p("d/i"), b.p("d/k")).unwrap();
    fs::write(b.p("d/j"), b"made").unwrap();
    seen("a chmod", || fs::metadata(a.p("d/f")).unwrap().mode() & 0o7777 == 0o600);
    seen("a new size", || fs::metadata(a.p("d/g")).unwrap().size() == 15);
    assert_eq!(fs::read(a.p("d/g")).unwrap(), b"much longer now");
    seen("a rename", || !a.p("d/i").exists() && a.p("d/k").exists());
    assert_eq!(fs::read(a.p("d/k")).unwrap(), b"moved");
    seen("a create", || a.p("d/j").exists());
    // This mount's own changes are shown at once, as before.
    fs::set_permissions(a.p("d/f"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(a.p("d/f")).unwrap().mode() & 0o7777, 0o640);
    fs::remove_file(a.p("d/k")).unwrap();
    assert!(!a.p("d/k").exists());
    seen("the other way", || fs::metadata(b.p("d/f")).unwrap().mode() & 0o7777 == 0o640 && !b.p("d/k").exists());
}

#[test]
fn a_coordinator_started_again_has_mounts_drop_everything_their_kernel_keeps() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    fs::create_dir(b.p("d")).unwrap();
    fs::write(b.p("d/f"), b"one").unwrap();
    fs::write(b.p("d/gone"), b"two").unwrap();
    assert_eq!(fs::metadata(a.p("d/f")).unwrap().mode() & 0o7777, 0o644);
    assert!(a.p("d/gone").exists());
    // kill -9, and a new coordinator on the same address: its feed is new.
    signal(pool.coordinator.as_ref().unwrap().id(), libc::SIGKILL);
    let _again = Reaped(Some(pool.spawn_coordinator()));
    pool.wait_alive(1);
    fs::set_permissions(b.p("d/f"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(b.p("d/gone")).unwrap();
    seen("a chmod after the restart", || fs::metadata(a.p("d/f")).unwrap().mode() & 0o7777 == 0o600);
    seen("an unlink after the restart", || !a.p("d/gone").exists());
}

/// What `stat` of `path` answered, asked `alone`: `Ok` if it exists, else
/// its errno (`ENOENT`: missing).
fn stat_errno_alone(path: &Path, limit: Duration) -> Option<Result<(), i32>> {
    let path = path.to_path_buf();
    alone(limit, move || fs::metadata(&path).map(|_| ()).map_err(|e| e.raw_os_error().unwrap_or(0)))
}

#[test]
fn a_directory_this_mount_made_answers_missing_names_itself_until_another_client_changes_it() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    fs::create_dir(b.p("theirs")).unwrap();
    seen("the mounts following the feed in the status", || pool.status()["change_feed"]["followers"] == 2);
    // The other mount's changes heard of first: a directory made while one
    // comes is not known whole.
    std::thread::sleep(Duration::from_secs(1));
    fs::create_dir(a.p("mine")).unwrap();
    fs::write(a.p("mine/x"), b"x").unwrap();
    fs::rename(a.p("mine/x"), a.p("mine/y")).unwrap();
    assert!(!a.p("mine/x").exists());
    assert_eq!(fs::read(a.p("mine/y")).unwrap(), b"x");
    // Another client's directory: b made it, and `a` lists nothing of it.
    assert!(a.p("theirs").is_dir());
    // With the coordinator stopped, a name never looked up is known
    // missing in the directory this mount made, and only there.
    let coordinator = pool.coordinator.as_ref().unwrap().id();
    signal(coordinator, libc::SIGSTOP);
    let mine = stat_errno_alone(&a.p("mine/never"), Duration::from_secs(2));
    let theirs = stat_errno_alone(&a.p("theirs/never"), Duration::from_secs(2));
    signal(coordinator, libc::SIGCONT);
    assert_eq!(mine, Some(Err(libc::ENOENT)), "answered missing by the mount alone");
    // Asked of the coordinator: no answer while it is stopped (or a failure
    // to ask), never "missing".
    assert!(theirs.is_none() || theirs.is_some_and(|r| r != Err(libc::ENOENT)), "asked of the coordinator: {theirs:?}");
    // Another client's new name in it is seen: the mount no longer answers
    // for the directory, and the kernel drops the name it kept as missing.
    assert!(!a.p("mine/z").exists());
    fs::write(b.p("mine/z"), b"from b").unwrap();
    seen("another client's name in a directory this mount made", || a.p("mine/z").exists());
    assert_eq!(fs::read(a.p("mine/z")).unwrap(), b"from b");
    seen("another client's missing name, asked again", || !a.p("mine/never").exists());
    // This mount's own changes in it stay as they are.
    fs::remove_file(a.p("mine/y")).unwrap();
    assert!(!a.p("mine/y").exists());
    seen("the other way", || !b.p("mine/y").exists() && b.p("mine/z").exists());
}

#[test]
fn files_this_mount_made_answer_stats_alone_past_the_second_until_another_client_changes_them() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    seen("the mounts following the feed in the status", || pool.status()["change_feed"]["followers"] == 2);
    std::thread::sleep(Duration::from_secs(1));
    fs::create_dir(a.p("made")).unwrap();
    let mut made = Vec::new();
    for i in 0..10u64 {
        fs::write(a.p(&format!("made/f{i}")), vec![b'x'; i as usize + 1]).unwrap();
        made.push(fs::metadata(a.p(&format!("made/f{i}"))).unwrap().ino());
    }
    // Past the second the kernel kept answers for without the feed, with
    // the coordinator stopped: the names the creates gave and the
    // attributes the closes published answer alone, first stats included.
    let coordinator = pool.coordinator.as_ref().unwrap().id();
    std::thread::sleep(Duration::from_millis(1500));
    fs::write(a.p("made/late"), b"late").unwrap();
    signal(coordinator, libc::SIGSTOP);
    let kept: Vec<_> = (0..10u64).map(|i| stat_alone(&a.p(&format!("made/f{i}")), Duration::from_secs(3))).collect();
    let late = stat_alone(&a.p("made/late"), Duration::from_secs(3));
    signal(coordinator, libc::SIGCONT);
    for (i, k) in kept.iter().enumerate() {
        assert_eq!(*k, Some((made[i], i as u64 + 1, 0o644)), "f{i}: kept");
    }
    assert_eq!(late.map(|(_, size, _)| size), Some(4), "closed and stat-ed at once");
    // Another client's changes to them reach the kernel.
    fs::set_permissions(b.p("made/f0"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(b.p("made/f1"), b"rewritten elsewhere").unwrap();
    seen("a chmod of a file made here", || fs::metadata(a.p("made/f0")).unwrap().mode() & 0o7777 == 0o600);
    seen("a rewrite of a file made here", || fs::metadata(a.p("made/f1")).unwrap().size() == 19);
    assert_eq!(fs::read(a.p("made/f1")).unwrap(), b"rewritten elsewhere");
    // And this mount's own later changes at once.
    fs::write(a.p("made/f2"), b"again").unwrap();
    assert_eq!(fs::metadata(a.p("made/f2")).unwrap().size(), 5);
}

#[test]
fn files_a_back_attachment_writes_below_still_answer_stats_alone() {
    // No write-back round runs on its own: `sync` writes them below.
    let pool = Pool::start_with(1, "16MiB", "64MiB", &["--write-back-every", "1h"]);
    let below = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", below.path().display()), "/in", "--mode", "back"]);
    let a = Mount::new(&pool, "a");
    seen("the mount following the feed in the status", || pool.status()["change_feed"]["followers"] == 1);
    // Written by another client: the mount has nothing of them to keep
    // for its own, and its kernel learns of them by stats alone.
    for i in 0..5u64 {
        pool.put(&format!("/in/f{i}"), &vec![b'x'; i as usize + 1]);
    }
    let coordinator = pool.coordinator.as_ref().unwrap().id();
    // What the kernel answers alone past the second, with the coordinator stopped.
    let alone = || {
        std::thread::sleep(Duration::from_millis(1500));
        signal(coordinator, libc::SIGSTOP);
        let kept: Vec<_> = (0..5u64).map(|i| stat_alone(&a.p(&format!("in/f{i}")), Duration::from_secs(3))).collect();
        signal(coordinator, libc::SIGCONT);
        kept
    };
    // Once the feed has brought the puts (a busy machine may bring them
    // after a first stat, dropping what it fetched), what a stat fetches
    // is kept.
    std::thread::sleep(Duration::from_millis(200));
    let mut tries = 0;
    let want = loop {
        let fetched: Vec<_> = (0..5u64)
            .map(|i| fs::metadata(a.p(&format!("in/f{i}"))).unwrap())
            .map(|md| Some((md.ino(), md.size(), md.mode() & 0o7777)))
            .collect();
        if alone() == fetched {
            break fetched;
        }
        tries += 1;
        assert!(tries < 5, "the kernel never kept the files' attributes");
    };
    pool.ok(&["sync", "/in"]);
    assert_eq!(pool.status()["attachments"][0]["dirty_files"], 0);
    for i in 0..5u64 {
        assert_eq!(fs::read(below.path().join(format!("f{i}"))).unwrap(), vec![b'x'; i as usize + 1]);
    }
    // Each file's record of being written below is no change a `stat`
    // shows, so the feed does not have the kernel drop them.
    assert_eq!(alone(), want, "kept across the write below");
}

#[test]
fn calls_right_after_another_clients_change_find_what_is_there_now() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    seen("the mount following the feed in the status", || pool.status()["change_feed"]["followers"] == 1);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let other = rt.block_on(tierpool_client::Client::connect(pool.client_config())).unwrap();
    let opts = tierpool_client::PutOptions::default();
    let put = |path: &str, bytes: &[u8]| {
        rt.block_on(other.put_bytes(path, bytes.to_vec().into(), &opts)).unwrap();
    };
    let errno = |r: std::io::Result<Vec<u8>>| r.unwrap_err().raw_os_error();
    // The kernel keeps names for long while the feed is followed. Another
    // client changes what is under them, and each call right after (before
    // the feed may have told the kernel) finds the pool as it is now: the
    // mount answers ESTALE for an inode gone, and the kernel looks the path
    // up again. Files replaced: each open reads the new one (close-to-open).
    put("/f", b"first");
    assert_eq!(fs::read(m.p("f")).unwrap(), b"first");
    for i in 0..10 {
        let bytes = format!("version {i}, longer than the first");
        put("/f", bytes.as_bytes());
        assert_eq!(fs::read(m.p("f")).unwrap(), bytes.as_bytes(), "the open after put {i}");
    }
    rt.block_on(other.remove("/f", false)).unwrap();
    assert_eq!(errno(fs::read(m.p("f"))), Some(libc::ENOENT));
    // Directories replaced: listed, stat-ed, made in, read through.
    fs::create_dir(m.p("d")).unwrap();
    for i in 0..10 {
        assert!(fs::read_dir(m.p("d")).is_ok() && fs::metadata(m.p("d")).unwrap().is_dir());
        let old = fs::metadata(m.p("d")).unwrap().ino();
        rt.block_on(other.remove("/d", true)).unwrap();
        rt.block_on(other.mkdir("/d", false)).unwrap();
        put("/d/f", format!("in {i}").as_bytes());
        let names: Vec<_> = fs::read_dir(m.p("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["f"], "the listing after replace {i}");
        assert_ne!(fs::metadata(m.p("d")).unwrap().ino(), old);
        fs::write(m.p(&format!("d/g{i}")), b"made").unwrap();
        assert_eq!(fs::read(m.p("d/f")).unwrap(), format!("in {i}").as_bytes());
    }
    rt.block_on(other.remove("/d", true)).unwrap();
    assert_eq!(errno(fs::read(m.p("d/f"))), Some(libc::ENOENT));
    // A call relative to a directory descriptor cannot walk anywhere else:
    // removing a tree another client removes meanwhile (`rm -rf` on two
    // mounts) meets ENOENT, as on a local disk, not ESTALE.
    fs::create_dir(m.p("t")).unwrap();
    fs::write(m.p("t/a"), b"a").unwrap();
    let dir = fs::File::open(m.p("t")).unwrap();
    assert_eq!(fs::read(m.p("t/a")).unwrap(), b"a");
    rt.block_on(other.remove("/t", true)).unwrap();
    for name in ["a", "never"] {
        let name = std::ffi::CString::new(name).unwrap();
        // SAFETY: a plain system call on a descriptor this test holds.
        let r = unsafe { libc::unlinkat(std::os::fd::AsRawFd::as_raw_fd(&dir), name.as_ptr(), 0) };
        assert_eq!((r, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::ENOENT)), "{name:?}");
    }
}

/// How many pages of `path` the kernel holds, looked at through an open
/// of its own (a read-only open, which keeps them or drops them as any).
fn pages_held(path: &Path) -> usize {
    pages_held_by(&fs::File::open(path).unwrap())
}

/// How many of the pages of the file open as `f` the kernel holds.
fn pages_held_by(f: &fs::File) -> usize {
    let len = f.metadata().unwrap().len() as usize;
    let mut held = vec![0u8; len.div_ceil(4096)];
    // SAFETY: a fresh read-only mapping of an open file, unmapped below;
    // `held` has a byte for each of its pages.
    unsafe {
        use std::os::fd::AsRawFd;
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        assert_eq!(libc::mincore(p, len, held.as_mut_ptr()), 0, "mincore: {}", std::io::Error::last_os_error());
        libc::munmap(p, len);
    }
    held.iter().filter(|b| **b & 1 == 1).count()
}

#[test]
fn an_open_keeps_the_kernels_pages_only_of_contents_unchanged_since_they_were_read() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    let pages = |v: u8| vec![v; 3 * 4096];
    fs::write(a.p("f"), pages(1)).unwrap();
    // Written through a handle that bypasses the kernel's cache: nothing
    // kept; read once, its pages are kept by the next open.
    assert_eq!(fs::read(a.p("f")).unwrap(), pages(1));
    assert_eq!(pages_held(&a.p("f")), 3, "kept by an open of what was read");
    assert_eq!(fs::read(a.p("f")).unwrap(), pages(1));
    assert_eq!(pages_held(&a.p("f")), 3);
    // Another mount rewrites it in place, as long as before: the next open
    // here reads the new bytes, however soon after the close there.
    for v in 2..12u8 {
        let mut f = fs::OpenOptions::new().write(true).open(b.p("f")).unwrap();
        std::io::Write::write_all(&mut f, &pages(v)).unwrap();
        drop(f);
        assert_eq!(fs::read(a.p("f")).unwrap(), pages(v), "the open after rewrite {v} elsewhere");
    }
    assert_eq!(pages_held(&a.p("f")), 3);
    // Grown elsewhere while a handle here reads it: the open after that
    // handle reads it all, though the kernel held the size from before.
    for v in 12..16u8 {
        let mut old = fs::File::open(a.p("f")).unwrap();
        let mut f = fs::OpenOptions::new().append(true).open(b.p("f")).unwrap();
        std::io::Write::write_all(&mut f, &[v; 100]).unwrap();
        drop(f);
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut old, &mut s).unwrap();
        drop(old);
        let got = fs::read(a.p("f")).unwrap();
        assert_eq!(
            (got.len(), got.last()),
            (3 * 4096 + 100 * (v as usize - 11), Some(&v)),
            "after append {v} elsewhere"
        );
    }
    fs::write(b.p("f"), pages(11)).unwrap();
    assert_eq!(fs::read(a.p("f")).unwrap(), pages(11));
    // A write here, and a cut here: read anew.
    let mut f = fs::OpenOptions::new().write(true).open(a.p("f")).unwrap();
    std::io::Write::write_all(&mut f, b"here").unwrap();
    drop(f);
    let mut want = pages(11);
    want[..4].copy_from_slice(b"here");
    assert_eq!(fs::read(a.p("f")).unwrap(), want);
    fs::OpenOptions::new().write(true).open(a.p("f")).unwrap().set_len(4096).unwrap();
    assert_eq!(fs::read(a.p("f")).unwrap(), want[..4096]);
    // Kept by the next open of what was read. (The feed tells this mount
    // of the other client's last rewrite at least 20 ms after it, and the
    // kernel then drops the pages: waited out.)
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(fs::read(a.p("f")).unwrap(), want[..4096]);
    assert_eq!(pages_held(&a.p("f")), 1);
    // Attributes set here, the file closed: the feed's news of them are
    // this mount's own, and its pages stay.
    fs::set_permissions(a.p("f"), fs::Permissions::from_mode(0o600)).unwrap();
    let path = std::ffi::CString::new(a.p("f").into_os_string().into_encoded_bytes()).unwrap();
    let times =
        [libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT }, libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }];
    // SAFETY: a plain system call with a valid path and two times.
    assert_eq!(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(pages_held(&a.p("f")), 1, "kept after this mount's own chmod and utimens");
    let md = fs::metadata(a.p("f")).unwrap();
    assert_eq!((md.mode() & 0o7777, md.mtime()), (0o600, 1_000_000));
}

#[test]
fn files_of_several_chunks_read_in_small_pieces_keep_their_pages_until_changed_elsewhere() {
    let pool = Pool::start(1, "32MiB", "64MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    // Two chunks of the default 4 MiB, over the kernel's read-ahead.
    let len = 6 * 1024 * 1024;
    let before = common::data(7, len);
    fs::write(b.p("lib.a"), &before).unwrap();
    // The feed's news of the write elsewhere drop what the kernel holds of
    // the file, 20 ms or more after it: waited out.
    std::thread::sleep(Duration::from_millis(100));
    // Read 10 KiB at a time, as `tar` reads: through the kernel's cache.
    let read_in_pieces = |path: &Path| {
        let mut f = fs::File::open(path).unwrap();
        let (mut all, mut piece) = (Vec::new(), vec![0; 10 * 1024]);
        loop {
            let n = std::io::Read::read(&mut f, &mut piece).unwrap();
            if n == 0 {
                break all;
            }
            all.extend_from_slice(&piece[..n]);
        }
    };
    assert!(read_in_pieces(&a.p("lib.a")) == before);
    assert_eq!(pages_held(&a.p("lib.a")), len / 4096, "kept by the next open of what was read");
    assert!(read_in_pieces(&a.p("lib.a")) == before);
    // Another mount changes a few bytes of the second chunk: the next open
    // here reads them, however soon after the close there.
    let mut after = before.clone();
    after[5 * 1024 * 1024..5 * 1024 * 1024 + 5].copy_from_slice(b"patch");
    let f = fs::OpenOptions::new().write(true).open(b.p("lib.a")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"patch", 5 * 1024 * 1024).unwrap();
    drop(f);
    assert!(read_in_pieces(&a.p("lib.a")) == after, "the open after the change elsewhere");
    // Kept again once read (the feed's news of the change waited out).
    std::thread::sleep(Duration::from_millis(100));
    assert!(read_in_pieces(&a.p("lib.a")) == after);
    assert_eq!(pages_held(&a.p("lib.a")), len / 4096);
    assert!(fs::read(a.p("lib.a")).unwrap() == after);
}

#[test]
fn removals_and_renames_here_keep_the_pages_of_files_still_open() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let a = Mount::new(&pool, "a");
    let bytes = |v: u8| -> Vec<u8> { (0..3 * 4096).map(|i| (i % 251) as u8 ^ v).collect() };
    let open_read = |name: &str, v: u8| {
        fs::write(a.p(name), bytes(v)).unwrap();
        assert_eq!(fs::read(a.p(name)).unwrap(), bytes(v));
        let f = fs::File::open(a.p(name)).unwrap();
        assert_eq!(pages_held_by(&f), 3, "kept by an open of what was read");
        f
    };
    let (mut f, mut g, mut h) = (open_read("f", 1), open_read("g", 2), open_read("h", 3));
    // The feed's news of the removal (the inode gone), of the move of g
    // and of h's replacement by it are this mount's own: the open files'
    // pages stay.
    fs::remove_file(a.p("f")).unwrap();
    fs::rename(a.p("g"), a.p("g2")).unwrap();
    fs::rename(a.p("g2"), a.p("h")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    for (file, v, what) in [(&mut f, 1, "removed"), (&mut g, 2, "moved twice"), (&mut h, 3, "replaced")] {
        assert_eq!(pages_held_by(file), 3, "kept after this mount's own changes: {what}");
        let mut got = Vec::new();
        std::io::Read::read_to_end(file, &mut got).unwrap();
        assert_eq!(got, bytes(v), "{what}");
    }
    assert_eq!(fs::read(a.p("h")).unwrap(), bytes(2));
    for gone in ["f", "g", "g2"] {
        assert_eq!(fs::metadata(a.p(gone)).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }
}
