//! `chmod`, `utimens` and `chown` through a real FUSE mount: permission bits
//! and modification times are kept by the pool (the CLI and a second mount
//! see them), writes after `chmod` keep the mode, and owners cannot be given
//! away (the pool keeps none); `mkdir` keeps its mode.

mod common;
use common::{Mount, Pool};
use serde_json::Value;
use std::fs::{self, File, FileTimes, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

fn stat_json(pool: &Pool, path: &str) -> Value {
    serde_json::from_str(&pool.ok(&["stat", "--json", path])).unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn chmod_and_utimens_are_kept_by_the_pool() {
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
    // owners: chown to the owner is fine, giving a file away is EPERM
    let (uid, gid) = (fs::metadata(m.p("f")).unwrap().uid(), fs::metadata(m.p("f")).unwrap().gid());
    std::os::unix::fs::chown(m.p("f"), Some(uid), Some(gid)).unwrap();
    let e = std::os::unix::fs::chown(m.p("f"), Some(uid + 1), None).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
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
