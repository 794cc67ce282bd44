//! The cost of the paging mechanism itself, with the pool replaced by memory:
//! how fast a region fills by page faults, sequentially and at random, next to
//! plain `memcpy`. Prints JSON.
//!
//!     cargo run --release -p tierpool-region --example fault_bench [-- SIZE_MIB]

use std::collections::HashMap;
use std::time::Instant;
use tierpool_region::{Backend, CacheError, Geometry, MappedRegion, PAGE_SIZE};

#[derive(Debug)]
struct E(String);

impl std::fmt::Display for E {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<CacheError> for E {
    fn from(e: CacheError) -> E {
        E(e.to_string())
    }
}

/// Chunks held in this process: the fastest pool there could be.
struct Memory {
    chunks: HashMap<u64, Vec<u8>>,
    chunk_size: u64,
}

impl Backend for Memory {
    type Error = E;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, E> {
        let cs = self.chunk_size as usize;
        let c = self.chunks.entry(chunk).or_insert_with(|| vec![7; cs]);
        Ok(c[offset as usize..(offset + len) as usize].to_vec())
    }

    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> Result<(), E> {
        let cs = self.chunk_size as usize;
        let c = self.chunks.entry(chunk).or_insert_with(|| vec![7; cs]);
        c[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
}

fn region(size: u64, cache: u64, readahead: u64) -> MappedRegion<Memory> {
    let geom = Geometry::new(size, 4 << 20);
    MappedRegion::new(geom, cache, readahead, Memory { chunks: HashMap::new(), chunk_size: geom.chunk_size }).unwrap()
}

fn main() {
    let mib: u64 = std::env::args().nth(1).map_or(1024, |s| s.parse().expect("SIZE_MIB"));
    let size = mib << 20;
    let mut out = serde_like::Obj::default();

    let src = vec![1u8; size as usize];
    let mut dst = vec![0u8; size as usize];
    dst.copy_from_slice(&src); // fault the destination in first
    let t = Instant::now();
    dst.copy_from_slice(&src);
    out.num("memcpy_mb_per_sec", size as f64 / t.elapsed().as_secs_f64() / 1e6);
    drop((src, dst));

    for (name, readahead) in [("sequential_read_mb_per_sec", 1 << 20), ("sequential_read_no_readahead_mb_per_sec", 0)] {
        let r = region(size, size, readahead);
        let t = Instant::now();
        let sum: u64 = r.as_slice().iter().step_by(PAGE_SIZE as usize).map(|&b| u64::from(b)).sum();
        out.num(name, size as f64 / t.elapsed().as_secs_f64() / 1e6);
        out.num(&name.replace("mb_per_sec", "faults"), r.stats().cache_misses as f64);
        assert_eq!(sum, 7 * (size / PAGE_SIZE));
    }

    let pages = size / PAGE_SIZE;
    let r = region(size, size, 0);
    let mut x = 1u64;
    let t = Instant::now();
    let n = pages.min(100_000);
    for _ in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let p = (x >> 20) % pages;
        // SAFETY: inside the mapping.
        unsafe { std::ptr::read_volatile(r.as_ptr().add((p * PAGE_SIZE) as usize)) };
    }
    out.num("random_page_faults_per_sec", n as f64 / t.elapsed().as_secs_f64());

    let mut r = region(size, 64 << 20, 1 << 20);
    let t = Instant::now();
    r.as_mut_slice().iter_mut().step_by(64).for_each(|b| *b = 3);
    r.flush().unwrap();
    let st = r.stats();
    out.num("sequential_write_64MiB_cache_mb_per_sec", size as f64 / t.elapsed().as_secs_f64() / 1e6);
    out.num("bytes_written_back", st.bytes_written_back as f64);
    out.num("region_mib", mib as f64);
    println!("{}", out.finish());
}

/// A tiny JSON object writer (numbers only), to keep this example dependency-free.
mod serde_like {
    #[derive(Default)]
    pub struct Obj(Vec<String>);

    impl Obj {
        pub fn num(&mut self, k: &str, v: f64) {
            self.0.push(format!("\"{k}\": {v:.1}"));
        }

        pub fn finish(self) -> String {
            format!("{{{}}}", self.0.join(", "))
        }
    }
}
