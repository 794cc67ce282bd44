//! Pages of memory regions in transactions, with real processes: writes
//! invisible until the commit, then on the workers with the files of the
//! same commit; snapshot reads across another commit of the same pages;
//! the first committer winning by page; a region opened after a commit
//! holding its pages; pages committed while no worker could take them,
//! answered as committed, kept pending across a coordinator `kill -9` and
//! written once the workers are back; and the ops of pages refused when a
//! client sends them itself.

mod common;
use common::{data, Pool, Session};
use std::time::{Duration, Instant};
use tierpool_client::{Committed, PutOptions, Region, RegionOptions};
use tierpool_meta::{MetaOp, TxRegion};
use tierpool_types::ErrorKind;

const PAGE: u64 = 4096;
/// A region of three chunks of four pages; its last page is short.
const CHUNK: u64 = 4 * PAGE;
const SIZE: u64 = 3 * CHUNK - 100;

impl Session {
    fn region(&self, path: &str) {
        let opts = RegionOptions { chunk_size: CHUNK, ..RegionOptions::default() };
        self.rt.block_on(self.client.alloc_region(path, SIZE, &opts)).unwrap();
    }

    fn put(&self, path: &str, bytes: &[u8]) {
        let opts = PutOptions { chunk_size: PAGE, overwrite: true, ..PutOptions::default() };
        self.rt.block_on(self.client.put_bytes(path, bytes.to_vec().into(), &opts)).unwrap();
    }

    fn get(&self, path: &str) -> Vec<u8> {
        self.rt.block_on(self.client.get_bytes(path)).unwrap()
    }

    /// The region's bytes through a region handle opened now.
    fn mapped(&self, path: &str) -> Vec<u8> {
        let info = self.rt.block_on(self.client.open_region(path)).unwrap();
        let r = Region::open(self.client.clone(), self.rt.handle().clone(), path, info, 1 << 20).unwrap();
        r.read(0, SIZE).unwrap()
    }
}

#[test]
fn region_pages_commit_with_files_at_once_and_readers_keep_their_snapshot() {
    let pool = Pool::start(2, "16MiB", "64MiB");
    let s = Session::new(&pool);
    let rt = &s.rt;
    s.region("/m");
    s.put("/f", b"before");
    let mut reader = rt.block_on(s.client.begin()).unwrap();
    assert_eq!(rt.block_on(reader.region_read("/m", 4090, 10)).unwrap(), vec![0; 10]);

    // A write across pages 0 and 1, and one on the short last page, with a file.
    let mut tx = rt.block_on(s.client.begin()).unwrap();
    let bytes = data(1, 10);
    rt.block_on(tx.region_write("/m", 4090, &bytes)).unwrap();
    rt.block_on(tx.region_write("/m", SIZE - 3, b"end")).unwrap();
    rt.block_on(tx.write("/f", 0, b"after!")).unwrap();
    assert_eq!(rt.block_on(tx.region_read("/m", 4088, 14)).unwrap(), [&[0, 0][..], &bytes, &[0, 0]].concat());
    assert_eq!(rt.block_on(tx.region_size("/m")).unwrap(), SIZE);
    // Invisible to others until the commit.
    assert_eq!(s.get("/m"), vec![0; SIZE as usize]);
    assert_eq!(rt.block_on(tx.commit(None)).unwrap(), Committed::Now);

    // On the workers, with the file, for anyone who reads now.
    let mut want = vec![0u8; SIZE as usize];
    want[4090..4100].copy_from_slice(&bytes);
    want[SIZE as usize - 3..].copy_from_slice(b"end");
    assert_eq!(s.get("/m"), want);
    assert_eq!(s.mapped("/m"), want);
    assert_eq!(s.get("/f"), b"after!");
    assert_eq!(pool.status()["transactions"]["pages_pending"], 0);

    // The reader began before: it still reads zeros there, on pages it had
    // read and on pages it had not.
    assert_eq!(rt.block_on(reader.region_read("/m", 4090, 10)).unwrap(), vec![0; 10]);
    assert_eq!(rt.block_on(reader.region_read("/m", SIZE - 3, 3)).unwrap(), vec![0; 3]);
    // It loses if it writes a page the commit wrote (first committer wins), at once.
    let e = rt.block_on(reader.region_write("/m", PAGE + 5, b"x")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("page 1 was rewritten"), "{e}");

    // Another page of the same chunk: no conflict.
    let mut a = rt.block_on(s.client.begin()).unwrap();
    let mut b = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(a.region_write("/m", 2 * PAGE, b"page two")).unwrap();
    rt.block_on(b.region_write("/m", 3 * PAGE, b"page three")).unwrap();
    assert_eq!(rt.block_on(a.commit(None)).unwrap(), Committed::Now);
    assert_eq!(rt.block_on(b.commit(None)).unwrap(), Committed::Now);
    let got = s.get("/m");
    assert_eq!(
        (&got[2 * PAGE as usize..][..8], &got[3 * PAGE as usize..][..10]),
        (&b"page two"[..], &b"page three"[..])
    );

    // Bad input: past the end, a region read as a file, a file read as a region.
    let mut t = rt.block_on(s.client.begin()).unwrap();
    let e = rt.block_on(t.region_write("/m", SIZE - 2, b"abc")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("ends past the region's"), "{e}");
    let e = rt.block_on(t.read("/m", 0, 1)).unwrap_err();
    assert_eq!((e.kind, e.message.contains("is a region")), (ErrorKind::InvalidArgument, true), "{e}");
    let e = rt.block_on(t.region_read("/f", 0, 1)).unwrap_err();
    assert_eq!((e.kind, e.message.contains("is not a region")), (ErrorKind::InvalidArgument, true), "{e}");
    assert_eq!(rt.block_on(t.region_read("/nope", 0, 1)).unwrap_err().kind, ErrorKind::NotFound);
    // A transaction's pages are dropped with it when it aborts.
    rt.block_on(t.region_write("/m", 0, b"never")).unwrap();
    rt.block_on(t.abort()).unwrap();
    assert_eq!(&s.get("/m")[..5], &[0; 5]);
}

#[test]
fn pages_committed_while_no_worker_takes_them_are_written_after_a_coordinator_kill() {
    // Too little memory for a chunk: the region's chunks are on disk, and
    // outlive their worker's kill.
    let mut pool = Pool::start(1, "4KiB", "64MiB");
    let s = Session::new(&pool);
    s.region("/m");
    let mut tx = s.rt.block_on(s.client.begin()).unwrap();
    s.rt.block_on(tx.region_write("/m", 100, b"committed")).unwrap();
    s.rt.block_on(tx.mkdir("/done")).unwrap();
    // The only worker goes. The commit needs none to be logged: it is
    // answered as committed (after a few seconds' wait for the page), and
    // its page stays pending.
    pool.kill_worker(0);
    assert_eq!(s.rt.block_on(tx.commit(None)).unwrap(), Committed::Now);
    assert_eq!(pool.status()["transactions"]["pages_pending"], 1);
    assert!(pool.ok(&["status"]).contains("1 region pages committed not yet on the workers"));
    assert!(pool.ok(&["ls", "/"]).contains("done"));
    // A transaction that reads the region now waits for the page, in vain.
    let mut t = s.rt.block_on(s.client.begin()).unwrap();
    let e = s.rt.block_on(t.region_read("/m", 100, 9)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Busy);
    assert!(e.message.contains("not on the workers yet"), "{e}");
    drop(t);
    // A coordinator kill -9: the restarted one finds the page pending in
    // its log, and writes it once the worker is back.
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.start_worker(0);
    let since = Instant::now();
    while pool.status()["transactions"]["pages_pending"] != 0 {
        assert!(since.elapsed() < Duration::from_secs(40), "pending pages never written");
        std::thread::sleep(Duration::from_millis(100));
    }
    let s2 = Session::new(&pool);
    assert_eq!(&s2.get("/m")[100..109], b"committed");
    let mut t = s2.rt.block_on(s2.client.begin()).unwrap();
    assert_eq!(s2.rt.block_on(t.region_read("/m", 100, 9)).unwrap(), b"committed");
}

#[test]
fn clients_cannot_commit_or_finish_pages_by_hand() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let s = Session::new(&pool);
    s.region("/m");
    let m = s.rt.block_on(s.client.stat("/m")).unwrap().id;
    let pages = vec![TxRegion { inode: m, pages: vec![(0, bytes::Bytes::from(vec![1u8; PAGE as usize]))] }];
    let ops = [
        MetaOp::Transact { task: None, files: Vec::new(), ns: Vec::new(), regions: pages },
        MetaOp::RegionPagesWritten { id: 1 },
    ];
    let coord: tierpool_net::Pool<tierpool_proto::Coordinator> =
        tierpool_net::Pool::new(pool.addr.clone(), tierpool_net::PoolConfig::with(pool.credentials()));
    for op in ops {
        let req = tierpool_proto::CoordRequest::Meta { op, owner: tierpool_meta::Owner::default() };
        let e = s.rt.block_on(coord.call(&req, &[], true)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
        assert!(e.message.contains("TxCommit") || e.message.contains("coordinator itself"), "{e}");
    }
    assert_eq!(&s.get("/m")[..4], &[0; 4]);
}
