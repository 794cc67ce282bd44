//! The pool through a real FUSE mount: POSIX calls with exact bytes and exact
//! errno values, files larger than the pool's memory, shared mmap writes,
//! capacity in statfs, a mount daemon killed with -9, and a directory's
//! attributes after this mount's and other clients' changes in it; changes
//! answered once in the coordinator's log survive its `kill -9`, and `fsync`
//! fails once after a restart of its machine.

mod common;
use common::{data, Mount, Pool};
use std::fs;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: usize = 1 << 20;

fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("should fail").raw_os_error().unwrap()
}

#[test]
fn posix_calls_keep_bytes_and_report_errno() {
    let pool = Pool::start(2, "16MiB", "256MiB");
    let m = Mount::new(&pool, "mnt");
    // create, write, read back; the CLI sees the same bytes after close
    fs::write(m.p("a.txt"), b"hello\n").unwrap();
    assert_eq!(fs::read(m.p("a.txt")).unwrap(), b"hello\n");
    assert_eq!(pool.ok(&["cat", "/a.txt"]), "hello\n");
    // append, write at an offset past the end (sparse), truncate
    fs::OpenOptions::new().append(true).open(m.p("a.txt")).unwrap().write_all(b"more\n").unwrap();
    assert_eq!(fs::read(m.p("a.txt")).unwrap(), b"hello\nmore\n");
    {
        let f = fs::OpenOptions::new().write(true).open(m.p("a.txt")).unwrap();
        f.write_all_at(b"X", 20).unwrap();
    }
    let mut want = b"hello\nmore\n".to_vec();
    want.resize(20, 0);
    want.push(b'X');
    assert_eq!(fs::read(m.p("a.txt")).unwrap(), want);
    assert_eq!(fs::metadata(m.p("a.txt")).unwrap().len(), 21);
    fs::OpenOptions::new().write(true).open(m.p("a.txt")).unwrap().set_len(5).unwrap();
    assert_eq!(fs::read(m.p("a.txt")).unwrap(), b"hello");
    // O_TRUNC and O_EXCL
    fs::OpenOptions::new().write(true).truncate(true).open(m.p("a.txt")).unwrap().write_all(b"new").unwrap();
    assert_eq!(fs::read(m.p("a.txt")).unwrap(), b"new");
    assert_eq!(errno(fs::OpenOptions::new().write(true).create_new(true).open(m.p("a.txt"))), libc::EEXIST);
    // directories: mkdir, readdir with link counts, rename (replacing), rmdir
    fs::create_dir(m.p("d")).unwrap();
    fs::create_dir(m.p("d/sub")).unwrap();
    assert_eq!(errno(fs::create_dir(m.p("d"))), libc::EEXIST);
    fs::write(m.p("d/f"), b"f").unwrap();
    let mut names: Vec<String> =
        fs::read_dir(m.p("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["f", "sub"]);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(m.p("d")).unwrap().nlink(), 3);
    fs::rename(m.p("a.txt"), m.p("d/f")).unwrap();
    assert_eq!(fs::read(m.p("d/f")).unwrap(), b"new");
    assert_eq!(errno(fs::metadata(m.p("a.txt"))), libc::ENOENT);
    fs::rename(m.p("d"), m.p("e")).unwrap();
    assert_eq!(fs::read(m.p("e/f")).unwrap(), b"new");
    // errno values
    assert_eq!(errno(fs::read(m.p("nope"))), libc::ENOENT);
    assert_eq!(errno(fs::create_dir(m.p("e/f/x"))), libc::ENOTDIR);
    assert_eq!(errno(fs::read(m.p("e"))), libc::EISDIR);
    assert_eq!(errno(fs::remove_dir(m.p("e"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs::remove_dir(m.p("e/f"))), libc::ENOTDIR);
    assert_eq!(errno(fs::remove_file(m.p("e/sub"))), libc::EISDIR);
    fs::remove_file(m.p("e/f")).unwrap();
    fs::remove_dir(m.p("e/sub")).unwrap();
    fs::remove_dir(m.p("e")).unwrap();
    assert_eq!(pool.ok(&["ls", "/"]), "");
}

#[test]
fn large_files_spill_and_mmap_writes_reach_the_pool() {
    let pool = Pool::start(2, "8MiB", "256MiB");
    let m = Mount::new(&pool, "mnt");
    // Four times the pool's memory, written in 1 MiB blocks, read back exactly.
    let big = data(11, 64 * MIB + 123);
    {
        let mut f = fs::File::create(m.p("big")).unwrap();
        for block in big.chunks(MIB) {
            f.write_all(block).unwrap();
        }
    }
    let st = pool.fresh_status();
    let disk: u64 = st["workers"].as_array().unwrap().iter().map(|w| w["disk"]["used"].as_u64().unwrap()).sum();
    assert!(disk >= 48 * MIB as u64, "the overflow is on DISK: {st}");
    let mut back = Vec::new();
    fs::File::open(m.p("big")).unwrap().read_to_end(&mut back).unwrap();
    assert!(back == big, "read back byte-exact");
    let mut f = fs::File::open(m.p("big")).unwrap();
    f.seek(SeekFrom::Start(40 * MIB as u64 + 7)).unwrap();
    let mut part = vec![0; 100];
    f.read_exact(&mut part).unwrap();
    assert_eq!(part, big[40 * MIB + 7..40 * MIB + 107]);
    // A shared writable mapping: the writes are in the pool after munmap and close.
    {
        let f = fs::OpenOptions::new().read(true).write(true).open(m.p("big")).unwrap();
        let len = big.len();
        // SAFETY: a fresh shared mapping of an open file, unmapped below.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let s = std::slice::from_raw_parts_mut(p as *mut u8, len);
            assert_eq!(&s[..16], &big[..16]);
            s[5 * MIB..5 * MIB + 4].copy_from_slice(b"MMAP");
            assert_eq!(libc::msync(p, len, libc::MS_SYNC), 0);
            assert_eq!(libc::munmap(p, len), 0);
        }
    }
    let got = pool.get("/big");
    assert_eq!(&got[5 * MIB..5 * MIB + 4], b"MMAP");
    assert_eq!(got.len(), big.len());
    // statfs reports the pool's capacity.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(m.dir.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    assert_eq!(s.f_blocks * s.f_frsize, 2 * (8 + 256) * MIB as u64);
    assert!(s.f_bfree * s.f_frsize <= 2 * (8 + 256) * MIB as u64 - big.len() as u64);
}

#[test]
fn a_full_pool_is_enospc_on_write_or_fsync() {
    let pool = Pool::start(1, "4MiB", "4MiB");
    let m = Mount::new(&pool, "mnt");
    let mut f = fs::File::create(m.p("x")).unwrap();
    // Full chunks are stored in the background while the writes go on: the
    // first write after one failed to store is ENOSPC, else fsync is.
    let e = f.write_all(&vec![1u8; 12 * MIB]).and_then(|()| f.sync_all()).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    drop(f);
    // The kernel releases the file after `close` returns. What the writes
    // before the error left may be kept (`close` publishes it, as a local
    // file system keeps a partial file) or dropped (its publish found the
    // pool still full): either way the pool then holds exactly the file's
    // bytes, nothing of the failed chunks.
    let t = std::time::Instant::now();
    loop {
        let kept = pool.get("/x");
        if pool.used() == kept.len() as u64 {
            assert!(kept.iter().all(|b| *b == 1), "the kept part of the file is its first bytes");
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "the failed file's chunks are not deleted: {}\n{}\n{}",
            pool.status(),
            pool.log("coordinator.log"),
            pool.ok(&["ls", "-l", "/"])
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    fs::remove_file(m.p("x")).unwrap();
    let t = std::time::Instant::now();
    while pool.used() > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "a removed file's chunks stay: {}", pool.status());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // What fits is still written.
    fs::write(m.p("small"), b"ok").unwrap();
    assert_eq!(pool.ok(&["cat", "/small"]), "ok");
}

#[test]
fn a_killed_mount_can_be_unmounted_and_mounted_again() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::write(m.p("kept"), b"data").unwrap();
    let pid = mount_pid(&m.dir);
    // SAFETY: kills the mount daemon started by this test.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(errno(fs::metadata(m.p("kept"))), libc::ENOTCONN);
    assert_eq!(
        pool.ok(&["umount", m.dir.to_str().unwrap()]),
        format!("unmounted {}\n", m.dir.canonicalize().unwrap().display())
    );
    pool.ok(&["mount", m.dir.to_str().unwrap()]);
    assert_eq!(fs::read(m.p("kept")).unwrap(), b"data");
    assert_eq!(pool.ok(&["cat", "/kept"]), "data");
    let e = pool.err(&["umount", pool.dir().to_str().unwrap()]);
    assert!(e.ends_with(": not mounted"), "{e}");
    assert!(matches!(fs::metadata(Path::new("/nonexistent-mnt")).map_err(|e| e.kind()), Err(ErrorKind::NotFound)));
}

/// The pid of the process serving the FUSE mount at `dir`.
fn mount_pid(dir: &Path) -> i32 {
    let target = dir.canonicalize().unwrap().to_string_lossy().to_string();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).to_string()).collect();
        if args.iter().any(|a| a == "--foreground") && args.contains(&target) {
            return pid;
        }
    }
    panic!("no mount process for {target}");
}

#[test]
fn a_name_known_missing_and_then_made_elsewhere_opens_as_that_file() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    // The kernel keeps the names as missing for a second, in which another
    // client makes them.
    assert_eq!(errno(fs::metadata(m.p("late.txt"))), libc::ENOENT);
    assert_eq!(errno(fs::metadata(m.p("kept.txt"))), libc::ENOENT);
    pool.put("/late.txt", b"written elsewhere, long");
    pool.put("/kept.txt", b"kept whole");
    // open(O_CREAT | O_TRUNC) meets the other client's file: cut, then written.
    fs::write(m.p("late.txt"), b"new").unwrap();
    assert_eq!(pool.get("/late.txt"), b"new");
    // Without O_TRUNC: opened as it is, not made anew.
    let mut f = fs::OpenOptions::new().create(true).append(true).open(m.p("kept.txt")).unwrap();
    f.write_all(b", and more").unwrap();
    drop(f);
    assert_eq!(pool.get("/kept.txt"), b"kept whole, and more");
}

#[test]
fn a_directory_this_mount_changed_shows_the_change_and_later_other_clients_changes() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::create_dir(m.p("d")).unwrap();
    let pool_view = |p: &str| -> serde_json::Value { serde_json::from_str(&pool.ok(&["stat", "--json", p])).unwrap() };
    // Read through an open handle: no lookup by name refreshes it, the
    // kernel asks the mount for the attributes it dropped.
    let dir = fs::File::open(m.p("d")).unwrap();
    // Each change here: the directory as the pool has it after the change.
    let same = |what: &str| {
        let (md, st) = (dir.metadata().unwrap(), pool_view("/d"));
        let shown = (md.size(), md.nlink(), md.mtime() as u64 * 1_000_000_000 + md.mtime_nsec() as u64);
        let kept = (st["size"].as_u64().unwrap(), st["nlink"].as_u64().unwrap(), st["mtime_ns"].as_u64().unwrap());
        assert_eq!(shown, (kept.0, kept.1, kept.2), "after {what}");
    };
    fs::write(m.p("d/a"), b"a").unwrap();
    same("a create");
    fs::create_dir(m.p("d/sub")).unwrap();
    same("a mkdir");
    assert_eq!(dir.metadata().unwrap().nlink(), 3);
    fs::rename(m.p("d/a"), m.p("d/b")).unwrap();
    same("a rename");
    fs::hard_link(m.p("d/b"), m.p("d/c")).unwrap();
    same("a link");
    fs::remove_file(m.p("d/c")).unwrap();
    same("an unlink");
    fs::remove_dir(m.p("d/sub")).unwrap();
    same("an rmdir");
    // A change of the directory itself right after a change in it is shown.
    fs::write(m.p("d/e"), b"e").unwrap();
    fs::set_permissions(m.p("d"), fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(fs::metadata(m.p("d")).unwrap().mode() & 0o7777, 0o700);
    same("a chmod");
    // Another client's change is seen within the kernel's second.
    fs::write(m.p("d/f"), b"f").unwrap();
    pool.ok(&["mkdir", "/d/elsewhere"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    same("another client's mkdir");
    assert_eq!(dir.metadata().unwrap().nlink(), 3);
}

#[test]
fn a_listing_gives_each_entry_the_attributes_the_pool_has_and_this_mounts_changes_at_once() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (m, other) = (Mount::new(&pool, "mnt"), Mount::new(&pool, "other"));
    fs::create_dir(m.p("d")).unwrap();
    // More entries than one fetch of attributes takes (256), with sizes and
    // modes that differ from entry to entry, so an attribute handed to the
    // kernel with the wrong name would show.
    const FILES: usize = 300;
    for i in 0..FILES {
        fs::write(other.p(&format!("d/f{i:03}")), vec![b'x'; i * 7]).unwrap();
        fs::set_permissions(other.p(&format!("d/f{i:03}")), fs::Permissions::from_mode(0o600 + i as u32 % 8)).unwrap();
    }
    fs::create_dir(other.p("d/sub")).unwrap();
    std::os::unix::fs::symlink("f001", other.p("d/link")).unwrap();
    let check = |what: &str| {
        let kept: serde_json::Value = serde_json::from_str(&pool.ok(&["ls", "--json", "/d"])).unwrap();
        let kept: std::collections::BTreeMap<String, (u64, u64, u32, u64)> = (kept.as_array().unwrap().iter())
            .map(|e| {
                let mode = u32::from_str_radix(e["mode"].as_str().unwrap(), 8).unwrap() & 0o7777;
                let v = (e["inode"].as_u64().unwrap(), e["size"].as_u64().unwrap(), mode, e["nlink"].as_u64().unwrap());
                (e["name"].as_str().unwrap().to_string(), v)
            })
            .collect();
        let shown: std::collections::BTreeMap<String, (u64, u64, u32, u64)> = fs::read_dir(m.p("d"))
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                let md = fs::symlink_metadata(m.p(&format!("d/{name}"))).unwrap();
                (name, (md.ino(), md.size(), md.mode() & 0o7777, md.nlink()))
            })
            .collect();
        assert_eq!(shown.len(), FILES + 2, "{what}");
        assert_eq!(shown, kept, "{what}");
    };
    check("another client's files");
    // This mount's own changes between the reading of a listing and its entries.
    let listing = fs::read_dir(m.p("d")).unwrap();
    fs::set_permissions(m.p("d/f003"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::hard_link(m.p("d/f004"), m.p("d/f004-again")).unwrap();
    fs::rename(m.p("d/f005"), m.p("d/g005")).unwrap();
    assert_eq!(listing.count(), FILES + 2, "the names as the directory was opened");
    assert_eq!(fs::metadata(m.p("d/f003")).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(fs::metadata(m.p("d/f004")).unwrap().nlink(), 2);
    assert_eq!(errno(fs::metadata(m.p("d/f005"))), libc::ENOENT, "a name moved away here is not handed out again");
    assert_eq!(fs::metadata(m.p("d/g005")).unwrap().size(), 35);
    fs::remove_file(m.p("d/f004-again")).unwrap();
    fs::rename(m.p("d/g005"), m.p("d/f005")).unwrap();
    // Another client's changes are seen within the kernel's second.
    let _ = fs::read_dir(m.p("d")).unwrap().count();
    fs::set_permissions(other.p("d/f006"), fs::Permissions::from_mode(0o604)).unwrap();
    fs::write(other.p("d/f007"), b"rewritten elsewhere").unwrap();
    fs::remove_file(other.p("d/f299")).unwrap();
    fs::write(other.p("d/f299"), b"made again elsewhere").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    check("another client's later changes");
    assert_eq!(fs::read(m.p("d/f007")).unwrap(), b"rewritten elsewhere");
    // A file this mount is writing shows its unpublished size in a listing.
    let mut f = fs::OpenOptions::new().write(true).open(m.p("d/f008")).unwrap();
    f.write_all(&[b'y'; 1000]).unwrap();
    let listed = fs::read_dir(m.p("d")).unwrap().count();
    assert_eq!((listed, fs::metadata(m.p("d/f008")).unwrap().size()), (FILES + 2, 1000));
    drop(f);
    // A file published here between two reads of one listing: the
    // attributes fetched for the rest of it are not handed out as fresh.
    let dir = fs::File::open(m.p("d")).unwrap();
    let first = getdents(&dir);
    assert!(!first.is_empty() && !first.contains(&"f100".to_string()), "{first:?}");
    let mut g = fs::OpenOptions::new().write(true).open(m.p("d/f100")).unwrap();
    g.write_all(&[b'z'; 5000]).unwrap();
    drop(g);
    while !getdents(&dir).is_empty() {}
    assert_eq!(fs::metadata(m.p("d/f100")).unwrap().size(), 5000);
    // Entries gone since the directory was opened, more than one fetch of
    // attributes takes in a row: the listing goes on past them.
    let dir = fs::File::open(m.p("d")).unwrap();
    for i in 0..290 {
        fs::remove_file(other.p(&format!("d/f{i:03}"))).unwrap();
    }
    let mut names = Vec::new();
    loop {
        let got = getdents(&dir);
        if got.is_empty() {
            break;
        }
        names.extend(got);
    }
    names.sort();
    let mut want: Vec<String> = (290..FILES).map(|i| format!("f{i:03}")).collect();
    want.extend([".", "..", "link", "sub"].map(String::from));
    want.sort();
    assert_eq!(names, want);
}

/// The names of one `getdents64` of at most 512 bytes from `dir`: a part
/// of a listing, as a program reading it slowly gets it.
fn getdents(dir: &fs::File) -> Vec<String> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 512];
    let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    assert!(n >= 0, "getdents64: {}", std::io::Error::last_os_error());
    let (mut at, mut names) = (0usize, Vec::new());
    while at < n as usize {
        // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        let name = &buf[at + 19..at + reclen];
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        names.push(String::from_utf8_lossy(&name[..end]).into_owned());
        at += reclen;
    }
    names
}

#[test]
fn an_open_files_attributes_after_its_reads_follow_this_mounts_changes_at_once_and_others_within_a_second() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let pool = Pool::start(1, "16MiB", "64MiB");
    let (m, other) = (Mount::new(&pool, "mnt"), Mount::new(&pool, "other"));
    fs::write(m.p("f"), b"first bytes").unwrap();
    let mut f = fs::File::open(m.p("f")).unwrap();
    let mut got = String::new();
    f.read_to_string(&mut got).unwrap();
    assert_eq!(got, "first bytes");
    // After a read the kernel asks for the attributes again.
    let md = f.metadata().unwrap();
    assert_eq!((md.size(), md.nlink(), md.mode() & 0o7777), (11, 1, 0o644));
    // This mount's changes show at once.
    fs::hard_link(m.p("f"), m.p("g")).unwrap();
    assert_eq!(f.metadata().unwrap().nlink(), 2);
    fs::set_permissions(m.p("g"), fs::Permissions::from_mode(0o600)).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut got).unwrap();
    assert_eq!(f.metadata().unwrap().mode() & 0o7777, 0o600);
    fs::remove_file(m.p("g")).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut got).unwrap();
    assert_eq!(f.metadata().unwrap().nlink(), 1);
    // Another client's within the kernel's second.
    let mut f = fs::File::open(m.p("f")).unwrap();
    fs::set_permissions(other.p("f"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::hard_link(other.p("f"), other.p("h")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    got.clear();
    f.read_to_string(&mut got).unwrap();
    let md = f.metadata().unwrap();
    assert_eq!((md.mode() & 0o7777, md.nlink()), (0o640, 2));
    fs::remove_file(m.p("f")).unwrap();
    got.clear();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut got).unwrap();
    assert_eq!((got.as_str(), f.metadata().unwrap().nlink()), ("first bytes", 1));
}

#[test]
fn changes_through_the_mount_survive_the_coordinators_kill_9_and_fsync_tells_of_a_machine_restart() {
    // The mount's changes are answered once the coordinator's log has
    // them written, not yet fsynced, as a local file system's.
    let mut pool = Pool::start(1, "64MiB", "256MiB");
    // Mounted without `Mount`, which would hold the pool for its life.
    let mnt = pool.dir().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    pool.ok(&["mount", mnt.to_str().unwrap()]);
    struct Unmount(std::process::Command);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = self.0.output();
        }
    }
    let _unmount = Unmount(pool.cmd(&["umount", mnt.to_str().unwrap()]));
    let m = |rel: &str| mnt.join(rel);
    fs::create_dir(m("d")).unwrap();
    for i in 0..20u64 {
        fs::write(m(&format!("d/f{i}")), data(i, 100 + i as usize * 1000)).unwrap();
    }
    fs::rename(m("d/f1"), m("d/moved")).unwrap();
    fs::remove_file(m("d/f0")).unwrap();

    // No fsync: the kernel holds what was written when the coordinator dies.
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(1);
    assert!(pool.err(&["cat", "/d/f0"]).ends_with("/d/f0: no such file or directory"));
    assert!(pool.get("/d/moved") == data(1, 1100));
    for i in 2..20u64 {
        assert!(pool.get(&format!("/d/f{i}")) == data(i, 100 + i as usize * 1000), "f{i}");
    }
    // The same machine: an `fsync` keeps what it was given.
    let f = fs::OpenOptions::new().append(true).open(m("d/f2")).unwrap();
    f.write_all_at(b"tail", 2100).unwrap();
    f.sync_all().unwrap();
    fs::File::open(m("d")).unwrap().sync_all().unwrap();
    let log = &pool.status()["metadata_log"];
    assert_eq!(log["synced_lsn"], log["lsn"], "fsynced: {log}");

    // Its machine restarted (another boot id): changes answered before may
    // be gone, and the next `fsync` says so, once.
    fs::write(m("d/late"), b"late").unwrap();
    fs::write(pool.dir().join("boot_id"), "another-boot\n").unwrap();
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(1);
    assert_eq!(errno(f.sync_all()), libc::EIO);
    f.sync_all().unwrap();
    assert_eq!(pool.get("/d/late"), b"late", "kept here, as the machine did not really restart");
}
