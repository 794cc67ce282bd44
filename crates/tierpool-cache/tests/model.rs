//! The page cache against a plain byte-vector model of the region, over a
//! backend that records every byte it moves.

use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use tierpool_cache::{Backend, CacheError, Geometry, PageCache, PAGE_SIZE};

#[derive(Debug)]
struct Err(String);

impl From<CacheError> for Err {
    fn from(e: CacheError) -> Err {
        Err(e.to_string())
    }
}

/// The pool side: one byte vector per chunk, counting what moves.
#[derive(Default)]
struct Recorder {
    geom: Option<Geometry>,
    chunks: HashMap<u64, Vec<u8>>,
    fetched: u64,
    fetch_calls: u64,
    written: u64,
    /// Region offsets of the pages each write-back touched.
    written_pages: Vec<u64>,
}

impl Recorder {
    fn new(geom: Geometry) -> Recorder {
        Recorder { geom: Some(geom), ..Default::default() }
    }

    fn chunk(&mut self, chunk: u64) -> &mut Vec<u8> {
        let len = self.geom.unwrap().chunk_len(chunk) as usize;
        self.chunks.entry(chunk).or_insert_with(|| vec![0; len])
    }

    fn region(&mut self) -> Vec<u8> {
        let g = self.geom.unwrap();
        (0..g.chunks()).flat_map(|c| self.chunk(c).clone()).collect()
    }
}

impl Backend for Recorder {
    type Error = Err;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> Result<Vec<u8>, Err> {
        self.fetched += len;
        self.fetch_calls += 1;
        let c = self.chunk(chunk);
        Ok(c[offset as usize..(offset + len) as usize].to_vec())
    }

    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> Result<(), Err> {
        assert!(offset.is_multiple_of(PAGE_SIZE), "write-back starts on a page");
        let cs = self.geom.unwrap().chunk_size;
        self.written += data.len() as u64;
        let mut at = offset;
        while at < offset + data.len() as u64 {
            self.written_pages.push(chunk * cs + at);
            at += PAGE_SIZE;
        }
        let c = self.chunk(chunk);
        c[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Op {
    Read(u64, u64),
    Write(u64, u64, u8),
    Flush,
}

fn ops(size: u64) -> impl Strategy<Value = Vec<Op>> {
    let range = (0..size).prop_flat_map(move |off| (Just(off), 0..=(size - off).min(3 * PAGE_SIZE + 7)));
    let op = prop_oneof![
        4 => range.clone().prop_map(|(o, l)| Op::Read(o, l)),
        4 => (range, any::<u8>()).prop_map(|((o, l), b)| Op::Write(o, l, b)),
        1 => Just(Op::Flush),
    ];
    prop::collection::vec(op, 1..80)
}

fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn behaves_like_a_byte_vector(
        (chunk_pages, size, cache_chunks, ops) in (1u64..5, 1u64..6, 0u64..PAGE_SIZE * 2, 1u64..4)
            .prop_flat_map(|(p, c, t, k)| {
                let size = p * PAGE_SIZE * c + t;
                (Just(p), Just(size), Just(k), ops(size))
            }),
    ) {
        let cs = chunk_pages * PAGE_SIZE;
        let geom = Geometry::new(size, cs);
        let mut cache = PageCache::new(geom, cache_chunks * cs, 4 * PAGE_SIZE, Recorder::new(geom)).unwrap();
        let mut model = vec![0u8; size as usize];
        let mut dirty: BTreeSet<u64> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Read(o, l) => {
                    let mut buf = vec![0xee; l as usize];
                    cache.read(o, &mut buf).unwrap();
                    prop_assert_eq!(&buf[..], &model[o as usize..(o + l) as usize], "read {}+{}", o, l);
                }
                Op::Write(o, l, b) => {
                    let data = pattern(l, b);
                    model[o as usize..(o + l) as usize].copy_from_slice(&data);
                    // One chunk at a time, so that the model can tell pages
                    // sent back to make room (other chunks) from pages dirtied.
                    for (chunk, r) in geom.split(o, l) {
                        let at = chunk * cs + r.start;
                        cache.write(at, &data[(at - o) as usize..(at - o + r.end - r.start) as usize]).unwrap();
                        for p in cache.backend_mut().written_pages.drain(..) {
                            prop_assert!(dirty.remove(&p), "page at {} sent back while clean", p);
                        }
                        let mut p = at / PAGE_SIZE * PAGE_SIZE;
                        while p < at + r.end - r.start {
                            dirty.insert(p);
                            p += PAGE_SIZE;
                        }
                    }
                }
                Op::Flush => {
                    cache.flush().unwrap();
                    prop_assert_eq!(cache.state().dirty_pages(), 0);
                    prop_assert!(cache.backend_mut().region() == model, "after a flush the pool holds every write");
                }
            }
            // Only pages written since their last write-back are ever sent.
            for p in cache.backend_mut().written_pages.drain(..) {
                prop_assert!(dirty.remove(&p), "page at {} sent back while clean", p);
            }
            let (st, rec) = (cache.stats(), cache.backend());
            prop_assert!(cache.state().resident_bytes() <= cache.state().capacity_bytes());
            prop_assert_eq!(st.bytes_fetched, rec.fetched);
            prop_assert_eq!(st.bytes_written_back, rec.written);
            prop_assert_eq!(cache.state().dirty_pages(), dirty.len() as u64);
        }
        cache.flush().unwrap();
        prop_assert!(cache.backend_mut().region() == model);
    }
}

#[test]
fn single_byte_writes_send_back_pages_not_chunks() {
    let (cs, chunks) = (1 << 20, 16u64);
    let geom = Geometry::new(cs * chunks, cs);
    // Room for two chunks: most writes evict a chunk with one dirty page.
    let mut cache = PageCache::new(geom, 2 * cs, 0, Recorder::new(geom)).unwrap();
    let mut x = 12345u64;
    let mut pages = BTreeSet::new();
    for _ in 0..1000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let at = (x >> 16) % geom.size;
        cache.write(at, &[1]).unwrap();
        pages.insert(at / PAGE_SIZE);
    }
    cache.flush().unwrap();
    let st = cache.stats();
    // Every one of the 16 chunks went back at least once, whole chunks would be 5x more bytes.
    assert!(st.chunks_written_back >= 16, "{st:?}");
    assert!(st.bytes_written_back * 5 < st.chunks_written_back * cs, "{st:?}");
    // A page goes back once per time it was dirtied and then evicted or flushed.
    assert_eq!(st.bytes_written_back, cache.backend().written);
    assert!(st.bytes_written_back >= pages.len() as u64 * PAGE_SIZE);
    assert!(st.bytes_written_back <= 1000 * PAGE_SIZE);
    assert!(st.bytes_written_back * 200 < 1000 * cs, "{} bytes for 1000 one-byte writes", st.bytes_written_back);
    // Each miss fetched just the page it wrote into.
    assert_eq!(st.bytes_fetched, st.cache_misses * PAGE_SIZE);
}

#[test]
fn sequential_reads_fetch_ahead_and_random_reads_do_not() {
    let cs = 1 << 20;
    let geom = Geometry::new(8 * cs, cs);
    let mut seq = PageCache::new(geom, 2 * cs, 64 * PAGE_SIZE, Recorder::new(geom)).unwrap();
    let mut buf = vec![0; PAGE_SIZE as usize];
    for i in 0..geom.size / PAGE_SIZE {
        seq.read(i * PAGE_SIZE, &mut buf).unwrap();
    }
    let pages = geom.size / PAGE_SIZE;
    assert_eq!(seq.backend().fetched, geom.size, "every page fetched once");
    assert!(seq.backend().fetch_calls * 20 < pages, "{} fetches for {pages} pages", seq.backend().fetch_calls);
    assert!(seq.stats().cache_hits > seq.stats().cache_misses * 20, "{:?}", seq.stats());

    let mut rnd = PageCache::new(geom, 2 * cs, 64 * PAGE_SIZE, Recorder::new(geom)).unwrap();
    for i in [7u64, 900, 3, 1500, 60, 1999, 12, 1024] {
        rnd.read(i * PAGE_SIZE + 10, &mut buf[..100]).unwrap();
    }
    assert_eq!(rnd.backend().fetched, 8 * PAGE_SIZE, "one page per random read");
}

#[test]
fn whole_page_writes_fetch_nothing() {
    let geom = Geometry::new(64 * PAGE_SIZE, 16 * PAGE_SIZE);
    let mut c = PageCache::new(geom, geom.size, 0, Recorder::new(geom)).unwrap();
    c.write(PAGE_SIZE, &vec![9; 3 * PAGE_SIZE as usize]).unwrap();
    assert_eq!(c.stats().bytes_fetched, 0);
    c.write(10, &[1, 2]).unwrap();
    assert_eq!(c.stats().bytes_fetched, PAGE_SIZE, "a partial page is read before it is modified");
}

#[test]
fn errors_are_clear() {
    let geom = Geometry::new(10 * PAGE_SIZE, 4 * PAGE_SIZE);
    let e = PageCache::new(geom, PAGE_SIZE, 0, Recorder::new(geom)).err().unwrap();
    assert_eq!(e.to_string(), "a cache of 4096 bytes cannot hold one chunk of 16384 bytes");
    let mut c = PageCache::new(geom, geom.size, 0, Recorder::new(geom)).unwrap();
    let e = c.read(10 * PAGE_SIZE - 1, &mut [0, 0]).unwrap_err();
    assert_eq!(e.0, "bytes 40959..40961 are outside the region of 40960 bytes");
    assert_eq!(
        c.write(10 * PAGE_SIZE + 1, &[]).unwrap_err().0,
        "bytes 40961..40961 are outside the region of 40960 bytes"
    );
}

#[test]
fn writes_across_chunks_reach_the_pool() {
    let geom = Geometry::new(3 * 2 * PAGE_SIZE + 5, 2 * PAGE_SIZE);
    let mut c = PageCache::new(geom, 2 * PAGE_SIZE, 0, Recorder::new(geom)).unwrap();
    let data = pattern(geom.size - 3, 7);
    c.write(3, &data).unwrap();
    let mut back = vec![0; data.len()];
    c.read(3, &mut back).unwrap();
    assert!(back == data);
    c.flush().unwrap();
    let mut want = vec![0, 0, 0];
    want.extend_from_slice(&data);
    assert!(c.backend_mut().region() == want);
}
