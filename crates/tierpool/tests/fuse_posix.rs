//! POSIX behaviour of a real mount that programs rely on beyond plain
//! reads and writes: a file unlinked while open, symlinks, hard links,
//! named pipes, sharing between processes and between mounts, what `fsync`
//! promises, times, that a small change sends only its chunk, and that a
//! file answers `ioctl` as one on a local disk does (no terminal).

mod common;
use common::{data, Mount, Pool};
use serde_json::Value;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("should fail").raw_os_error().unwrap()
}

fn written(pool: &Pool) -> u64 {
    let st = pool.fresh_status();
    st["workers"].as_array().unwrap().iter().map(|w| w["bytes_written"].as_u64().unwrap()).sum()
}

/// Waits until the pool has nothing left to collect.
fn wait_collected(pool: &Pool) {
    let t = Instant::now();
    loop {
        let st: Value = pool.status();
        if st["pending_gc"] == 0 && st["pending_chunks"] == 0 {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "garbage not collected: {st}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_unlinked_open_file_keeps_its_data_until_the_last_close() {
    let pool = Pool::start(1, "16MiB", "128MiB");
    let m = Mount::new(&pool, "mnt");
    let content = data(1, 9 * MIB + 17);
    fs::write(m.p("f"), &content).unwrap();
    let mut reader = fs::File::open(m.p("f")).unwrap();
    let writer = OpenOptions::new().read(true).write(true).open(m.p("f")).unwrap();
    fs::remove_file(m.p("f")).unwrap();
    assert_eq!(errno(fs::metadata(m.p("f"))), libc::ENOENT);
    assert_eq!(reader.metadata().unwrap().nlink(), 0);
    // Longer than the pool's grace period for removed files: the mount's hold keeps the chunks.
    std::thread::sleep(Duration::from_secs(8));
    let mut back = Vec::new();
    reader.read_to_end(&mut back).unwrap();
    assert!(back == content, "the open handle reads every byte after the unlink");
    // the other handle still writes, and reads its own writes
    writer.write_all_at(b"after unlink", 5 * MIB as u64).unwrap();
    writer.sync_all().unwrap();
    let mut part = vec![0; 12];
    writer.read_exact_at(&mut part, 5 * MIB as u64).unwrap();
    assert_eq!(&part, b"after unlink");
    // a new file under the old name is another file
    fs::write(m.p("f"), b"new").unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"new");
    drop(reader);
    drop(writer);
    // after the last close the chunks go
    wait_collected(&pool);
    assert!(pool.used() < MIB as u64, "the unlinked file's chunks are deleted");
}

#[test]
fn symlinks_hard_links_and_pipes() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/target"), b"through the link").unwrap();
    // symlinks: relative, followed by open, read by readlink, dangling ones fail with ENOENT
    std::os::unix::fs::symlink("d/target", m.p("rel")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", m.p("dangling")).unwrap();
    assert_eq!(fs::read_link(m.p("rel")).unwrap().to_str(), Some("d/target"));
    assert_eq!(fs::read(m.p("rel")).unwrap(), b"through the link");
    let lmd = fs::symlink_metadata(m.p("rel")).unwrap();
    assert!(lmd.file_type().is_symlink());
    assert_eq!(lmd.len(), 8);
    assert_eq!(errno(fs::read(m.p("dangling"))), libc::ENOENT);
    assert!(pool.ok(&["ls", "-l", "/"]).contains("rel -> d/target"), "the CLI shows the link");
    let e = pool.err(&["cat", "/rel"]);
    assert!(e.ends_with("/rel: is a symbolic link to d/target"), "{e}");
    // hard links: one inode, two names, data shared, survives the loss of one name
    fs::hard_link(m.p("d/target"), m.p("twin")).unwrap();
    let (a, b) = (fs::metadata(m.p("d/target")).unwrap(), fs::metadata(m.p("twin")).unwrap());
    assert_eq!((a.ino(), a.nlink(), b.nlink()), (b.ino(), 2, 2));
    OpenOptions::new().append(true).open(m.p("twin")).unwrap().write_all(b"!").unwrap();
    assert_eq!(fs::read(m.p("d/target")).unwrap(), b"through the link!");
    fs::remove_file(m.p("d/target")).unwrap();
    assert_eq!(fs::metadata(m.p("twin")).unwrap().nlink(), 1);
    assert_eq!(pool.ok(&["cat", "/twin"]), "through the link!");
    assert_eq!(errno(fs::hard_link(m.p("d"), m.p("d2"))), libc::EPERM);
    // a named pipe carries bytes between two processes through the mount
    let fifo = m.p("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let fifo2 = fifo.clone();
    let w = std::thread::spawn(move || fs::write(fifo2, b"piped").unwrap());
    assert_eq!(fs::read(&fifo).unwrap(), b"piped");
    w.join().unwrap();
    // a device node keeps its number
    let dev = std::ffi::CString::new(m.p("null").to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) }, 0);
    let md = fs::metadata(m.p("null")).unwrap();
    assert!(md.file_type().is_char_device());
    assert_eq!(md.rdev(), libc::makedev(1, 3));
    let e = pool.err(&["get", "/pipe", "-"]);
    assert!(e.ends_with("/pipe: is a special file, not a file of the pool"), "{e}");
}

#[test]
fn processes_share_a_mount_and_mounts_share_at_close_and_fsync() {
    let pool = Pool::start(2, "32MiB", "128MiB");
    let (a, b) = (Mount::new(&pool, "a"), Mount::new(&pool, "b"));
    // two handles in one mount: a write is seen by the other at once, before any close
    let mut w = fs::File::create(a.p("shared")).unwrap();
    w.write_all(b"first").unwrap();
    let mut r = fs::File::open(a.p("shared")).unwrap();
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    assert_eq!(s, "first");
    // The reader keeps the kernel's page cache (a read-only handle), the
    // writer does not: what the writer changes, extends or cuts after the
    // reader has read is read at once all the same.
    let rw = OpenOptions::new().read(true).write(true).open(a.p("shared")).unwrap();
    let read_all = |r: &fs::File| {
        let mut buf = vec![0; 64];
        let n = r.read_at(&mut buf, 0).unwrap();
        buf.truncate(n);
        String::from_utf8(buf).unwrap()
    };
    rw.write_all_at(b"F", 0).unwrap();
    assert_eq!(read_all(&r), "First");
    rw.write_all_at(b"!!", 5).unwrap();
    assert_eq!(read_all(&r), "First!!");
    rw.set_len(2).unwrap();
    assert_eq!(read_all(&r), "Fi");
    rw.write_all_at(b"rst", 2).unwrap();
    rw.write_all_at(b"f", 0).unwrap();
    drop(rw);
    assert_eq!(read_all(&r), "first");
    // another mount sees it once fsync returns, without a close
    w.write_all(b" second").unwrap();
    w.sync_all().unwrap();
    assert_eq!(fs::read(b.p("shared")).unwrap(), b"first second");
    assert_eq!(pool.ok(&["cat", "/shared"]), "first second");
    // a handle opened in the other mount before a change sees it after reopening (close-to-open)
    let mut old = fs::File::open(b.p("shared")).unwrap();
    w.write_all(b" third").unwrap();
    drop(w);
    let mut s = String::new();
    old.seek(SeekFrom::Start(0)).unwrap();
    old.read_to_string(&mut s).unwrap();
    assert!(s.starts_with("first second"), "{s}");
    drop(old);
    assert_eq!(fs::read(b.p("shared")).unwrap(), b"first second third");
    // writers of different chunks in two mounts do not undo each other
    let base = data(2, 12 * MIB);
    fs::write(a.p("big"), &base).unwrap();
    let wa = OpenOptions::new().write(true).open(a.p("big")).unwrap();
    let wb = OpenOptions::new().write(true).open(b.p("big")).unwrap();
    wa.write_all_at(b"AAAA", 100).unwrap();
    wb.write_all_at(b"BBBB", 9 * MIB as u64).unwrap();
    drop(wa);
    drop(wb);
    let mut want = base.clone();
    want[100..104].copy_from_slice(b"AAAA");
    want[9 * MIB..9 * MIB + 4].copy_from_slice(b"BBBB");
    assert!(pool.get("/big") == want, "both writes are kept");
}

#[test]
fn small_changes_send_one_chunk_small_writes_coalesce_and_times_move() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let m = Mount::new(&pool, "mnt");
    let content = data(3, 32 * MIB);
    fs::create_dir(m.p("d")).unwrap();
    let d_before = fs::metadata(m.p("d")).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(m.p("d/f"), &content).unwrap();
    assert!(
        fs::metadata(m.p("d")).unwrap().modified().unwrap() > d_before,
        "creating an entry moves the directory's mtime"
    );
    let before = written(&pool);
    let t0 = fs::metadata(m.p("d/f")).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    {
        let f = OpenOptions::new().write(true).open(m.p("d/f")).unwrap();
        f.write_all_at(b"patch", 20 * MIB as u64 + 3).unwrap();
    }
    let sent = written(&pool) - before;
    assert_eq!(sent, 4 * MIB as u64, "only the changed chunk travels");
    let md = fs::metadata(m.p("d/f")).unwrap();
    assert!(md.modified().unwrap() > t0 && md.len() == content.len() as u64);
    let mut want = content.clone();
    want[20 * MIB + 3..20 * MIB + 8].copy_from_slice(b"patch");
    assert!(pool.get("/d/f") == want);
    // the replaced version of that chunk is collected
    wait_collected(&pool);
    assert_eq!(pool.used(), content.len() as u64);
    // small writes are coalesced: 4096 writes of 1 KiB send one 4 MiB chunk, once
    // (by `dd` in its own process: a child this process forked meanwhile would
    // close an inherited handle, and that close would publish mid-way)
    let pattern: Vec<u8> = (0..4096u32).flat_map(|i| [(i % 251) as u8; 1024]).collect();
    let local = pool.dir().join("pattern");
    fs::write(&local, &pattern).unwrap();
    let before = written(&pool);
    let dd = std::process::Command::new("dd")
        .arg(format!("if={}", local.display()))
        .arg(format!("of={}", m.p("small-writes").display()))
        .args(["bs=1k", "status=none"])
        .status()
        .unwrap();
    assert!(dd.success());
    assert_eq!(written(&pool) - before, 4 * MIB as u64);
    let back = pool.get("/small-writes");
    assert!(
        back.len() == 4 * MIB && back.chunks(1024).enumerate().all(|(i, c)| c.iter().all(|b| *b == (i % 251) as u8))
    );
}

/// A file rewritten in place with `fsync` after every write (a database,
/// a log) never fills the pool with its replaced chunk versions, though the
/// mount holds it open all along: 120 synced random writes into an 8MiB
/// file on a pool of 32MiB (each publishes a new 4MiB chunk version).
#[test]
fn synced_random_rewrites_of_an_open_file_never_fill_the_pool() {
    let pool = Pool::start(1, "8MiB", "24MiB");
    let m = Mount::new(&pool, "mnt");
    let mut model = data(5, 8 * MIB);
    fs::write(m.p("db"), &model).unwrap();
    let f = OpenOptions::new().read(true).write(true).open(m.p("db")).unwrap();
    let mut x: u64 = 42;
    for i in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % (8 * MIB as u64 - 4096)) as usize;
        let page = [i as u8; 4096];
        f.write_all_at(&page, at as u64).unwrap_or_else(|e| panic!("write {i}: {e}"));
        f.sync_all().unwrap_or_else(|e| panic!("fsync {i}: {e}"));
        model[at..at + 4096].copy_from_slice(&page);
    }
    drop(f);
    assert!(fs::read(m.p("db")).unwrap() == model, "every synced write is there");
    wait_collected(&pool);
}

#[test]
fn a_file_is_no_terminal_and_asking_leaves_the_log_alone() {
    use std::os::fd::AsRawFd;
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::write(m.p("f"), b"x").unwrap();
    // What every Python `open` asks (`isatty`, an ioctl), a thousand times.
    for _ in 0..1000 {
        let f = fs::File::open(m.p("f")).unwrap();
        // SAFETY: a plain query of an open descriptor.
        assert_eq!(unsafe { libc::isatty(f.as_raw_fd()) }, 0);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENOTTY));
    }
    // The mount's log (named as `tierpool mount` names it) holds no word of it.
    let name = m.dir.to_string_lossy().trim_start_matches('/').replace('/', "_");
    let log = fs::read_to_string(std::env::temp_dir().join(format!("tierpool-mount-{name}.log"))).unwrap();
    assert!(!log.contains("ioctl"), "{log}");
}
