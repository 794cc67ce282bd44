//! Write modes of files' own, on real processes with a directory attached:
//! a file writes through, back or not at all whatever its attachment
//! does, keeps its mode when it is written again, meets a new mode at once
//! (written through, or left to the write-back), shows it in `stat`,
//! `status`, `write-mode` and the mount's `user.tierpool.write_mode`; the
//! background write-back takes exactly the files in `back` mode; modes
//! survive a coordinator `kill -9`; bad requests are one-line errors; files
//! removed while the write-back writes them leave nothing below; a sync
//! writes many at once, each whole, and a load brings them back.

mod common;
use common::{json, Mount, Pool};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn below(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

fn wait_below(dir: &Path, name: &str, want: &[u8]) {
    let t = Instant::now();
    while std::fs::read(dir.join(name)).ok().as_deref() != Some(want) {
        assert!(t.elapsed() < Duration::from_secs(30), "{name} never held {:?}", String::from_utf8_lossy(want));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The figures `status --json` gives of the first attachment: dirty
/// files, those the write-back owes, files with a mode of their own.
fn figures(pool: &Pool) -> (u64, u64, u64) {
    let a = &pool.status()["attachments"][0];
    let n = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("no {k} in {a}"));
    (n("dirty_files"), n("write_back_files"), n("own_mode_files"))
}

/// `getxattr(2)` / `setxattr(2)` of the mount: the value or the errno.
fn xattr(path: &Path, value: Option<&[u8]>) -> Result<Vec<u8>, i32> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new("user.tierpool.write_mode").unwrap();
    let mut buf = vec![0u8; 64];
    // SAFETY: both strings are NUL-terminated and the buffers are as long as said.
    let r = unsafe {
        match value {
            Some(v) => libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) as isize,
            None => libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()),
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    buf.truncate(r.max(0) as usize);
    Ok(if value.is_some() { Vec::new() } else { buf })
}

#[test]
fn files_write_by_their_own_mode_whatever_their_attachment_does() {
    // No write-back round runs on its own at first.
    let mut pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("sub")).unwrap();
    std::fs::write(src.path().join("a.txt"), b"hello\n").unwrap();
    std::fs::write(src.path().join("sub/b.txt"), b"deep\n").unwrap();
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/in"]);

    // A pool-only file in a `through` attachment: its writes stay in the
    // pool, rewrite after rewrite; the other files still write through.
    let out = pool.ok(&["write-mode", "/in/a.txt", "pool-only"]);
    assert_eq!(out, "/in/a.txt: 1 files now write pool-only; 0 written to the under-store now\n");
    pool.put("/in/a.txt", b"pool copy 1");
    pool.put("/in/a.txt", b"pool copy 2");
    assert_eq!((pool.get("/in/a.txt"), below(src.path(), "a.txt")), (b"pool copy 2".to_vec(), b"hello\n".to_vec()));
    let shown = json(&pool.ok(&["write-mode", "/in/a.txt", "--json"]));
    assert_eq!((shown["mode"].as_str(), shown["own"].as_bool()), (Some("pool-only"), Some(true)));
    assert_eq!(json(&pool.ok(&["stat", "--json", "/in/a.txt"]))["under"]["write_mode"].as_str(), Some("pool-only"));
    assert!(pool.ok(&["stat", "/in/a.txt"]).contains("writes pool-only (its own mode)"));
    assert_eq!(pool.ok(&["write-mode", "/in/sub/b.txt"]), "/in/sub/b.txt: through (its attachment's)\n");
    pool.put("/in/sub/b.txt", b"through\n");
    assert_eq!(below(src.path(), "sub/b.txt"), b"through\n");

    // A `back` file there: acknowledged from the workers' disks, owed to the write-back.
    pool.ok(&["write-mode", "/in/sub/b.txt", "back"]);
    pool.put("/in/sub/b.txt", b"later\n");
    assert_eq!(below(src.path(), "sub/b.txt"), b"through\n");
    assert_eq!(figures(&pool), (2, 1, 2));
    let status = pool.ok(&["status"]);
    assert!(status.contains("(1 of them written back in the background); 2 files with a write mode of their own"));

    // The mount shows and sets the mode; a file not beneath an attachment has none.
    {
        let m = Mount::new(&pool, "mnt");
        assert_eq!(xattr(&m.p("in/sub/b.txt"), None), Ok(b"back".to_vec()));
        assert_eq!(xattr(&m.p("in/a.txt"), None), Ok(b"pool-only".to_vec()));
        assert_eq!(xattr(&m.p("in/a.txt"), Some(b"sideways")), Err(libc::EINVAL));
        pool.put("/elsewhere.txt", b"x");
        assert_eq!(xattr(&m.p("elsewhere.txt"), None), Err(libc::ENODATA));
        assert_eq!(xattr(&m.p("elsewhere.txt"), Some(b"back")), Err(libc::EINVAL));
        // Back to its attachment's mode: the dirty file is written through before it returns.
        assert_eq!(xattr(&m.p("in/a.txt"), Some(b"attachment\n")), Ok(Vec::new()));
        assert_eq!(below(src.path(), "a.txt"), b"pool copy 2");
        assert_eq!(xattr(&m.p("in/a.txt"), None), Ok(b"attachment".to_vec()));
    }
    assert_eq!(figures(&pool), (1, 1, 1));

    // Bad requests: one line, nothing changed.
    let e = pool.err(&["write-mode", "/in", "back"]);
    assert!(e.contains("/in: is a directory: a write mode is set on files"), "{e}");
    let e = pool.err(&["write-mode", "/elsewhere.txt", "back"]);
    assert!(e.contains("/elsewhere.txt: is not beneath an attached under-store"), "{e}");
    let e = pool.err(&["write-mode", "/elsewhere.txt"]);
    assert!(e.contains("/elsewhere.txt: is not a file beneath an attached under-store"), "{e}");
    let e = pool.err(&["write-mode", "/in/a.txt", "sideways"]);
    assert!(e.contains("invalid value 'sideways'"), "{e}");
    let e = pool.err(&["write-mode", "/in/none.txt", "back"]);
    assert!(e.contains("/in/none.txt"), "{e}");
    let scratch = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", scratch.path().display()), "/scratch", "--mode", "pool-only"]);
    pool.put("/scratch/s.txt", b"s");
    let e = pool.err(&["write-mode", "/scratch/s.txt", "through"]);
    assert!(e.contains("/scratch/s.txt: is in the under-store file://") && e.contains("attached pool-only"), "{e}");
    pool.ok(&["detach", "/scratch", "--force"]);

    // Recursively: every file beneath takes the mode (a file already so is not counted).
    let r = json(&pool.ok(&["write-mode", "-r", "/in", "pool-only", "--json"]));
    assert_eq!((r["files"].as_u64(), r["written"].as_u64()), (Some(2), Some(0)));
    assert_eq!(figures(&pool), (1, 0, 2));

    // Modes survive a coordinator kill -9; the write-back then takes the
    // `back` files only, in a `through` attachment too.
    pool.kill_coordinator();
    pool.coordinator_args = vec!["--write-back-every".into(), "100ms".into()];
    pool.start_coordinator();
    pool.wait_alive(1);
    assert_eq!(pool.ok(&["write-mode", "/in/a.txt"]), "/in/a.txt: pool-only (its own)\n");
    pool.put("/in/a.txt", b"pool copy 3");
    pool.ok(&["write-mode", "/in/sub/b.txt", "back"]);
    wait_below(src.path(), "sub/b.txt", b"later\n");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(below(src.path(), "a.txt"), b"pool copy 2", "a pool-only file is never written back");
    assert_eq!(figures(&pool), (1, 0, 2));
    // `sync` is an explicit request: it writes the pool-only file too.
    pool.ok(&["sync", "/in"]);
    assert_eq!(below(src.path(), "a.txt"), b"pool copy 3");
}

#[test]
fn files_removed_while_they_are_written_back_leave_nothing_below() {
    use tierpool_client::{Client, PutOptions};
    // No write-back round runs on its own: `sync` is the write-back here.
    let pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let below = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", below.path().display()), "/b", "--mode", "back"]);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        c.mkdir("/b/d", false).await.unwrap();
        for round in 0..40 {
            let f = format!("/b/d/f{round}");
            c.put_many(vec![(f.clone(), bytes::Bytes::from(vec![b'x'; 64]))], &PutOptions::default()).await[0]
                .as_ref()
                .unwrap();
            // Removed while the write-back may be writing it: whatever the
            // write-back wrote of it goes too.
            let writing = {
                let c = c.clone();
                tokio::spawn(async move { c.sync("/b/d", &|_| {}).await })
            };
            c.remove(&f, false).await.unwrap();
            let _ = writing.await.unwrap();
            let left: Vec<_> =
                std::fs::read_dir(below.path().join("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert!(left.is_empty(), "round {round}: left below: {left:?}");
        }
        // Its directory goes then too.
        c.remove("/b/d", false).await.unwrap();
        assert!(!below.path().join("d").exists());

        // A directory removed right after its last file, while the
        // write-back may still be taking away what it wrote of that file,
        // is removed. (A write that fails as its directory goes below may
        // make the directory again: what is left below is not checked.)
        for round in 0..40 {
            let (dir, f) = (format!("/b/e{round}"), format!("/b/e{round}/f"));
            c.mkdir(&dir, false).await.unwrap();
            c.put_many(vec![(f.clone(), bytes::Bytes::from(vec![b'y'; 64]))], &PutOptions::default()).await[0]
                .as_ref()
                .unwrap();
            let writing = {
                let (c, dir) = (c.clone(), dir.clone());
                tokio::spawn(async move { c.sync(&dir, &|_| {}).await })
            };
            c.remove(&f, false).await.unwrap();
            c.remove(&dir, false).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
            let _ = writing.await.unwrap();
        }

        // A tree removed by its path (`rm -r`) while the write-back is
        // writing its files (the sync may fail on one of them): no file
        // of it stays below, whether the writer learns of the removal (and
        // takes its object away) or wrote and recorded it between the
        // removal's first delete and the removal (the second delete takes
        // it), or its write failed as the tree went (the writer deletes
        // what that left). Which of these a round meets is not forced.
        for round in 0..40 {
            let tree = format!("/b/t{round}");
            c.mkdir(&format!("{tree}/sub"), true).await.unwrap();
            let files = (0..32).map(|i| (format!("{tree}/sub/f{i}"), bytes::Bytes::from(vec![b'z'; 64]))).collect();
            assert!(c.put_many(files, &PutOptions::default()).await.iter().all(|r| r.is_ok()));
            let writing = {
                let (c, tree) = (c.clone(), tree.clone());
                tokio::spawn(async move { c.sync(&tree, &|_| {}).await })
            };
            c.remove(&tree, true).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
            let _ = writing.await.unwrap();
            let sub = below.path().join(format!("t{round}/sub"));
            let left: Vec<_> =
                std::fs::read_dir(&sub).map(|d| d.map(|e| e.unwrap().file_name()).collect()).unwrap_or_default();
            assert!(left.is_empty(), "round {round}: left below: {left:?}");
        }
    });
}

#[test]
fn a_sync_writes_many_files_at_once_each_whole_and_a_load_brings_them_back() {
    use tierpool_client::{Client, PutOptions};
    let pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let under = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", under.path().display()), "/b", "--mode", "back"]);
    // Held inline, in one chunk, in several; and two past the size that
    // goes with others (written alone, after).
    let sizes = (0..300u64).map(|i| [0, 100, 4096, 4097, 70_000][i as usize % 5] + i).chain([3 << 20, (5 << 20) + 7]);
    let files: Vec<(String, Vec<u8>)> = sizes
        .enumerate()
        .map(|(i, n)| (format!("/b/d{}/f{i}", i % 7), (0..n).map(|b| (b * 31 + i as u64) as u8).collect()))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        for d in 0..7 {
            c.mkdir(&format!("/b/d{d}"), false).await.unwrap();
        }
        let items = files.iter().map(|(p, d)| (p.clone(), bytes::Bytes::from(d.clone()))).collect();
        assert!(c.put_many(items, &PutOptions::default()).await.iter().all(|r| r.is_ok()));
        let seen = std::sync::Mutex::new(Vec::new());
        let done = c.sync("/b", &|p| seen.lock().unwrap().push(p.files)).await.unwrap();
        let total: u64 = files.iter().map(|(_, d)| d.len() as u64).sum();
        assert_eq!((done.files, done.bytes, done.skipped.len()), (files.len() as u64, total, 0));
        // Progress counts every file once, up to all of them.
        assert_eq!(*seen.lock().unwrap(), (1..=files.len() as u64).collect::<Vec<_>>());
        for (p, d) in &files {
            assert!(below(under.path(), &p["/b/".len()..]) == *d, "{p} differs below");
        }
        // Let go of the pool's copies, then load them all back from below.
        let freed = c.free("/b").await.unwrap();
        assert_eq!(freed.files, files.iter().filter(|(_, d)| !d.is_empty()).count() as u64);
        let loaded = c.load("/b", &|_| {}).await.unwrap();
        assert_eq!((loaded.files, loaded.bytes), (files.len() as u64, total));
        for (p, d) in &files {
            assert!(c.get_bytes(p).await.unwrap() == *d, "{p} read back differs");
        }
    });
    assert_eq!(figures(&pool).0, 0);
}
