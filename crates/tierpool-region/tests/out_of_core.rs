//! A region four times larger than the memory its process may use: the
//! process runs under a cgroup (v1) memory limit and still writes and reads
//! every byte, over a pool stand-in that keeps the bytes in a file on disk.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use tierpool_region::{Backend, CacheError, Geometry, MappedRegion};

const MIB: u64 = 1 << 20;
const REGION: u64 = 256 * MIB;
const LIMIT: u64 = 64 * MIB;
const CACHE: u64 = 16 * MIB;

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

/// Chunks stored in one file, each at `chunk * chunk_size`.
struct FileStore {
    file: File,
    chunk_size: u64,
}

impl Backend for FileStore {
    type Error = IoErr;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, IoErr> {
        let mut buf = vec![0; len as usize];
        let at = chunk * self.chunk_size + offset;
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => break, // past the end: never written, zeros
                Ok(n) => done += n,
                Err(e) => return Err(IoErr(e.to_string())),
            }
        }
        Ok(buf)
    }

    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> Result<(), IoErr> {
        self.file.write_all_at(data, chunk * self.chunk_size + offset).map_err(|e| IoErr(e.to_string()))
    }
}

fn word(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7)
}

/// The work, run in a child process inside the memory-limited cgroup.
#[test]
fn out_of_core_child() {
    let Some(path) = std::env::var_os("TIERPOOL_REGION_OOC_FILE") else { return };
    let file = File::options().read(true).write(true).create(true).truncate(true).open(path).unwrap();
    let geom = Geometry::new(REGION, 4 * MIB);
    let mut r = MappedRegion::new(geom, CACHE, MIB, FileStore { file, chunk_size: geom.chunk_size }).unwrap();
    {
        let s = r.as_mut_slice();
        // SAFETY: the mapping is page-aligned, so aligned for u64.
        let words = unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u64>(), s.len() / 8) };
        for (i, w) in words.iter_mut().enumerate() {
            *w = word(i as u64);
        }
    }
    r.flush().unwrap();
    let s = r.as_slice();
    // SAFETY: as above.
    let words = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u64>(), s.len() / 8) };
    let bad = words.iter().enumerate().filter(|(i, w)| **w != word(*i as u64)).count();
    assert_eq!(bad, 0, "words read back wrong");
    let st = r.stats();
    assert!(r.resident_bytes() <= CACHE);
    println!("ok fetched={} written_back={}", st.bytes_fetched, st.bytes_written_back);
}

#[test]
fn a_region_four_times_the_memory_limit_completes() {
    let cg = PathBuf::from(format!("/sys/fs/cgroup/memory/tierpool-test-{}", std::process::id()));
    if std::fs::create_dir(&cg).is_err() {
        panic!("cannot create the memory cgroup {} (cgroup v1 memory controller and root are needed)", cg.display());
    }
    std::fs::write(cg.join("memory.limit_in_bytes"), LIMIT.to_string()).unwrap();
    let _ = std::fs::write(cg.join("memory.memsw.limit_in_bytes"), LIMIT.to_string());
    let dir = std::env::temp_dir().join(format!("tierpool-ooc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let procs = cg.join("cgroup.procs");
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "out_of_core_child", "--nocapture", "--test-threads=1"])
        .env("TIERPOOL_REGION_OOC_FILE", dir.join("store"));
    // SAFETY: the hook only writes the child's pid to a file before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
    }
    let out = cmd.output().unwrap();
    let max_usage: u64 = std::fs::read_to_string(cg.join("memory.max_usage_in_bytes")).unwrap().trim().parse().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir(&cg);
    assert!(out.status.success(), "{:?}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ok fetched="), "{stdout}");
    assert!(max_usage <= LIMIT && REGION >= 4 * LIMIT, "peak {max_usage} bytes");
}
