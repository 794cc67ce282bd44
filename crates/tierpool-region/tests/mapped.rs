//! A mapped region over an in-memory pool: bytes, dirty-page write-back and
//! the bound on resident memory, through real page faults.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tierpool_region::{Backend, CacheError, Geometry, MappedRegion, PAGE_SIZE};

#[derive(Debug)]
struct PoolErr(String);

impl std::fmt::Display for PoolErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<CacheError> for PoolErr {
    fn from(e: CacheError) -> PoolErr {
        PoolErr(e.to_string())
    }
}

#[derive(Default)]
struct Pool {
    chunks: HashMap<u64, Vec<u8>>,
    fetched: u64,
    written: u64,
    written_pages: Vec<u64>,
    fail_fetches: bool,
}

#[derive(Clone)]
struct Mem {
    geom: Geometry,
    pool: Arc<Mutex<Pool>>,
}

impl Mem {
    fn new(geom: Geometry) -> Mem {
        Mem { geom, pool: Arc::default() }
    }

    fn region(&self) -> Vec<u8> {
        let mut p = self.pool.lock().unwrap();
        (0..self.geom.chunks())
            .flat_map(|c| p.chunks.entry(c).or_insert_with(|| vec![0; self.geom.chunk_len(c) as usize]).clone())
            .collect()
    }
}

impl Backend for Mem {
    type Error = PoolErr;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, PoolErr> {
        let mut p = self.pool.lock().unwrap();
        if p.fail_fetches {
            return Err(PoolErr(format!("chunk {chunk} is unavailable")));
        }
        p.fetched += len;
        let clen = self.geom.chunk_len(chunk) as usize;
        let c = p.chunks.entry(chunk).or_insert_with(|| vec![0; clen]);
        Ok(c[offset as usize..(offset + len) as usize].to_vec())
    }

    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> Result<(), PoolErr> {
        let mut p = self.pool.lock().unwrap();
        p.written += data.len() as u64;
        for i in (0..data.len() as u64).step_by(PAGE_SIZE as usize) {
            p.written_pages.push(chunk * self.geom.chunk_size + offset + i);
        }
        let clen = self.geom.chunk_len(chunk) as usize;
        let c = p.chunks.entry(chunk).or_insert_with(|| vec![0; clen]);
        c[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// Pages of the mapping resident in memory now, by `mincore(2)`.
fn resident_pages(ptr: *mut u8, len: usize) -> usize {
    let pages = len.div_ceil(PAGE_SIZE as usize);
    let mut v = vec![0u8; pages];
    // SAFETY: `ptr..ptr+len` is one mapping; `v` has one byte per page.
    let r = unsafe { libc::mincore(ptr.cast(), len, v.as_mut_ptr()) };
    assert_eq!(r, 0);
    v.iter().filter(|b| **b & 1 != 0).count()
}

fn value(i: usize) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8
}

const MIB: u64 = 1 << 20;

#[test]
fn larger_than_the_cache_round_trips_within_the_cache() {
    let geom = Geometry::new(32 * MIB + 12345, MIB);
    let mem = Mem::new(geom);
    let mut r = MappedRegion::new(geom, 4 * MIB, 256 << 10, mem.clone()).unwrap();
    let mut max_resident = 0;
    {
        let s = r.as_mut_slice();
        let (ptr, len) = (s.as_mut_ptr(), s.len());
        for (i, b) in s.iter_mut().enumerate() {
            *b = value(i);
            if i % (1 << 20) == 0 {
                max_resident = max_resident.max(resident_pages(ptr, len));
            }
        }
    }
    r.flush().unwrap();
    assert!(max_resident as u64 * PAGE_SIZE <= 4 * MIB, "{max_resident} pages resident");
    let want: Vec<u8> = (0..geom.size as usize).map(value).collect();
    assert!(mem.region() == want, "the pool holds every byte written");
    // Read back through faults, in a different order.
    let s = r.as_slice();
    for i in (0..s.len()).rev().step_by(4093) {
        assert_eq!(s[i], value(i), "byte {i}");
    }
    assert!(r.resident_bytes() <= 4 * MIB);
    let st = r.stats();
    assert!(st.cache_misses > 0 && st.bytes_fetched > 0, "{st:?}");
}

#[test]
fn only_dirty_pages_are_written_back() {
    let geom = Geometry::new(64 * MIB, 4 * MIB);
    let mem = Mem::new(geom);
    let mut r = MappedRegion::new(geom, geom.size, 0, mem.clone()).unwrap();
    let mut pages = BTreeSet::new();
    let mut x = 99u64;
    {
        let s = r.as_mut_slice();
        for _ in 0..5000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = ((x >> 20) % geom.size) as usize;
            s[at] = 1;
            pages.insert(at as u64 / PAGE_SIZE);
        }
    }
    r.flush().unwrap();
    let st = r.stats();
    assert_eq!(st.bytes_written_back, pages.len() as u64 * PAGE_SIZE);
    assert_eq!(st.bytes_fetched, pages.len() as u64 * PAGE_SIZE, "one page fetched per page touched");
    let p = mem.pool.lock().unwrap();
    let sent: BTreeSet<u64> = p.written_pages.iter().map(|o| o / PAGE_SIZE).collect();
    assert_eq!(sent, pages);
    drop(p);
    // A second flush has nothing to send; reads do not dirty.
    let sum: u64 = r.as_slice().iter().step_by(4096).map(|&b| u64::from(b)).sum();
    assert!(sum <= pages.len() as u64);
    r.flush().unwrap();
    assert_eq!(r.stats().bytes_written_back, pages.len() as u64 * PAGE_SIZE);
}

#[test]
fn threads_fault_in_parallel() {
    let geom = Geometry::new(16 * MIB, MIB);
    let mem = Mem::new(geom);
    let mut r = MappedRegion::new(geom, 4 * MIB, 128 << 10, mem.clone()).unwrap();
    let s = r.as_mut_slice();
    let (a, b) = s.split_at_mut(s.len() / 2);
    std::thread::scope(|sc| {
        sc.spawn(|| a.iter_mut().enumerate().for_each(|(i, v)| *v = value(i)));
        sc.spawn(|| b.iter_mut().enumerate().for_each(|(i, v)| *v = value(i + 8 * MIB as usize)));
    });
    r.flush().unwrap();
    let want: Vec<u8> = (0..geom.size as usize).map(value).collect();
    assert!(mem.region() == want);
}

#[test]
fn existing_pool_contents_appear_in_memory() {
    let geom = Geometry::new(3 * MIB, MIB);
    let mem = Mem::new(geom);
    mem.pool.lock().unwrap().chunks.insert(1, (0..MIB as usize).map(value).collect());
    let r = MappedRegion::new(geom, MIB, 0, mem.clone()).unwrap();
    let s = r.as_slice();
    assert_eq!(s[0], 0);
    assert!(s[MIB as usize..2 * MIB as usize].iter().enumerate().all(|(i, &b)| b == value(i)));
    assert_eq!(s[3 * MIB as usize - 1], 0);
}

/// Run in a child process by `a_failed_fetch_is_sigbus_with_a_reason`.
#[test]
fn fetch_failure_child() {
    if std::env::var_os("TIERPOOL_REGION_CHILD").is_none() {
        return;
    }
    let geom = Geometry::new(4 * MIB, MIB);
    let mem = Mem::new(geom);
    mem.pool.lock().unwrap().fail_fetches = true;
    let r = MappedRegion::new(geom, MIB, 0, mem).unwrap();
    let b = unsafe { std::ptr::read_volatile(r.as_ptr().add(MIB as usize + 5)) };
    println!("read {b}: not reached");
}

#[test]
fn a_failed_fetch_is_sigbus_with_a_reason() {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fetch_failure_child", "--nocapture", "--test-threads=1"])
        .env("TIERPOOL_REGION_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{err}");
    assert!(
        err.contains("tierpool: region page at offset 1048576 could not be provided: chunk 1 is unavailable"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("not reached"));
}
