//! `mmap` with `MAP_SHARED` of a file four times larger than the memory its
//! process may use: the process runs under a cgroup (v1) memory limit, writes
//! every page of the mapping and reads it back; the kernel writes the dirty
//! pages back through the mount, and the pool holds the bytes (mostly on
//! DISK: the file is also four times the pool's memory).

mod common;
use common::{Mount, Pool};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

const MIB: u64 = 1 << 20;
const FILE: u64 = 256 * MIB;
const LIMIT: u64 = 64 * MIB;

fn word(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 11)
}

/// Maps `len` bytes of `f` shared, read-write.
fn map(f: &std::fs::File, len: u64) -> &'static mut [u64] {
    // SAFETY: a fresh shared mapping of an open file; unmapped by `unmap`.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        std::slice::from_raw_parts_mut(p.cast::<u64>(), (len / 8) as usize)
    }
}

fn unmap(words: &mut [u64]) {
    // SAFETY: `words` is a whole mapping made by `map`.
    unsafe {
        let (p, len) = (words.as_mut_ptr().cast(), words.len() * 8);
        assert_eq!(libc::msync(p, len, libc::MS_SYNC), 0, "msync: {}", std::io::Error::last_os_error());
        assert_eq!(libc::munmap(p, len), 0);
    }
}

/// The work, run in a child process inside the memory-limited cgroup.
#[test]
fn mmap_child() {
    let Some(path) = std::env::var_os("TIERPOOL_FUSE_MMAP_FILE") else { return };
    let f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let words = map(&f, FILE);
    for (i, w) in words.iter_mut().enumerate() {
        *w = word(i as u64);
    }
    unmap(words);
    drop(f);
    let f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let words = map(&f, FILE);
    let bad = words.iter().enumerate().filter(|(i, w)| **w != word(*i as u64)).count();
    unmap(words);
    assert_eq!(bad, 0, "words read back wrong through the mapping");
    println!("ok");
}

#[test]
fn a_shared_mapping_four_times_the_memory_limit_reaches_the_pool() {
    let pool = Pool::start(2, "32MiB", "512MiB");
    let m = Mount::new(&pool, "mnt");
    let path = m.p("mapped");
    OpenOptions::new().create(true).truncate(true).write(true).open(&path).unwrap().set_len(FILE).unwrap();
    let cg = PathBuf::from(format!("/sys/fs/cgroup/memory/tierpool-fuse-mmap-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap_or_else(|e| {
        panic!(
            "cannot create the memory cgroup {} (cgroup v1 memory controller and root are needed): {e}",
            cg.display()
        )
    });
    std::fs::write(cg.join("memory.limit_in_bytes"), LIMIT.to_string()).unwrap();
    let _ = std::fs::write(cg.join("memory.memsw.limit_in_bytes"), LIMIT.to_string());
    let procs = cg.join("cgroup.procs");
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "mmap_child", "--nocapture", "--test-threads=1"]).env("TIERPOOL_FUSE_MMAP_FILE", &path);
    // SAFETY: the hook only writes the child's pid to a file before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
    }
    let out = cmd.output().unwrap();
    let peak: u64 = std::fs::read_to_string(cg.join("memory.max_usage_in_bytes")).unwrap().trim().parse().unwrap();
    let _ = std::fs::remove_dir(&cg);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ok"), "{stdout}");
    assert!(peak <= LIMIT && FILE >= 4 * LIMIT, "peak {peak} bytes");
    // Every word reached the pool, as the CLI reads it.
    let got = pool.get("/mapped");
    assert_eq!(got.len() as u64, FILE);
    let bad = got
        .chunks_exact(8)
        .enumerate()
        .filter(|(i, c)| u64::from_ne_bytes((*c).try_into().unwrap()) != word(*i as u64))
        .count();
    assert_eq!(bad, 0, "words read back wrong through the CLI");
    let st = pool.fresh_status();
    let disk: u64 = st["workers"].as_array().unwrap().iter().map(|w| w["disk"]["used"].as_u64().unwrap()).sum();
    assert!(disk >= FILE - 64 * MIB, "the part beyond the pool's memory is on DISK: {st}");
}
