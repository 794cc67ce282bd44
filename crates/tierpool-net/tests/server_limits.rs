//! A server under its limits, over loopback: claimed bytes cost nothing,
//! the budget holds under load, stalled, idle and silent peers are dropped
//! after their timeouts, one connection too many is refused, and honest
//! requests are answered while hogs hold the budget.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tierpool_net::{Dropped, Limits, ALLOWANCE};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkAttrs, ChunkKey, InodeId};
use tokio::io::AsyncWriteExt;

const MIB: usize = 1 << 20;
const SECOND: Duration = Duration::from_secs(1);

fn put(n: u64) -> WorkerRequest {
    let key = ChunkKey::hashed(InodeId(n), 0, 1);
    WorkerRequest::PutChunk { key, checksum: 0, attrs: ChunkAttrs::default(), table: 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claimed_but_unsent_bytes_are_not_charged() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let mut hogs = Vec::new();
    for _ in 0..8 {
        hogs.push(hog(&addr, 64 * MIB, 1000).await);
    }
    // Each frame holds its message and the first step of its payload,
    // cut to its connection's allowance; nothing more.
    let expected = 8 * ALLOWANCE;
    wait_until(5 * SECOND, "hogs read", || stats.snapshot().bytes_held == expected).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s = stats.snapshot();
    assert_eq!((s.bytes_held, s.bytes_held_peak, s.connections_open), (expected, expected, 8));
    drop(hogs);
    wait_until(5 * SECOND, "hogs gone", || stats.snapshot().connections_open == 0).await;
    assert_eq!(stats.snapshot().bytes_held, 0);
    assert_eq!(stats.snapshot().dropped, Dropped::default(), "peers that leave are not drops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_held_never_exceed_the_budget() {
    let limits = small_limits(8, 4 * MIB as u64, 2 * MIB as u64);
    let budget = limits.budget.0;
    let (addr, stats) = start(limits, Duration::from_millis(20)).await;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stats, done) = (stats.clone(), done.clone());
        tokio::spawn(async move {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(stats.snapshot().bytes_held);
                tokio::task::yield_now().await;
            }
            most
        })
    };
    let mut clients = Vec::new();
    for c in 0..8u64 {
        let addr = addr.clone();
        clients.push(tokio::spawn(async move {
            let mut conn = connect(&addr).await;
            for i in 0..5 {
                let payload = vec![c as u8; 2 * MIB];
                let (r, _) = conn.call::<Worker>(&put(c * 10 + i), &payload).await.unwrap();
                assert_eq!(r, WorkerResponse::Deleted { chunks: 2 * MIB as u64 });
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let sampled = sampler.await.unwrap();
    let s = stats.snapshot();
    assert!(sampled <= budget && s.bytes_held_peak <= budget, "{sampled} / {s:?} over {budget}");
    // 8 frames of 2 MiB wanted 16 MiB at once: the budget was pressed hard.
    assert!(s.bytes_held_peak > 4 * MIB as u64, "{s:?}");
    assert_eq!((s.bytes_held, s.dropped.total()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_peer_is_dropped_after_the_stall_timeout() {
    let limits = Limits { stall_timeout: Duration::from_millis(300), ..Limits::default() };
    let (addr, stats) = start(limits, Duration::ZERO).await;
    let mut s = hog(&addr, 10 * MIB, 100_000).await;
    let mut other = raw(&addr).await;
    let took = closed_after(&mut s.read, 5 * SECOND).await;
    assert!(took >= Duration::from_millis(250) && took < 3 * SECOND, "{took:?}");
    assert_eq!(stats.snapshot().dropped, Dropped { stalled: 1, ..Dropped::default() });
    ping_raw(&mut other).await;
    wait_until(SECOND, "charge released", || stats.snapshot().bytes_held == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_waiting_for_the_budget_past_the_stall_timeout_is_dropped() {
    let limits =
        Limits { stall_timeout: Duration::from_millis(300), ..small_limits(4, 3 * MIB as u64, 2 * MIB as u64) };
    let (addr, stats) = start(limits, Duration::from_secs(2)).await;
    // The first put is held by the handler for two seconds, and its bytes with it.
    let mut first = connect(&addr).await;
    let first = tokio::spawn(async move { first.call::<Worker>(&put(1), &vec![1; 2 * MIB]).await });
    wait_until(SECOND, "first put read", || stats.snapshot().bytes_held > 2 * MIB as u64).await;
    let mut second = hog(&addr, 2 * MIB, 2 * MIB).await;
    let took = closed_after(&mut second.read, 5 * SECOND).await;
    assert!(took >= Duration::from_millis(250) && took < Duration::from_millis(1800), "{took:?}");
    assert_eq!(stats.snapshot().dropped, Dropped { stalled: 1, ..Dropped::default() });
    let answer = first.await.unwrap().unwrap();
    assert_eq!(answer.0, WorkerResponse::Deleted { chunks: 2 * MIB as u64 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_peer_is_dropped_after_the_idle_timeout() {
    let limits = Limits { idle_timeout: Duration::from_millis(300), ..Limits::default() };
    let (addr, stats) = start(limits, Duration::ZERO).await;
    let mut s = raw(&addr).await;
    ping_raw(&mut s).await;
    let took = closed_after(&mut s, 5 * SECOND).await;
    assert!(took >= Duration::from_millis(250) && took < 3 * SECOND, "{took:?}");
    assert_eq!(stats.snapshot().dropped, Dropped { idle_timeout: 1, ..Dropped::default() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peer_is_dropped_after_the_handshake_timeout() {
    let limits = Limits { handshake_timeout: Duration::from_millis(300), ..Limits::default() };
    let (addr, stats) = start(limits, Duration::ZERO).await;
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let took = closed_after(&mut s, 5 * SECOND).await;
    assert!(took >= Duration::from_millis(250) && took < 3 * SECOND, "{took:?}");
    assert_eq!(stats.snapshot().dropped, Dropped { handshake_timeout: 1, ..Dropped::default() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_over_the_limit_is_refused() {
    let (addr, stats) = start(small_limits(2, 4 * MIB as u64, MIB as u64), Duration::ZERO).await;
    let mut a = raw(&addr).await;
    let mut b = raw(&addr).await;
    ping_raw(&mut a).await;
    ping_raw(&mut b).await;
    let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(closed_after(&mut c, 2 * SECOND).await < SECOND);
    assert_eq!(stats.snapshot().dropped, Dropped { too_many_connections: 1, ..Dropped::default() });
    ping_raw(&mut a).await;
    ping_raw(&mut b).await;
    drop(a);
    wait_until(2 * SECOND, "a slot freed", || stats.snapshot().connections_open == 1).await;
    let mut d = raw(&addr).await;
    ping_raw(&mut d).await;
    assert_eq!(stats.snapshot().connections_accepted, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_too_large_for_the_server_is_refused_unread() {
    let (addr, stats) = start(small_limits(4, 4 * MIB as u64, MIB as u64), Duration::ZERO).await;
    let mut s = hog(&addr, MIB + 1, 1000).await;
    assert!(closed_after(&mut s.read, 2 * SECOND).await < SECOND);
    let mut s = raw(&addr).await;
    s.write_all(&head(64 * 1024 + 1, 0)).await.unwrap();
    assert!(closed_after(&mut s, 2 * SECOND).await < SECOND);
    // The count may follow the close by a moment.
    wait_until(2 * SECOND, "both refusals counted", || stats.snapshot().dropped.frame_too_large == 2).await;
    let st = stats.snapshot();
    assert_eq!(st.dropped, Dropped { frame_too_large: 2, ..Dropped::default() });
    assert_eq!(st.bytes_held_peak, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_requests_are_answered_while_hogs_hold_the_budget() {
    let (addr, stats) = start(small_limits(8, 4 * MIB as u64, 2 * MIB as u64), Duration::ZERO).await;
    let mut hogs = Vec::new();
    for _ in 0..4 {
        hogs.push(hog(&addr, 2 * MIB, 2 * MIB - 1).await);
    }
    // Four frames of 2 MiB cannot all fit 4 MiB: two reserve the rest of
    // their length, the other two wait, holding their allowance.
    let spent = 2 * (put_message().len() + 2 * MIB) as u64 + 2 * ALLOWANCE;
    wait_until(5 * SECOND, "hogs read", || stats.snapshot().bytes_held == spent).await;
    let mut conn = connect(&addr).await;
    let pong = tokio::time::timeout(SECOND, conn.call::<Worker>(&WorkerRequest::Ping, &[])).await;
    assert_eq!(pong.unwrap().unwrap().0, WorkerResponse::Pong, "a small request uses its own allowance");
    let small = tokio::time::timeout(SECOND, conn.call::<Worker>(&put(1), &[1; 1000])).await;
    assert_eq!(small.unwrap().unwrap().0, WorkerResponse::Deleted { chunks: 1000 });
    // A bulk request waits for the budget while the hogs hold it...
    let bulk = tokio::spawn(async move { conn.call::<Worker>(&put(2), &vec![2; 2 * MIB]).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!bulk.is_finished());
    assert_eq!(stats.snapshot().connections_open, 5);
    // ...and is answered once they are gone.
    drop(hogs);
    let answer = tokio::time::timeout(5 * SECOND, bulk).await.unwrap().unwrap().unwrap();
    assert_eq!(answer.0, WorkerResponse::Deleted { chunks: 2 * MIB as u64 });
    assert_eq!(stats.snapshot().dropped, Dropped::default());
}
