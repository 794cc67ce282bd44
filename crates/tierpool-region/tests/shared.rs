//! Two processes open one region read-only through a shared file: the second
//! finds the pages the first fetched, and fetches nothing itself.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tierpool_region::{Backend, CacheError, Geometry, MappedRegion};

const MIB: u64 = 1 << 20;
const SIZE: u64 = 24 * MIB + 300;

#[derive(Debug)]
struct IoErr(String);

impl std::fmt::Display for IoErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<CacheError> for IoErr {
    fn from(e: CacheError) -> IoErr {
        IoErr(e.to_string())
    }
}

/// The pool's copy: one file, chunk `i` at `i * chunk_size`.
struct Store(File, u64);

impl Backend for Store {
    type Error = IoErr;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, IoErr> {
        let mut buf = vec![0; len as usize];
        self.0.read_exact_at(&mut buf, chunk * self.1 + offset).map_err(|e| IoErr(e.to_string()))?;
        Ok(buf)
    }

    fn write_back(&mut self, _: u64, _: u64, _: &[u8]) -> Result<(), IoErr> {
        Err(IoErr("read-only".into()))
    }
}

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 11) as u8
}

fn wait_for(p: &Path) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "waited too long for {}", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One reader, run in a child process by `readers_share_one_copy`.
#[test]
fn shared_reader_child() {
    let Some(dir) = std::env::var_os("TIERPOOL_SHARED_DIR").map(PathBuf::from) else { return };
    let role = std::env::var("TIERPOOL_SHARED_ROLE").unwrap();
    let geom = Geometry::new(SIZE, 4 * MIB);
    let store = Store(File::open(dir.join("store")).unwrap(), geom.chunk_size);
    let shm = PathBuf::from(std::env::var_os("TIERPOOL_SHARED_SHM").unwrap());
    let r = MappedRegion::new_shared(geom, SIZE, MIB, store, &shm).unwrap();
    let s = r.as_slice();
    let bad = (0..SIZE).step_by(997).filter(|&i| s[i as usize] != byte(i)).count();
    assert_eq!(bad, 0);
    println!("fetched {}", r.stats().bytes_fetched);
    if role == "first" {
        File::create(dir.join("first-ready")).unwrap();
        wait_for(&dir.join("second-done"));
    } else {
        File::create(dir.join("second-done")).unwrap();
    }
}

fn child(dir: &Path, role: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "shared_reader_child", "--nocapture", "--test-threads=1"])
        .env("TIERPOOL_SHARED_DIR", dir)
        .env("TIERPOOL_SHARED_ROLE", role)
        .env("TIERPOOL_SHARED_SHM", shm_path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn fetched(out: std::process::Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let at = text.find("fetched ").unwrap_or_else(|| panic!("{text}")) + 8;
    text[at..].split_whitespace().next().unwrap().parse().unwrap()
}

/// The shared copy lives in shared memory (tmpfs).
fn shm_path() -> PathBuf {
    PathBuf::from(format!("/dev/shm/tierpool-shared-test-{}", std::process::id()))
}

#[test]
fn readers_share_one_copy() {
    let dir = std::env::temp_dir().join(format!("tierpool-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data: Vec<u8> = (0..SIZE).map(byte).collect();
    std::fs::write(dir.join("store"), &data).unwrap();
    let first = child(&dir, "first");
    wait_for(&dir.join("first-ready"));
    let second = child(&dir, "second").wait_with_output().unwrap();
    let (a, b) = (fetched(first.wait_with_output().unwrap()), fetched(second));
    assert!(a > SIZE / 2, "the first reader fetched what it touched: {a}");
    assert_eq!(b, 0, "the second reader found every page in the shared copy");
    assert!(!shm_path().exists(), "the last reader removed the shared file");
    std::fs::remove_dir_all(&dir).unwrap();
}
