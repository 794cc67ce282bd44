//! What an unfriendly peer or a full disk cannot do: overwrite a committed
//! chunk, store bytes under a wrong checksum, store a hole; and what a worker
//! whose disk is really full does (pool full for writes, reads go on); and
//! a second server started on a directory another one uses (refused).

mod common;
use common::{data, Pool};
use std::time::{Duration, Instant};
use tierpool_net::{Pool as Conn, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId};

const MIB: usize = 1 << 20;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Stores a chunk on every worker of the pool, as a hand-made request.
fn forge(
    pool: &Pool,
    key: ChunkKey,
    payload: &[u8],
    checksum: u32,
) -> Vec<Result<WorkerResponse, tierpool_types::Error>> {
    let req = WorkerRequest::PutChunk { key, checksum, attrs: ChunkAttrs::default(), table: 0 };
    ask_every_worker(pool, &req, payload)
}

/// What every worker of the pool answers `req` with `payload`.
fn ask_every_worker(
    pool: &Pool,
    req: &WorkerRequest,
    payload: &[u8],
) -> Vec<Result<WorkerResponse, tierpool_types::Error>> {
    let st = pool.status();
    let addrs: Vec<String> =
        st["workers"].as_array().unwrap().iter().map(|w| w["address"].as_str().unwrap().to_string()).collect();
    rt().block_on(async {
        let mut out = Vec::new();
        for a in addrs {
            let c: Conn<Worker> = Conn::new(a, PoolConfig::with(pool.credentials()));
            out.push(c.call(req, payload, false).await.map(|(r, _)| r));
        }
        out
    })
}

#[test]
fn ranges_that_do_not_cover_their_payload_are_refused() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let key = ChunkKey::hashed(InodeId(77), 0, 1);
    let payload = b"0123456789";
    let checksum = crc32c::crc32c(payload);
    for (ranges, why) in [
        (vec![(0, 4), (100, 4)], "2 bytes of the payload belong to no chunk"),
        (vec![(0, 4), (100, 7)], "chunks run past the payload"),
        (vec![(0, u64::MAX)], "chunks run past the payload"),
    ] {
        let req = WorkerRequest::WriteRanges { key, ranges, checksum, table: 0 };
        let e = ask_every_worker(&pool, &req, payload).remove(0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert_eq!(e.message, format!("chunk {key}: ranges do not cover the payload: {why}"));
    }
}

#[test]
fn a_forged_put_cannot_overwrite_a_committed_chunk() {
    let pool = Pool::start(2, "16MiB", "64MiB");
    let content = data(3, 3 * MIB);
    pool.put("/f", &content);
    let inode = serde_json::from_str::<serde_json::Value>(&pool.ok(&["stat", "--json", "/f"])).unwrap()["inode"]
        .as_u64()
        .unwrap();
    let key = ChunkKey::hashed(InodeId(inode), 0, 1);
    // An empty payload with the CRC of nothing: sent to every worker, one of
    // which holds the chunk and must refuse; the other has no such chunk.
    let answers = forge(&pool, key, b"", crc32c::crc32c(b""));
    let refused: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(refused[0].kind, ErrorKind::AlreadyExists);
    assert!(refused[0].message.contains("write-once"), "{}", refused[0].message);
    assert!(pool.get("/f") == content, "the file is intact");
    // Bytes that do not match their checksum are never stored (the worker
    // not owning the chunk's partition refuses it as not its own).
    let owner_answer = |answers: Vec<tierpool_types::Result<WorkerResponse>>| {
        let (moved, owner): (Vec<_>, Vec<_>) =
            answers.into_iter().partition(|a| matches!(a, Ok(WorkerResponse::Moved { .. })));
        assert_eq!((moved.len(), owner.len()), (1, 1), "{owner:?}");
        owner.into_iter().next().unwrap()
    };
    let other = ChunkKey::hashed(InodeId(inode), 5, 9);
    assert_eq!(owner_answer(forge(&pool, other, b"abc", 7)).unwrap_err().kind, ErrorKind::Corrupt);
    // Version 0 is a hole: nothing is stored under it.
    let hole = ChunkKey::hashed(InodeId(inode), 0, 0);
    let e = owner_answer(forge(&pool, hole, b"abc", crc32c::crc32c(b"abc"))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("version 0 is a hole"), "{}", e.message);
    assert!(pool.get("/f") == content);
}

/// A worker whose disk really is full (its budget says 1GiB; the file
/// system under it holds 24MiB) answers writes with "pool full", says so in
/// status, and keeps serving what it holds.
#[test]
fn a_really_full_disk_is_pool_full_and_reads_go_on() {
    let mut pool = Pool::start(0, "8MiB", "1GiB");
    let dir = pool.dir().join("small-disk");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=24m", "tmpfs", dir.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(mounted, "this test mounts a small tmpfs and needs root (as the test suite runs in CI)");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir.clone());
    pool.workers.push(common::WorkerProc { dir, mem: "8MiB".into(), disk: "1GiB".into(), child: None });
    pool.start_worker(0);
    pool.wait_alive(1);
    let mut stored = Vec::new();
    let mut failure = None;
    for i in 0..20u64 {
        let local = pool.dir().join("in.tmp");
        std::fs::write(&local, data(i, 4 * MIB)).unwrap();
        let out = pool.cli(&["put", local.to_str().unwrap(), &format!("/f{i}")]);
        if out.status.success() {
            stored.push(i);
        } else {
            failure = Some(String::from_utf8(out.stderr).unwrap());
            break;
        }
    }
    let e = failure.expect("24MiB of disk and 8MiB of memory cannot take 80MiB");
    assert!(e.contains("pool full") && e.contains("out of space"), "{e}");
    assert!(!e.contains("demoting"), "{e}");
    let st = pool.status();
    assert_eq!(st["workers"][0]["disk_full"], true, "{st}");
    for i in &stored {
        assert!(pool.get(&format!("/f{i}")) == data(*i, 4 * MIB), "/f{i} still reads");
    }
    // Removing files gives the space back (the cap lifts when chunks are deleted).
    for i in &stored {
        pool.ok(&["rm", &format!("/f{i}")]);
    }
    let t = Instant::now();
    loop {
        let out = pool.cli(&["put", pool.dir().join("in.tmp").to_str().unwrap(), "/again"]);
        if out.status.success() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "space never usable again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Resident memory of a process, from /proc.
fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kb.unwrap_or(0) * 1024
}

/// A worker's resident memory stays within its MEM budget plus the
/// documented overhead (docs/architecture.md: the frame budget, 128MiB, the
/// DISK reads in flight, 16 chunks, and the process itself) while four
/// writers each put 256MiB at once into `--mem 256MiB`, and while four
/// readers read it all back. It peaked at 706MB before memory was bounded.
#[test]
fn a_workers_memory_stays_within_its_budget_under_parallel_writers_and_readers() {
    let pool = Pool::start(1, "256MiB", "2GiB");
    let pid = pool.workers[0].child.as_ref().unwrap().id();
    let input = pool.dir().join("big.in");
    let mut f = std::fs::File::create(&input).unwrap();
    std::io::copy(&mut std::io::Read::take(std::fs::File::open("/dev/urandom").unwrap(), 256 << 20), &mut f).unwrap();
    let peak = std::sync::atomic::AtomicU64::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let input = input.to_str().unwrap();
        let writers: Vec<_> = (0..4).map(|i| pool.cmd(&["put", input, &format!("/big{i}")]).spawn().unwrap()).collect();
        for mut w in writers {
            assert!(w.wait().unwrap().success());
        }
        let readers: Vec<_> = (0..4)
            .map(|i| {
                pool.cmd(&["get", &format!("/big{i}"), pool.dir().join(format!("out{i}")).to_str().unwrap()])
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut r in readers {
            assert!(r.wait().unwrap().success());
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let want = std::fs::read(&input).unwrap();
    for i in 0..4 {
        assert!(std::fs::read(pool.dir().join(format!("out{i}"))).unwrap() == want, "/big{i} reads back");
    }
    let peak = peak.into_inner();
    let bound = (256 + 128 + 16 * 4 + 64) << 20;
    eprintln!("worker peak resident memory: {} MiB (bound {} MiB)", peak >> 20, bound >> 20);
    assert!(peak > 200 << 20, "the sampling saw the worker at work");
    assert!(peak <= bound, "peak {} MiB over the bound {} MiB", peak >> 20, bound >> 20);
}

/// Runs `tierpool ROLE --dir DIR ARGS` next to the `role` of process `pid`
/// that holds `dir`, and checks it is refused, saying so in one line.
fn refused_next_to(role: &str, dir: &std::path::Path, pid: u32, args: &[&str]) {
    let mut child = std::process::Command::new(common::BIN)
        .args([role, "--dir", dir.to_str().unwrap()])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("a second {role} runs on {}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "tierpool: another {role} is running on {} (process {pid}): stop it first, or give this one another \
             --dir\n",
            dir.display()
        )
    );
}

#[test]
fn a_second_server_on_a_directory_in_use_is_refused_and_the_first_goes_on() {
    let mut pool = Pool::start(1, "16MiB", "64MiB");
    let bytes = data(3, 5 * MIB);
    pool.put("/before", &bytes);
    let pid = pool.coordinator.as_ref().unwrap().id();
    refused_next_to("coordinator", &pool.dir().join("coordinator"), pid, &["--listen", "127.0.0.1:0"]);
    let (dir, pid) = (pool.workers[0].dir.clone(), pool.workers[0].child.as_ref().unwrap().id());
    let secret = pool.secret_file();
    let args = ["--mem", "16MiB", "--disk", "64MiB", "--coordinator", &pool.addr];
    refused_next_to("worker", &dir, pid, &[&args[..], &["--secret-file", secret.to_str().unwrap()]].concat());
    assert_eq!(pool.get("/before"), bytes);
    // Killed, a server lets go of its directory at once: a new one starts on it.
    pool.kill_coordinator();
    pool.start_coordinator();
    assert_eq!(pool.get("/before"), bytes);
}
