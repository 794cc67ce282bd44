//! tierpool's controls through extended attributes of a real FUSE mount:
//! `user.tierpool.priority` and `user.tierpool.pinned` read what the pool
//! keeps, set what `tierpool pin` and `put --priority` set, cannot be
//! removed, and refuse values and names they do not know with exact errno
//! values; `user.tierpool.replicas` reads and sets the copies a file or
//! directory keeps, `user.tierpool.placement` where new chunks are
//! written; `user.tierpool.tiers` shows, read-only, the tier of each chunk.

mod common;
use common::{Mount, Pool};
use serde_json::Value;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c(s: &[u8]) -> CString {
    CString::new(s).unwrap()
}

/// `getxattr(2)`: the value, or the errno.
fn get(path: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let (p, n) = (c(path.as_os_str().as_bytes()), c(name.as_bytes()));
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated and the buffer is as long as said.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

/// `setxattr(2)`: Ok, or the errno.
fn set(path: &Path, name: &str, value: &[u8]) -> Result<(), i32> {
    let (p, n) = (c(path.as_os_str().as_bytes()), c(name.as_bytes()));
    // SAFETY: both strings are NUL-terminated and the value is as long as said.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    Ok(())
}

/// `removexattr(2)`: Ok, or the errno.
fn remove(path: &Path, name: &str) -> Result<(), i32> {
    let (p, n) = (c(path.as_os_str().as_bytes()), c(name.as_bytes()));
    // SAFETY: both strings are NUL-terminated.
    let r = unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    Ok(())
}

/// `listxattr(2)`: the names.
fn list(path: &Path) -> Vec<String> {
    let p = c(path.as_os_str().as_bytes());
    let mut buf = vec![0u8; 256];
    // SAFETY: the string is NUL-terminated and the buffer is as long as said.
    let r = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(r >= 0, "listxattr: {}", std::io::Error::last_os_error());
    buf.truncate(r as usize);
    buf.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8(s.to_vec()).unwrap()).collect()
}

fn attrs(pool: &Pool, path: &str) -> (u64, bool) {
    let v: Value = serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap();
    (v["priority"].as_u64().unwrap(), v["pinned"].as_bool().unwrap())
}

#[test]
fn priority_and_pinned_are_extended_attributes() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::write(m.p("f"), b"data").unwrap();
    // defaults, as the CLI reports them
    assert_eq!(get(&m.p("f"), "user.tierpool.priority"), Ok(b"3".to_vec()));
    assert_eq!(get(&m.p("f"), "user.tierpool.pinned"), Ok(b"0".to_vec()));
    assert_eq!(
        list(&m.p("f")),
        [
            "user.tierpool.priority",
            "user.tierpool.pinned",
            "user.tierpool.replicas",
            "user.tierpool.placement",
            "user.tierpool.tiers"
        ]
    );
    // setting reaches the pool
    set(&m.p("f"), "user.tierpool.priority", b"5\n").unwrap();
    set(&m.p("f"), "user.tierpool.pinned", b"1").unwrap();
    assert_eq!(attrs(&pool, "/f"), (5, true));
    assert_eq!(get(&m.p("f"), "user.tierpool.priority"), Ok(b"5".to_vec()));
    assert_eq!(get(&m.p("f"), "user.tierpool.pinned"), Ok(b"1".to_vec()));
    // and what the CLI sets shows through the mount
    pool.ok(&["unpin", "/f"]);
    assert_eq!(get(&m.p("f"), "user.tierpool.pinned"), Ok(b"0".to_vec()));
    // on a directory, the attributes apply to the files under it
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/a"), b"a").unwrap();
    fs::write(m.p("d/b"), b"b").unwrap();
    set(&m.p("d"), "user.tierpool.priority", b"1").unwrap();
    assert_eq!(attrs(&pool, "/d/a").0, 1);
    assert_eq!(attrs(&pool, "/d/b").0, 1);
    assert_eq!(fs::read(m.p("d/a")).unwrap(), b"a");
    // exact errors for bad values, unknown names and missing files
    assert_eq!(set(&m.p("f"), "user.tierpool.priority", b"9"), Err(libc::EINVAL));
    assert_eq!(set(&m.p("f"), "user.tierpool.priority", b"high"), Err(libc::EINVAL));
    assert_eq!(set(&m.p("f"), "user.tierpool.pinned", b"yes"), Err(libc::EINVAL));
    assert_eq!(set(&m.p("f"), "user.other", b"1"), Err(libc::ENOTSUP));
    assert_eq!(get(&m.p("f"), "user.other"), Err(libc::ENODATA));
    assert_eq!(get(&m.p("nope"), "user.tierpool.priority"), Err(libc::ENOENT));
    assert_eq!(remove(&m.p("f"), "user.tierpool.pinned"), Err(libc::EPERM));
    assert_eq!(remove(&m.p("f"), "user.other"), Err(libc::ENODATA));
    assert_eq!(attrs(&pool, "/f"), (5, false));
    assert_eq!(
        list(&m.p("d")),
        ["user.tierpool.priority", "user.tierpool.pinned", "user.tierpool.replicas", "user.tierpool.placement"]
    );
}

fn copies(pool: &Pool, path: &str) -> u64 {
    let v: Value = serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap();
    v["replicas"].as_u64().unwrap()
}

#[test]
fn copies_per_chunk_are_an_extended_attribute() {
    let pool = Pool::start_with(3, "16MiB", "64MiB", &["--replicas", "2"]);
    let m = Mount::new(&pool, "mnt");
    fs::create_dir_all(m.p("a/b")).unwrap();
    let bytes: Vec<u8> = (0..(9 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(m.p("a/b/f"), &bytes).unwrap();
    assert_eq!(get(&m.p("a/b/f"), "user.tierpool.replicas"), Ok(b"2".to_vec()));
    // setting a file's copies copies or drops those of its chunks
    set(&m.p("a/b/f"), "user.tierpool.replicas", b"1\n").unwrap();
    assert_eq!((copies(&pool, "/a/b/f"), get(&m.p("a/b/f"), "user.tierpool.replicas")), (1, Ok(b"1".to_vec())));
    assert_eq!(pool.get("/a/b/f"), bytes);
    // followed through a rename in the mount
    fs::rename(m.p("a/b/f"), m.p("a/g")).unwrap();
    set(&m.p("a/g"), "user.tierpool.replicas", b"2").unwrap();
    assert_eq!(copies(&pool, "/a/g"), 2);
    assert_eq!(fs::read(m.p("a/g")).unwrap(), bytes);
    // a directory's copies are what new entries in it keep; its files keep theirs
    set(&m.p("a/b"), "user.tierpool.replicas", b"1").unwrap();
    assert_eq!((copies(&pool, "/a/b"), copies(&pool, "/a/g")), (1, 2));
    fs::write(m.p("a/b/new"), b"new").unwrap();
    assert_eq!(get(&m.p("a/b/new"), "user.tierpool.replicas"), Ok(b"1".to_vec()));
    // what the CLI sets shows through the mount
    pool.ok(&["replicas", "/a/b/new", "2"]);
    assert_eq!(get(&m.p("a/b/new"), "user.tierpool.replicas"), Ok(b"2".to_vec()));
    // more than the pool keeps, none, or not a number: EINVAL, nothing changed
    for bad in [&b"3"[..], b"0", b"two"] {
        assert_eq!(set(&m.p("a/g"), "user.tierpool.replicas", bad), Err(libc::EINVAL), "{bad:?}");
    }
    assert_eq!(remove(&m.p("a/g"), "user.tierpool.replicas"), Err(libc::EPERM));
    assert_eq!(copies(&pool, "/a/g"), 2);
}

#[test]
fn placement_is_an_extended_attribute_and_files_written_through_the_mount_follow_it() {
    let pool = Pool::start(3, "32MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    fs::create_dir(m.p("rr")).unwrap();
    assert_eq!(get(&m.p("rr"), "user.tierpool.placement"), Ok(b"hash".to_vec()));
    set(&m.p("rr"), "user.tierpool.placement", b"round-robin\n").unwrap();
    let v: Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/rr"])).unwrap();
    assert_eq!(v["placement"], "round-robin");
    // three chunks of 4 MiB written through the mount: one on each worker
    let before = pool.fresh_status();
    let bytes: Vec<u8> = (0..(12 << 20)).map(|i| (i % 253) as u8).collect();
    fs::write(m.p("rr/f"), &bytes).unwrap();
    assert_eq!(get(&m.p("rr/f"), "user.tierpool.placement"), Ok(b"round-robin".to_vec()));
    let used = |st: &Value| -> Vec<u64> {
        (st["workers"].as_array().unwrap().iter())
            .map(|w| w["mem"]["used"].as_u64().unwrap() + w["disk"]["used"].as_u64().unwrap())
            .collect()
    };
    // Versions the mount stored and replaced while writing are collected
    // a few seconds later: wait for them to go.
    let since = std::time::Instant::now();
    loop {
        let grown: Vec<u64> = used(&pool.fresh_status()).iter().zip(used(&before)).map(|(a, b)| a - b).collect();
        if grown == vec![4 << 20; 3] {
            break;
        }
        assert!(since.elapsed().as_secs() < 30, "one 4 MiB chunk on each worker: {grown:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(fs::read(m.p("rr/f")).unwrap(), bytes);
    // unknown policies: EINVAL, nothing changed; it cannot be removed
    assert_eq!(set(&m.p("rr"), "user.tierpool.placement", b"nearby"), Err(libc::EINVAL));
    assert_eq!(remove(&m.p("rr"), "user.tierpool.placement"), Err(libc::EPERM));
    assert_eq!(get(&m.p("rr"), "user.tierpool.placement"), Ok(b"round-robin".to_vec()));
}

#[test]
fn the_tier_of_each_chunk_is_a_read_only_attribute() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let m = Mount::new(&pool, "mnt");
    // six 4 MiB chunks through 16 MiB of memory: two (the first to arrive) are demoted to disk.
    // Written by another process: a child this test process forks meanwhile would
    // inherit and close the file, and each close publishes (a flush in mid-write).
    let local = pool.dir().join("big.local");
    fs::write(&local, vec![7u8; 24 << 20]).unwrap();
    let cp = std::process::Command::new("cp").arg(&local).arg(m.p("big")).status().unwrap();
    assert!(cp.success());
    let mut tiers = get(&m.p("big"), "user.tierpool.tiers").unwrap();
    let st = pool.fresh_status();
    let w = &st["workers"][0];
    assert_eq!((w["mem"]["chunks"].as_u64(), w["disk"]["chunks"].as_u64()), (Some(4), Some(2)), "{st}");
    tiers.sort();
    assert_eq!(tiers, b"ddmmmm", "one letter per chunk, as many on disk as the worker says");
    // a sparse file: two holes, then one stored chunk
    let f = fs::File::create(m.p("sparse")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"x", 8 << 20).unwrap();
    drop(f);
    assert_eq!(get(&m.p("sparse"), "user.tierpool.tiers"), Ok(b"--m".to_vec()));
    assert_eq!(fs::read(m.p("sparse")).unwrap().len(), (8 << 20) + 1);
    fs::write(m.p("empty"), b"").unwrap();
    assert_eq!(get(&m.p("empty"), "user.tierpool.tiers"), Ok(Vec::new()));
    assert_eq!(set(&m.p("big"), "user.tierpool.tiers", b"mmmmmm"), Err(libc::EPERM));
    assert_eq!(remove(&m.p("big"), "user.tierpool.tiers"), Err(libc::EPERM));
    fs::create_dir(m.p("d")).unwrap();
    assert_eq!(get(&m.p("d"), "user.tierpool.tiers"), Err(libc::ENODATA));
}
