//! Checkpoints of regions with real processes: a checkpoint copies only
//! the chunks changed since the previous one, on every replica's worker;
//! checkpoints read back byte-exact (as read-only regions and through the
//! CLI) across a coordinator `kill -9`; a restore copies back what differs,
//! is refused while a client has the region open, and removing a
//! checkpoint frees exactly what only it kept.

mod common;
use common::{data, json, Pool, Session};
use tierpool_client::{Region, RegionOptions};
use tierpool_net::{Pool as Conn, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, ErrorKind, InodeId};

const CHUNK: u64 = 64 << 10;
const CHUNKS: u64 = 8;
const SIZE: u64 = CHUNKS * CHUNK;

impl Session {
    fn open(&self, path: &str) -> Region {
        let info = self.rt.block_on(self.client.open_region(path)).unwrap();
        Region::open(self.client.clone(), self.rt.handle().clone(), path, info, 2 * CHUNK).unwrap()
    }

    fn open_checkpoint(&self, path: &str, name: &str) -> Region {
        let info = self.rt.block_on(self.client.checkpoint_info(path, name)).unwrap();
        Region::open(self.client.clone(), self.rt.handle().clone(), path, info, 2 * CHUNK).unwrap()
    }

    fn read_all(&self, r: &Region) -> Vec<u8> {
        let mut buf = vec![0u8; r.size() as usize];
        r.read_into(0, &mut buf).unwrap();
        buf
    }
}

#[test]
fn checkpoints_copy_what_changed_read_back_restore_and_free_what_they_kept() {
    let mut pool = Pool::start_with(2, "16MiB", "64MiB", &["--replicas", "2"]);
    let s = Session::new(&pool);
    pool.ok(&["mkdir", "/m"]);
    let opts = RegionOptions { chunk_size: CHUNK, ..RegionOptions::default() };
    s.rt.block_on(s.client.alloc_region("/m/grid", SIZE, &opts)).unwrap();
    let first = data(1, SIZE as usize);
    let r = s.open("/m/grid");
    r.write(0, &first).unwrap();

    // The first checkpoint copies every chunk, on both replicas; the
    // handle's writes are flushed into it.
    let rep = r.checkpoint("c1").unwrap();
    assert_eq!((rep.chunks, rep.copied, rep.bytes_copied, rep.since), (CHUNKS, CHUNKS, 2 * SIZE, None));
    pool.settle(4 * SIZE);
    assert_eq!(r.checkpoint("c1").unwrap_err().kind, ErrorKind::AlreadyExists);

    // The second copies the two chunks written since, through the CLI.
    let mut second = first.clone();
    for (at, bytes) in [(2 * CHUNK + 7, &b"changed"[..]), (5 * CHUNK, &b"also changed"[..])] {
        r.write(at, bytes).unwrap();
        second[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    }
    r.flush().unwrap();
    let out = json(&pool.ok(&["snapshot", "create", "/m/grid", "c2", "--json"]));
    assert_eq!(out["checkpoint"]["copied"], 2, "{out}");
    assert_eq!(out["checkpoint"]["since"], "c1", "{out}");
    assert_eq!(out["checkpoint"]["bytes_copied"], 2 * 2 * CHUNK, "{out}");
    pool.settle(4 * SIZE + 2 * 2 * CHUNK);
    let text = pool.ok(&["snapshot", "ls", "/m/grid"]);
    assert!(text.contains("/m/grid@c1\t") && text.contains("/m/grid@c2\t"), "{text}");

    // Checkpoints read back byte-exact, read-only, as regions and as paths;
    // the live region moves on.
    r.write(0, b"live moves on").unwrap();
    r.flush().unwrap();
    let c1 = s.open_checkpoint("/m/grid", "c1");
    assert!(c1.is_readonly());
    assert!(s.read_all(&c1) == first, "checkpoint c1 reads as the region was");
    assert!(c1.write(0, b"x").is_err());
    c1.close().unwrap();
    assert!(pool.get("/m/grid/.snapshots/c2") == second, "checkpoint c2 reads back through the CLI");
    let e = pool.err(&["put", "/dev/null", "/m/grid/.snapshots/c2"]);
    assert_eq!(e, "tierpool: /m/grid/.snapshots/c2: snapshots are read-only");

    // Checkpoints survive a coordinator kill -9 (replayed from its log).
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(2);
    assert!(pool.get("/m/grid/.snapshots/c1") == first);

    // A restore is refused while a client has the region open: another
    // one, or this one.
    let other = Session::new(&pool);
    let busy = other.rt.block_on(other.client.restore_region("/m/grid", "c1")).unwrap_err();
    assert_eq!(
        (busy.kind, busy.message.as_str()),
        (ErrorKind::Busy, "/m/grid: the region is open in another client; close it there before restoring it")
    );
    let busy = s.rt.block_on(s.client.restore_region("/m/grid", "c1")).unwrap_err();
    assert_eq!(
        (busy.kind, busy.message.as_str()),
        (ErrorKind::Busy, "/m/grid: the region is open in this client; close it before restoring it")
    );
    r.close().unwrap();
    let rep = other.rt.block_on(other.client.restore_region("/m/grid", "c1")).unwrap();
    // Chunks 0 (live moved on), 2 and 5 differ from c1: those are copied back.
    assert_eq!((rep.chunks, rep.copied, rep.bytes_copied), (CHUNKS, 3, 3 * 2 * CHUNK));
    let back = s.open("/m/grid");
    assert!(s.read_all(&back) == first, "the region is as checkpoint c1 was");
    back.close().unwrap();
    let stat = json(&pool.ok(&["stat", "/m/grid", "--json"]));
    assert!(stat.get("restoring").is_none(), "{stat}");
    assert_eq!(stat["snapshots"].as_array().unwrap().len(), 2, "{stat}");

    // Removing c1 frees the two copies only it named.
    pool.ok(&["snapshot", "rm", "/m/grid", "c1"]);
    pool.settle(4 * SIZE);
    assert!(pool.get("/m/grid/.snapshots/c2") == second);
    // Removing the region keeps its checkpoint readable, until it goes too.
    pool.ok(&["rm", "/m/grid"]);
    pool.settle(2 * SIZE);
    assert!(pool.get("/m/grid/.snapshots/c2") == second);
    pool.ok(&["snapshot", "rm", "/m/grid", "c2"]);
    pool.settle(0);
}

/// A replica added after a checkpoint lacks its copies: restoring reads
/// them from the replica that has them and writes them over the region.
#[test]
fn a_restore_reaches_replicas_added_since_the_checkpoint() {
    let pool = Pool::start_with(2, "16MiB", "64MiB", &["--replicas", "2"]);
    let s = Session::new(&pool);
    pool.ok(&["mkdir", "/one"]);
    pool.ok(&["replicas", "/one", "1"]);
    let opts = RegionOptions { chunk_size: CHUNK, ..RegionOptions::default() };
    s.rt.block_on(s.client.alloc_region("/one/g", SIZE, &opts)).unwrap();
    let was = data(2, SIZE as usize);
    let r = s.open("/one/g");
    r.write(0, &was).unwrap();
    let rep = r.checkpoint("c").unwrap();
    assert_eq!((rep.copied, rep.bytes_copied), (CHUNKS, SIZE), "one copy of each chunk");
    pool.ok(&["replicas", "/one/g", "2"]);
    r.write(0, &data(3, SIZE as usize)).unwrap();
    r.flush().unwrap();
    let rep = r.restore("c").unwrap();
    assert_eq!(rep.copied, CHUNKS);
    assert!(s.read_all(&r) == was, "the region reads as checkpointed");
    r.close().unwrap();
    assert_eq!(pool.ok(&["fsck", "/one/g"]), "/one/g: every chunk has all its copies\n");
    // Each worker's own copy of each chunk holds the checkpoint's bytes.
    let inode = InodeId(json(&pool.ok(&["stat", "/one/g", "--json"]))["inode"].as_u64().unwrap());
    let st = pool.status();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for w in st["workers"].as_array().unwrap() {
        let c: Conn<Worker> = Conn::new(w["address"].as_str().unwrap(), PoolConfig::with(pool.credentials()));
        for i in 0..CHUNKS {
            let req = WorkerRequest::GetChunk { key: ChunkKey::hashed(inode, i, 1), mem_only: false };
            let (resp, bytes) = rt.block_on(c.call(&req, &[], true)).unwrap();
            assert_eq!(resp, WorkerResponse::Chunk);
            let at = (i * CHUNK) as usize;
            assert!(bytes[..] == was[at..at + CHUNK as usize], "worker {} chunk {i}", w["address"]);
        }
    }
}
