//! What an unfriendly peer or a full disk cannot do: overwrite a committed
//! chunk, store bytes under a wrong checksum, store a hole; and what a worker
//! whose disk is really full does (pool full for writes, reads go on).

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
    let st = pool.status();
    let addrs: Vec<String> =
        st["workers"].as_array().unwrap().iter().map(|w| w["address"].as_str().unwrap().to_string()).collect();
    rt().block_on(async {
        let mut out = Vec::new();
        for a in addrs {
            let c: Conn<Worker> = Conn::new(a, PoolConfig::default());
            let req = WorkerRequest::PutChunk { key, checksum, attrs: ChunkAttrs::default() };
            out.push(c.call(&req, payload, false).await.map(|(r, _)| r));
        }
        out
    })
}

#[test]
fn a_forged_put_cannot_overwrite_a_committed_chunk() {
    let pool = Pool::start(2, "16MiB", "64MiB");
    let content = data(3, 3 * MIB);
    pool.put("/f", &content);
    let inode = serde_json::from_str::<serde_json::Value>(&pool.ok(&["stat", "--json", "/f"])).unwrap()["inode"]
        .as_u64()
        .unwrap();
    let key = ChunkKey { inode: InodeId(inode), index: 0, version: 1 };
    // An empty payload with the CRC of nothing: sent to every worker, one of
    // which holds the chunk and must refuse; the other has no such chunk.
    let answers = forge(&pool, key, b"", crc32c::crc32c(b""));
    let refused: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(refused[0].kind, ErrorKind::AlreadyExists);
    assert!(refused[0].message.contains("write-once"), "{}", refused[0].message);
    assert!(pool.get("/f") == content, "the file is intact");
    // Bytes that do not match their checksum are never stored.
    let other = ChunkKey { inode: InodeId(inode), index: 5, version: 9 };
    for a in forge(&pool, other, b"abc", 7) {
        assert_eq!(a.unwrap_err().kind, ErrorKind::Corrupt);
    }
    // Version 0 is a hole: nothing is stored under it.
    let hole = ChunkKey { inode: InodeId(inode), index: 0, version: 0 };
    for a in forge(&pool, hole, b"abc", crc32c::crc32c(b"abc")) {
        let e = a.unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("version 0 is a hole"), "{}", e.message);
    }
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
