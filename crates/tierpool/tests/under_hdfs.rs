//! An HDFS directory attached to a pool of real processes, against a real
//! NameNode and DataNode (Hadoop's minicluster): lazy byte-exact reads,
//! load and free, writes, directories, renames of trees and removals
//! through to HDFS, an external change refused as stale until `sync-meta`,
//! and a `back` attachment that keeps writes while the NameNode is down and
//! delivers them when it returns.

mod common;
#[path = "../../tierpool-under/tests/common/hdfs_server.rs"]
mod hdfs_server;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{data, json, Pool};
use hdfs_server::HdfsServer;
use tierpool_under::UnderStore;

const MIB: usize = 1 << 20;

/// The test's own view of HDFS, beside the pool's.
struct Hdfs {
    store: UnderStore,
    rt: tokio::runtime::Runtime,
}

impl Hdfs {
    fn new(uri: &str) -> Hdfs {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let store = UnderStore::open(uri, &BTreeMap::new()).unwrap();
        Hdfs { store, rt }
    }

    fn write(&self, path: &str, bytes: &[u8]) {
        let piece = Bytes::copy_from_slice(bytes);
        self.rt.block_on(self.store.write(path, vec![piece])).unwrap();
    }

    /// The file's bytes, `None` if absent.
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.try_read(path).unwrap()
    }

    /// [`read`](Self::read), or the error of a file changing while it is
    /// read (the pool may be writing it).
    fn try_read(&self, path: &str) -> tierpool_types::Result<Option<Vec<u8>>> {
        let Some(found) = self.rt.block_on(self.store.stat(path))? else { return Ok(None) };
        Ok(Some(self.rt.block_on(self.store.read(path, 0, found.size, None))?.to_vec()))
    }

    fn paths(&self) -> Vec<String> {
        self.rt.block_on(self.store.walk()).unwrap().into_iter().map(|e| e.path).collect()
    }

    fn wait_for(&self, path: &str, want: &[u8]) {
        let t = Instant::now();
        while self.try_read(path).ok().flatten().as_deref() != Some(want) {
            assert!(t.elapsed() < Duration::from_secs(60), "{path} never held the {} bytes", want.len());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn an_hdfs_directory_attached_reads_lazily_and_writes_through_and_back() {
    let mut server = HdfsServer::start();
    let lake = Hdfs::new(&server.uri("lake"));
    let big = data(5, 9 * MIB + 321);
    lake.write("day1/part-0.bin", &big);
    lake.write("readme.txt", b"the lake\n");

    let pool = Pool::start_with(2, "64MiB", "256MiB", &["--write-back-every", "100ms"]);
    let done = json(&pool.ok(&["attach", &server.uri("lake"), "/lake", "--json"]));
    assert_eq!((done["files"].as_u64(), done["dirs"].as_u64()), (Some(2), Some(1)));
    let list = json(&pool.ok(&["attachments", "--json"]));
    assert_eq!(list[0]["uri"].as_str(), Some(server.uri("lake").as_str()));
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (0, 3, false), "listing copies nothing");
    assert_eq!(pool.get("/lake/day1/part-0.bin"), big);
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (3, 0, false));
    pool.ok(&["free", "-r", "/lake"]);
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (0, 3, false));
    pool.ok(&["load", "-r", "/lake/day1"]);
    assert_eq!(pool.under_chunks("/lake/day1/part-0.bin"), (3, 0, false));

    // Through: files, directories, a rename of a tree, a removal reach HDFS before they return.
    let new = data(6, 3 * MIB + 1);
    pool.ok(&["mkdir", "/lake/day2"]);
    pool.put("/lake/day2/part-0.bin", &new);
    assert_eq!(lake.read("day2/part-0.bin").as_deref(), Some(&new[..]));
    pool.ok(&["mv", "/lake/day2", "/lake/archive"]);
    pool.ok(&["rm", "/lake/readme.txt"]);
    assert_eq!(lake.paths(), vec!["archive", "archive/part-0.bin", "day1", "day1/part-0.bin"]);
    assert_eq!(pool.get("/lake/archive/part-0.bin"), new);

    // Changed behind the pool's back: refused as stale, until sync-meta adopts it.
    std::thread::sleep(Duration::from_millis(5));
    lake.write("day1/part-0.bin", b"rewritten below");
    let e = pool.err(&["cat", "/lake/day1/part-0.bin"]);
    assert!(e.contains("sync-meta"), "{e}");
    pool.ok(&["sync-meta", "/lake"]);
    assert_eq!(pool.get("/lake/day1/part-0.bin"), b"rewritten below");

    // Back: acknowledged from the pool, written below in the background;
    // kept while the NameNode is down and delivered when it returns.
    let wh = Hdfs::new(&server.uri("wh"));
    wh.write(".keep", b"");
    pool.ok(&["attach", &server.uri("wh"), "/wh", "--mode", "back"]);
    pool.ok(&["mkdir", "/wh/t"]);
    let first = data(7, 2 * MIB);
    pool.put("/wh/t/first.bin", &first);
    wh.wait_for("t/first.bin", &first);
    server.stop();
    let second = data(8, MIB + 17);
    pool.put("/wh/t/second.bin", &second);
    let t = Instant::now();
    while !pool.log("coordinator.log").contains(&format!("not written to {}", server.uri("wh"))) {
        assert!(t.elapsed() < Duration::from_secs(30), "{}", pool.log("coordinator.log"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let e = pool.err(&["sync", "/wh"]);
    assert!(e.contains(&server.uri("wh")), "{e}");
    assert_eq!(pool.get("/wh/t/second.bin"), second, "the pool serves it meanwhile");
    assert_eq!(pool.get("/lake/archive/part-0.bin"), new, "and what it holds of other files");
    server.restart();
    let wh = Hdfs::new(&server.uri("wh"));
    wh.wait_for("t/second.bin", &second);
    let t = Instant::now();
    while pool.fresh_status()["attachments"][1]["dirty_files"].as_u64() != Some(0) {
        assert!(t.elapsed() < Duration::from_secs(30), "still dirty: {}", pool.fresh_status());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(wh.read("t/first.bin").as_deref(), Some(&first[..]));
}
