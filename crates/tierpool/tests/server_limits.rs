//! The memory-hog repro against real processes. Peers that claim huge
//! frames and send most of them used to drive a server's memory (six
//! claiming 256 MiB took the coordinator from 10 MiB to 1.5 GiB resident).
//! Now, while they are connected, each server stays under
//!
//!   BOUND = the default budget (256 MiB) + 64 MiB for the process itself
//!
//! (about 10 MiB at rest: runtime, metadata, the worker's tiers), exactly
//! as many hogs are read whole as the shared budget holds, the rest wait,
//! and an ordinary `put`/`cat` through the CLI works. Its small file fits
//! a connection's allowance, so it is not queued behind the hogs (a bulk
//! put would wait for them: see tierpool-net's tests).

mod common;

use common::{data, resident, Pool};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierpool_net::{Limits, ALLOWANCE};
use tierpool_proto::frame::{FrameHeader, KIND_COORD_REQUEST, KIND_WORKER_REQUEST};
use tierpool_proto::WorkerRequest;
use tierpool_types::{ChunkAttrs, ChunkKey, InodeId};

const MIB: u64 = 1 << 20;

fn bound(l: &Limits) -> u64 {
    l.budget.0 + 64 * MIB
}

/// Frames that fit the shared budget at once, each reserving all of its
/// length beyond its connection's allowance.
fn frames_read_whole(l: &Limits, frame_len: u64) -> usize {
    let shared = l.budget.0 - l.max_connections as u64 * ALLOWANCE;
    (shared / (frame_len - ALLOWANCE)) as usize
}

/// A raw peer sending a frame header and message, then `send` bytes of
/// body (not zeros), from its own thread.
struct Hog {
    control: TcpStream,
    thread: JoinHandle<(u64, Option<std::io::Error>)>,
}

fn hog(pool: &Pool, addr: &str, fh: FrameHeader, msg: &[u8], send: u64, whole: &Arc<AtomicUsize>) -> Hog {
    let mut s = pool.raw(addr);
    let control = s.try_clone().unwrap();
    let mut head = fh.encode().to_vec();
    head.extend_from_slice(msg);
    let whole = whole.clone();
    let thread = std::thread::spawn(move || {
        let block = data(fh.header_len as u64, MIB as usize);
        if let Err(e) = s.write_all(&head) {
            return (0, Some(e));
        }
        let mut sent = 0;
        while sent < send {
            let n = (send - sent).min(MIB) as usize;
            if let Err(e) = s.write_all(&block[..n]) {
                return (sent, Some(e));
            }
            sent += n as u64;
        }
        whole.fetch_add(1, Ordering::SeqCst);
        (sent, None)
    });
    Hog { control, thread }
}

impl Hog {
    /// Whether the server still has the connection open.
    fn connected(&self) -> bool {
        self.control.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut b = [0u8; 1];
        match self.control.peek(&mut b) {
            Err(e) => matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            // Closed (0 bytes), or an answer, which a frame never whole cannot have.
            Ok(_) => false,
        }
    }

    fn close(self) {
        let _ = self.control.shutdown(Shutdown::Both);
        self.thread.join().unwrap();
    }
}

/// The most resident memory of each process in `pids`, sampled until stopped.
struct Peak {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<u64>>,
}

impl Peak {
    fn start(pids: &[u32]) -> Peak {
        let (stop, pids) = (Arc::new(AtomicBool::new(false)), pids.to_vec());
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut most = vec![0; pids.len()];
            while !flag.load(Ordering::SeqCst) {
                for (m, pid) in most.iter_mut().zip(&pids) {
                    *m = (*m).max(resident(*pid));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        });
        Peak { stop, thread }
    }

    fn stop(self) -> Vec<u64> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

fn round_trip(pool: &Pool, path: &str) {
    let bytes = data(path.len() as u64, 40_000);
    pool.put(path, &bytes);
    assert_eq!(pool.get(path), bytes);
}

/// Waits until `n` hogs were read whole, and checks no more are after a while.
fn wait_whole(whole: &AtomicUsize, n: usize) {
    let t = Instant::now();
    while whole.load(Ordering::SeqCst) < n {
        assert!(t.elapsed() < Duration::from_secs(20), "{} of {n} hogs read whole", whole.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(whole.load(Ordering::SeqCst), n, "more hogs read whole than the budget holds");
}

fn mib(b: u64) -> u64 {
    b >> 20
}

#[test]
fn coordinator_memory_stays_bounded_under_hogs() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let pid = pool.coordinator.as_ref().unwrap().id();
    let limits = Limits::default();
    eprintln!("coordinator at rest: {} MiB, bound {} MiB", mib(resident(pid)), mib(bound(&limits)));

    eprintln!("phase 1: 6 peers claim 256 MiB messages and send 250 MiB of them");
    let peak = Peak::start(&[pid]);
    let whole = Arc::new(AtomicUsize::new(0));
    let claim = FrameHeader { kind: KIND_COORD_REQUEST, header_len: 256 << 20, payload_len: 0 };
    let hogs: Vec<Hog> = (0..6).map(|_| hog(&pool, &pool.addr, claim, &[], 250 * MIB, &whole)).collect();
    for h in hogs {
        let (sent, err) = h.thread.join().unwrap();
        assert!(err.is_some() && sent < 250 * MIB, "sent {sent} bytes, {err:?}: refused at the header");
    }
    round_trip(&pool, "/after-refused-hogs");
    let most = peak.stop()[0];
    eprintln!("coordinator peak: {} MiB", mib(most));
    assert!(most < bound(&limits));
    let refused = "frame too large: a message of 268435456 bytes is more than this server's 16MiB";
    assert_eq!(pool.log("coordinator.log").matches(refused).count(), 6);

    eprintln!("phase 2: 16 peers claim the largest message accepted (16 MiB) and send all but a byte");
    let peak = Peak::start(&[pid]);
    let claim = FrameHeader { kind: KIND_COORD_REQUEST, header_len: 16 << 20, payload_len: 0 };
    let hogs: Vec<Hog> = (0..16).map(|_| hog(&pool, &pool.addr, claim, &[], 16 * MIB - 1, &whole)).collect();
    wait_whole(&whole, frames_read_whole(&limits, 16 * MIB));
    round_trip(&pool, "/during-hogs");
    assert!(hogs.iter().all(Hog::connected), "every hog is still connected");
    let most = peak.stop()[0];
    eprintln!(
        "coordinator peak with {} of 16 hogs read whole: {} MiB",
        frames_read_whole(&limits, 16 * MIB),
        mib(most)
    );
    assert!(most < bound(&limits), "{} MiB resident", mib(most));
    hogs.into_iter().for_each(Hog::close);
    round_trip(&pool, "/after-hogs");
}

#[test]
fn worker_memory_stays_bounded_under_hogs() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let pid = pool.workers[0].child.as_ref().unwrap().id();
    let addr = pool.status()["workers"][0]["address"].as_str().unwrap().to_string();
    let limits = Limits::worker();
    eprintln!("worker at rest: {} MiB, bound {} MiB", mib(resident(pid)), mib(bound(&limits)));

    eprintln!("6 peers claim 64 MiB chunk payloads and send 63 MiB of them");
    let peak = Peak::start(&[pid]);
    let whole = Arc::new(AtomicUsize::new(0));
    let key = ChunkKey::hashed(InodeId(1 << 40), 0, 1);
    let msg =
        tierpool_proto::encode(&WorkerRequest::PutChunk { key, checksum: 0, attrs: ChunkAttrs::default(), table: 0 });
    let claim = FrameHeader { kind: KIND_WORKER_REQUEST, header_len: msg.len() as u32, payload_len: 64 << 20 };
    let hogs: Vec<Hog> = (0..6).map(|_| hog(&pool, &addr, claim, &msg, 63 * MIB, &whole)).collect();
    let n = frames_read_whole(&limits, msg.len() as u64 + 64 * MIB);
    wait_whole(&whole, n);
    round_trip(&pool, "/during-hogs");
    assert!(hogs.iter().all(Hog::connected), "every hog is still connected");
    let most = peak.stop()[0];
    eprintln!("worker peak with {n} of 6 hogs read whole: {} MiB", mib(most));
    assert!(most < bound(&limits), "{} MiB resident", mib(most));
    hogs.into_iter().for_each(Hog::close);
    round_trip(&pool, "/after-hogs");
}
