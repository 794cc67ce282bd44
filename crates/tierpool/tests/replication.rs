//! Replication on real processes: workers killed -9 (and the coordinator
//! now and then) round after round while writers and verified readers run,
//! damaged copies on disk, single-copy files lost with a worker. Counted
//! and asserted: acknowledged writes lost, wrong bytes returned, reads that
//! failed while a replica lived: all zero.
//!
//! `TIERPOOL_KILL_ROUNDS=N` runs N rounds instead of the suite's few (the
//! longer run of the docs: `scripts/soak.sh`).

mod common;

use common::{chunk_files, data, Pool};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tierpool_client::{Client, PoolStatus, PutOptions};
use tierpool_types::WorkerId;

const KIB: usize = 1024;
const ROUNDS: usize = 12;

fn replicated(n: usize, mem: &str, disk: &str) -> Pool {
    Pool::start_with(n, mem, disk, &["--replicas", "2", "--dead-after", "2s"])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A seeded xorshift: the same rounds for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn opts() -> PutOptions {
    PutOptions { chunk_size: 128 << 10, ..PutOptions::default() }
}

/// Which of the pool's worker processes registered as worker `id`.
fn id_of(pool: &Pool, i: usize) -> Option<WorkerId> {
    let log = pool.log(&format!("worker-{i}.log"));
    let at = log.rfind("registered as worker w")? + "registered as worker w".len();
    let digits: String = log[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().map(WorkerId)
}

/// Waits until the pool keeps every copy again: no worker down (but those
/// in `dead`), nothing missing, nothing moving.
fn wait_repaired(
    pool: &Pool,
    rt: &tokio::runtime::Runtime,
    c: &Client,
    dead: &[WorkerId],
    within: Duration,
) -> PoolStatus {
    let t = Instant::now();
    loop {
        if let Ok(s) = rt.block_on(c.status()) {
            let r = &s.replication;
            let down_ok =
                r.workers_down.iter().all(|w| dead.contains(w)) && dead.iter().all(|w| r.workers_down.contains(w));
            if down_ok && r.replicas_missing == 0 && !s.migration.active && !r.degraded {
                return s;
            }
            if t.elapsed() > within {
                let log = pool.log("coordinator.log");
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "not repaired within {within:?}: replication {:?}, migration {:?}\ncoordinator log (last lines first):\n{}",
                    s.replication,
                    s.migration,
                    tail.join("\n")
                );
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the coordinator has declared `id` down.
fn wait_down(rt: &tokio::runtime::Runtime, c: &Client, id: WorkerId) {
    let t = Instant::now();
    while !rt.block_on(c.status()).is_ok_and(|s| s.replication.workers_down.contains(&id)) {
        assert!(t.elapsed() < Duration::from_secs(30), "worker {id} never declared down");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Default)]
struct Counts {
    acknowledged: AtomicU64,
    write_failures: AtomicU64,
    reads: AtomicU64,
    wrong: AtomicU64,
    read_failures: AtomicU64,
}

/// A writer of new files and two readers of acknowledged ones until `stop`.
fn traffic(
    rt: &tokio::runtime::Runtime,
    c: &Client,
    files: &Arc<Mutex<BTreeMap<String, (u64, usize)>>>,
    counts: &Arc<Counts>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let (c2, f2, n2, s2) = (c.clone(), files.clone(), counts.clone(), stop.clone());
    tasks.push(rt.spawn(async move {
        let mut i = 0u64;
        while !s2.load(Ordering::Relaxed) {
            // A bounded set of paths, each replaced again and again.
            let (seed, len) = (9_000_000 + i, (4 + (i as usize * 97) % 700) * KIB);
            let path = format!("/w/f{}", i % 48);
            // Not read while it is replaced: readers cannot know which version they get.
            f2.lock().unwrap().remove(&path);
            match c2.put_bytes(&path, data(seed, len).into(), &opts()).await {
                Ok(_) => {
                    f2.lock().unwrap().insert(path, (seed, len));
                    n2.acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    eprintln!("write {path} failed (not acknowledged): {e}");
                    n2.write_failures.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            i += 1;
        }
    }));
    for r in 0..2u64 {
        let (c2, f2, n2, s2) = (c.clone(), files.clone(), counts.clone(), stop.clone());
        tasks.push(rt.spawn(async move {
            let mut rng = Rng(0x9e37_79b9 + r);
            while !s2.load(Ordering::Relaxed) {
                let pick = {
                    let f = f2.lock().unwrap();
                    let n = f.len() as u64;
                    f.iter().nth(rng.below(n.max(1)) as usize).map(|(p, v)| (p.clone(), *v))
                };
                let Some((path, (seed, len))) = pick else { continue };
                let got = c2.get_bytes(&path).await;
                if f2.lock().unwrap().get(&path) != Some(&(seed, len)) {
                    continue; // replaced while it was read: either version may come back
                }
                match got {
                    Ok(got) if got[..] == data(seed, len)[..] => {}
                    Ok(_) => {
                        eprintln!("WRONG BYTES from {path}");
                        n2.wrong.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        eprintln!("read {path} failed: {e}");
                        n2.read_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n2.reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tasks
}

#[test]
fn workers_killed_round_after_round_lose_no_acknowledged_write() {
    let rounds: usize = std::env::var("TIERPOOL_KILL_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(ROUNDS);
    let (mem, disk) = ("8MiB", "256MiB");
    let mut pool = replicated(4, mem, disk);
    let rt = runtime();
    let c = rt.block_on(Client::connect(pool.client_config())).unwrap();
    for d in ["/base", "/w"] {
        rt.block_on(c.mkdir(d, true)).unwrap();
    }
    // Files of mixed sizes at three times the pool's memory (4 x 8 MiB).
    let files: Arc<Mutex<BTreeMap<String, (u64, usize)>>> = Arc::default();
    let mut total = 0;
    let mut i = 0u64;
    while total < 96 << 20 {
        let len = [4 * KIB, 300 * KIB, 1024 * KIB, 3 * 1024 * KIB][i as usize % 4] + i as usize;
        let path = format!("/base/f{i}");
        rt.block_on(c.put_bytes(&path, data(i, len).into(), &opts())).unwrap();
        files.lock().unwrap().insert(path, (i, len));
        total += len;
        i += 1;
    }
    eprintln!("phase: {} files, {} MiB written with 2 copies each", files.lock().unwrap().len(), total >> 20);
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = traffic(&rt, &c, &files, &counts, &stop);
    let mut rng = Rng(0x5eed);
    let started = Instant::now();
    for round in 0..rounds {
        let live: Vec<usize> = (0..pool.workers.len()).filter(|i| pool.workers[*i].child.is_some()).collect();
        let victim = live[rng.below(live.len() as u64) as usize];
        let id = id_of(&pool, victim).expect("the victim registered");
        let with_coordinator = round % 3 == 2;
        eprintln!(
            "round {round}: kill -9 of worker {id} (process {victim}){}",
            if with_coordinator { " and of the coordinator" } else { "" }
        );
        pool.kill_worker(victim);
        if with_coordinator {
            pool.kill_coordinator();
            std::thread::sleep(Duration::from_millis(rng.below(500)));
            pool.start_coordinator();
        }
        wait_down(&rt, &c, id);
        let s = wait_repaired(&pool, &rt, &c, &[id], Duration::from_secs(90));
        eprintln!("round {round}: repaired without worker {id} ({} moves failed so far)", s.migration.moves_failed);
        if rng.below(2) == 0 {
            eprintln!("round {round}: worker {id} restarts on its directory");
            pool.start_worker(victim);
        } else {
            let fresh = pool.add_worker(mem, disk);
            pool.wait_alive(live.len());
            pool.ok(&["worker", "remove", &id.0.to_string()]);
            eprintln!("round {round}: a fresh worker (process {fresh}) takes worker {id}'s place");
        }
        wait_repaired(&pool, &rt, &c, &[], Duration::from_secs(90));
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    eprintln!("phase: every acknowledged file read back");
    let all = files.lock().unwrap().clone();
    let mut lost = 0;
    for (path, (seed, len)) in &all {
        match rt.block_on(c.get_bytes(path)) {
            Ok(got) if got[..] == data(*seed, *len)[..] => {}
            Ok(_) => {
                counts.wrong.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("{path}: {e}");
                lost += 1;
            }
        }
    }
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "{rounds} rounds in {:.0?}: {} files acknowledged during the rounds ({} writes not acknowledged), {} reads, \
         {} wrong, {} failed; {} of {} files lost",
        started.elapsed(),
        n(&counts.acknowledged),
        n(&counts.write_failures),
        n(&counts.reads),
        n(&counts.wrong),
        n(&counts.read_failures),
        lost,
        all.len()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert_eq!(n(&counts.wrong), 0, "wrong bytes returned");
    assert_eq!(n(&counts.read_failures), 0, "reads failed while a replica lived");
    assert!(n(&counts.reads) > 0 && n(&counts.acknowledged) > 0);
}

/// A pool of two workers keeping two copies of `/f` (16 MiB of `seed`),
/// every copy worker 0 keeps on disk damaged by a flipped byte.
fn damaged_on_worker_0(seed: u64) -> (Pool, Vec<u8>) {
    let pool = replicated(2, "4MiB", "64MiB");
    let bytes = data(seed, 16 << 20);
    pool.put("/f", &bytes);
    let files = chunk_files(&pool.workers[0].dir);
    assert!(files.len() >= 3, "worker 0 keeps most of its copies on disk: {files:?}");
    for f in &files {
        let mut b = std::fs::read(f).unwrap();
        let mid = b.len() - (1 << 20);
        b[mid] ^= 0x5a;
        std::fs::write(f, b).unwrap();
    }
    (pool, bytes)
}

#[test]
fn a_damaged_copy_is_read_around_and_written_again_from_the_good_one() {
    let (mut pool, bytes) = damaged_on_worker_0(77);
    // Worker 0 (host0) is this client's nearest: every damaged copy is met.
    let cat = |pool: &Pool| {
        let out = pool.cmd(&["cat", "/f"]).env("TIERPOOL_HOST", "host0").output().unwrap();
        assert!(out.status.success(), "cat: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    assert!(cat(&pool) == bytes, "the good copies are returned");
    assert!(pool.log("worker-0.log").contains("is damaged here, dropped"));
    // The damaged copies were written again before `cat` returned: with
    // the other worker gone, worker 0 alone serves every byte.
    pool.kill_worker(1);
    assert!(cat(&pool) == bytes, "the repaired copies are returned");
}

#[test]
fn a_damaged_copy_met_by_a_read_into_a_buffer_is_read_around_and_written_again() {
    // `read_at` reads whole chunks from the socket straight into the
    // caller's buffer: the same rounds of replicas and repair as above.
    let (mut pool, bytes) = damaged_on_worker_0(78);
    let rt = runtime();
    let mut cfg = pool.client_config();
    cfg.host = "host0".into();
    let c = rt.block_on(Client::connect(cfg)).unwrap();
    let info = rt.block_on(c.stat("/f")).unwrap();
    // Whole chunks into their places, a part of one at each end, and all of it.
    for (offset, len) in [(0usize, bytes.len()), (123_457, 9 << 20), (bytes.len() - 5, 5)] {
        let mut buf = vec![0u8; len];
        let n = rt.block_on(c.read_at("/f", &info, offset as u64, &mut buf)).unwrap();
        assert_eq!(n, len);
        assert!(buf == bytes[offset..offset + len], "bytes {offset}..{} as written", offset + len);
    }
    assert!(pool.log("worker-0.log").contains("is damaged here, dropped"));
    // Written again before the read returned: worker 0 alone serves it all.
    pool.kill_worker(1);
    let mut buf = vec![0u8; bytes.len() + 10];
    let n = rt.block_on(c.read_at("/f", &info, 0, &mut buf)).unwrap();
    assert_eq!(n, bytes.len(), "a read past the end stops at it");
    assert!(buf[..n] == bytes[..], "the repaired copies are returned");
}

/// Small files read at once by many tasks share requests to each worker
/// (`GetChunks`); a damaged copy met in one is asked for alone, so that its
/// worker drops it as it reports it and the reader writes it again.
#[test]
fn damaged_copies_of_small_files_read_many_at_once_are_read_around_and_written_again() {
    let mut pool = replicated(2, "4MiB", "64MiB");
    let rt = runtime();
    let mut cfg = pool.client_config();
    (cfg.host, cfg.coalesce) = ("host0".into(), 4);
    let c = rt.block_on(Client::connect(cfg)).unwrap();
    let files: Vec<Vec<u8>> = (0..200).map(|i| data(300 + i, 40_000)).collect();
    for (i, f) in files.iter().enumerate() {
        rt.block_on(c.put_bytes(&format!("/s{i}"), f.clone().into(), &opts())).unwrap();
    }
    let damaged = chunk_files(&pool.workers[0].dir);
    assert!(damaged.len() >= 50, "worker 0 keeps most of its copies on disk: {}", damaged.len());
    for f in &damaged {
        let mut b = std::fs::read(f).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x5a;
        std::fs::write(f, b).unwrap();
    }
    // Worker 0 (host0) is this client's nearest: every damaged copy is met.
    let read_all = |c: &Client| {
        rt.block_on(async {
            let reads = (0..files.len()).map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.get_bytes(&format!("/s{i}")).await })
            });
            for (i, h) in reads.collect::<Vec<_>>().into_iter().enumerate() {
                let got = h.await.unwrap().unwrap_or_else(|e| panic!("get {i}: {e}"));
                assert!(got == files[i], "file {i}");
            }
        })
    };
    read_all(&c);
    assert!(c.coalesced().chunk_reads > 0, "no read shared a request: {:?}", c.coalesced());
    assert!(pool.log("worker-0.log").contains("is damaged here, dropped"));
    // Written again before the reads returned: worker 0 alone serves them.
    pool.kill_worker(1);
    read_all(&c);
}

#[test]
fn files_keeping_one_copy_lose_what_a_dead_worker_held_and_are_named() {
    let mut pool = replicated(3, "64MiB", "64MiB");
    let rt = runtime();
    let c = rt.block_on(Client::connect(pool.client_config())).unwrap();
    for d in ["/scratch", "/keep"] {
        rt.block_on(c.mkdir(d, true)).unwrap();
    }
    let r = rt.block_on(c.set_replicas("/scratch", 1, false, &mut |_, _| {})).unwrap();
    assert_eq!(r.files, 0, "an empty directory");
    let mut one = Vec::new();
    for i in 0..6u64 {
        let b = data(100 + i, 1 << 20);
        rt.block_on(c.put_bytes(&format!("/scratch/s{i}"), b.clone().into(), &opts())).unwrap();
        rt.block_on(c.put_bytes(&format!("/keep/k{i}"), b.clone().into(), &opts())).unwrap();
        one.push(b);
    }
    assert_eq!(rt.block_on(c.stat("/scratch/s0")).unwrap().replicas, 1);
    assert_eq!(rt.block_on(c.stat("/keep/k0")).unwrap().replicas, 2);
    assert!(rt.block_on(c.fsck("/")).unwrap().is_empty(), "a healthy pool");
    let id = id_of(&pool, 2).unwrap();
    // The chunks of single-copy files whose one copy is on the victim.
    let layout = rt.block_on(c.refresh_layout()).unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..6u64 {
        let info = rt.block_on(c.stat(&format!("/scratch/s{i}"))).unwrap();
        let n = info.chunks.iter().enumerate().filter(|(index, r)| {
            let key = r.key(info.id, *index as u64);
            layout.table.write_targets(key, 1) == vec![id]
        });
        let n = n.count() as u64;
        if n > 0 {
            expected.insert(format!("/scratch/s{i}"), n);
        }
    }
    pool.kill_worker(2);
    wait_down(&rt, &c, id);
    wait_repaired(&pool, &rt, &c, &[id], Duration::from_secs(60));
    let damaged = rt.block_on(c.fsck("/")).unwrap();
    assert!(!expected.is_empty(), "worker {id} held some single copies");
    let found: BTreeMap<String, u64> = damaged.iter().map(|d| (d.path.clone(), d.lost)).collect();
    assert_eq!(found, expected, "exactly the chunks whose one copy was on worker {id} are lost");
    for d in &damaged {
        assert!(d.path.starts_with("/scratch/s"), "only single-copy files lose chunks: {d:?}");
        assert_eq!((d.replicas, d.under), (1, 0));
        assert!(d.lost > 0);
    }
    for (i, bytes) in one.iter().enumerate() {
        let got = rt.block_on(c.get_bytes(&format!("/keep/k{i}"))).unwrap();
        assert!(got == *bytes, "two-copy files are whole");
        let s = rt.block_on(c.get_bytes(&format!("/scratch/s{i}")));
        let named = damaged.iter().any(|d| d.path == format!("/scratch/s{i}"));
        match s {
            Ok(got) => assert!(!named && got == *bytes, "/scratch/s{i}"),
            Err(e) => {
                assert!(named, "/scratch/s{i}: {e}");
                assert!(
                    e.message.starts_with(&format!("/scratch/s{i}: chunk ")) && e.message.contains("is lost"),
                    "{e}"
                );
            }
        }
    }
    // A damaged file can be removed.
    rt.block_on(c.remove(&damaged[0].path, false)).unwrap();
}
