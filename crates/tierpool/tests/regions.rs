//! Regions against a real pool: allocation with the space taken up front,
//! page-exact reads and writes through a small cache, dirty-page write-back
//! counted on the workers, and the CLI's view of regions.

mod common;
use common::{data, Pool, Session};
use tierpool_client::{Region, RegionOptions};
use tierpool_types::ErrorKind;

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

impl Session {
    fn alloc(&self, path: &str, size: u64, chunk: u64) -> tierpool_types::Result<tierpool_client::InodeInfo> {
        let opts = RegionOptions { chunk_size: chunk, ..RegionOptions::default() };
        self.rt.block_on(self.client.alloc_region(path, size, &opts))
    }

    fn open(&self, path: &str, cache: u64) -> Region {
        let info = self.rt.block_on(self.client.open_region(path)).unwrap();
        Region::open(self.client.clone(), self.rt.handle().clone(), path, info, cache).unwrap()
    }

    /// Bytes the workers received for region writes, summed.
    fn worker_bytes_written(&self) -> u64 {
        let st = self.rt.block_on(self.client.status()).unwrap();
        st.workers.iter().map(|w| w.stats.as_ref().map_or(0, |s| s.bytes_written)).sum()
    }
}

#[test]
fn random_reads_and_writes_across_chunks_match_a_model() {
    let pool = Pool::start(3, "8MiB", "64MiB");
    let s = Session::new(&pool);
    let size = 24 * MIB + 1000;
    let info = s.alloc("/r", size, MIB).unwrap();
    assert_eq!(info.kind, tierpool_client::InodeKind::Region);
    let mut model = vec![0u8; size as usize];
    let r = s.open("/r", 3 * MIB);
    let mut x = 0x1234_5678u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..400 {
        let off = next() % size;
        let len = (next() % (3 * PAGE + 17)).min(size - off);
        if i % 3 == 0 {
            assert_eq!(r.read(off, len).unwrap(), &model[off as usize..(off + len) as usize], "read {off}+{len}");
        } else {
            let bytes = data(next(), len as usize);
            r.write(off, &bytes).unwrap();
            model[off as usize..(off + len) as usize].copy_from_slice(&bytes);
        }
    }
    r.close().unwrap();
    // Another handle sees every write after close.
    let r2 = s.rt.block_on(s.client.region("/r", 2 * MIB)).unwrap();
    let mut back = vec![0u8; size as usize];
    r2.read_into(0, &mut back).unwrap();
    assert!(back == model, "the region holds exactly what was written");
    assert!(r2.stats().bytes_fetched >= size, "{:?}", r2.stats());
    let e = r2.write(size - 1, b"ab").unwrap_err();
    assert_eq!(e.message, format!("/r: bytes {}..{} are outside the region of {size} bytes", size - 1, size + 1));
    r2.free().unwrap();
    assert_eq!(pool.err(&["stat", "/r"]), "tierpool: /r: no such file or directory");
}

#[test]
fn only_dirty_pages_travel_to_the_workers() {
    let pool = Pool::start(2, "64MiB", "64MiB");
    let s = Session::new(&pool);
    s.alloc("/w", 32 * MIB, 4 * MIB).unwrap();
    let before = s.worker_bytes_written();
    let r = s.open("/w", 32 * MIB);
    let (mut pages, mut offsets) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    let mut x = 99u64;
    for _ in 0..200 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let at = (x >> 16) % (32 * MIB);
        r.write(at, &[7]).unwrap();
        pages.insert(at / PAGE);
        offsets.insert(at);
    }
    r.flush().unwrap();
    let st = r.stats();
    assert_eq!(st.bytes_written_back, pages.len() as u64 * PAGE, "{st:?}");
    assert_eq!(s.worker_bytes_written() - before, st.bytes_written_back, "the workers got exactly the dirty pages");
    assert!(st.bytes_written_back * 30 < 32 * MIB, "far less than the chunks they lie in");
    r.close().unwrap();
    let out = pool.cli(&["cat", "/w"]);
    assert!(out.status.success());
    let ones = out.stdout.iter().filter(|b| **b == 7).count();
    assert_eq!((out.stdout.len() as u64, ones), (32 * MIB, offsets.len()));
}

#[test]
fn allocation_fails_at_once_when_the_pool_cannot_hold_it() {
    let pool = Pool::start(2, "4MiB", "8MiB");
    let s = Session::new(&pool);
    let e = s.alloc("/big", 32 * MIB, MIB).unwrap_err();
    assert_eq!(e.kind, ErrorKind::PoolFull);
    assert!(e.message.starts_with("/big: pool full: cannot reserve 32MiB: "), "{}", e.message);
    let st = pool.fresh_status();
    for w in st["workers"].as_array().unwrap() {
        assert_eq!((&w["mem"]["used"], &w["disk"]["used"]), (&0.into(), &0.into()), "nothing is left behind: {st}");
    }
    let err = pool.err(&["region", "create", "/big", "32MiB", "--chunk-size", "1MiB"]);
    assert!(err.starts_with("tierpool: /big: pool full: cannot reserve 32MiB"), "{err}");
    // What fits is reserved whole.
    assert_eq!(
        pool.ok(&["region", "create", "/fits", "8MiB", "--chunk-size", "1MiB"]),
        "/fits: region of 8MiB (8 chunks) reserved\n"
    );
    assert_eq!(s.alloc("/fits", MIB, MIB).unwrap_err().kind, ErrorKind::AlreadyExists);
}

#[test]
fn the_cli_shows_and_removes_regions() {
    let pool = Pool::start(1, "16MiB", "16MiB");
    let s = Session::new(&pool);
    let r = s.rt.block_on(s.client.alloc("/a", 5 * PAGE, &RegionOptions::default(), 8 * MIB)).unwrap();
    r.write(PAGE - 1, b"xy").unwrap();
    r.close().unwrap();
    assert_eq!(&pool.get("/a")[PAGE as usize - 2..PAGE as usize + 2], b"\0xy\0");
    pool.ok(&["mkdir", "/m"]);
    pool.ok(&["region", "create", "/m/r", "3MiB", "--chunk-size", "1MiB", "--priority", "5"]);
    let st: serde_json::Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/m/r"])).unwrap();
    assert_eq!(
        (st["kind"].as_str(), st["size"].as_u64(), st["chunks"].as_u64()),
        (Some("region"), Some(3 * MIB), Some(3))
    );
    assert_eq!(st["priority"].as_u64(), Some(5));
    assert!(pool.ok(&["ls", "-l", "/m"]).starts_with("r644      3145728 p5 "));
    assert!(pool.get("/m/r") == vec![0u8; 3 * MIB as usize]);
    pool.ok(&["mv", "/m/r", "/m/r2"]);
    pool.ok(&["rm", "/m/r2"]);
    assert_eq!(pool.ok(&["ls", "/m"]), "");
    let e = pool.err(&["region", "create", "/m/x", "12XB"]);
    assert!(e.contains("invalid size '12XB'"), "{e}");
}
