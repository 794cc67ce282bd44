//! Lengths a peer claims and does not send cost no memory, on a server and
//! on a client reading a response. The test binary counts every byte
//! allocated, so it holds one test only (tests of one binary share the
//! allocator).

mod common;

use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tierpool_net::Limits;
use tierpool_proto::frame::{FrameHeader, KIND_RESPONSE, MAX_HEADER_LEN};
use tierpool_proto::{Worker, WorkerRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

const MIB: usize = 1 << 20;
/// What a connection may cost beyond its frame: buffers, task, socket state.
const PER_CONNECTION: usize = 128 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claimed_lengths_are_not_allocated() {
    // Server: 6 peers each claim a 16 MiB message and a 64 MiB payload
    // (480 MiB in all) and send 100 bytes.
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let before = live();
    let mut hogs = Vec::new();
    for _ in 0..6 {
        let mut s = raw(&addr).await;
        s.write_all(&head(16 * MIB, 64 * MIB)).await.unwrap();
        s.write_all(&[0; 100]).await.unwrap();
        hogs.push(s);
    }
    wait_until(Duration::from_secs(5), "hogs read", || stats.snapshot().bytes_held == 6 * 64 * 1024).await;
    let grown = live().saturating_sub(before);
    assert!(grown < 6 * PER_CONNECTION, "the server allocated {grown} bytes for 480 MiB claimed");
    drop(hogs);

    // Client: a server answers with a header claiming the largest message
    // the protocol allows, sends 100 bytes of it and waits.
    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_addr = fake.local_addr().unwrap().to_string();
    let answer = tokio::spawn(async move {
        let (mut s, _) = fake.accept().await.unwrap();
        tierpool_net::auth::accept(&mut s, &secret(), Duration::from_secs(1)).await.unwrap();
        let mut req = [0u8; 13];
        s.read_exact(&mut req).await.unwrap();
        let fh = FrameHeader { kind: KIND_RESPONSE, header_len: MAX_HEADER_LEN, payload_len: 0 };
        s.write_all(&fh.encode()).await.unwrap();
        s.write_all(&[0; 100]).await.unwrap();
        std::future::pending::<()>().await;
    });
    let before = live();
    let mut conn = connect(&fake_addr).await;
    let call = conn.call::<Worker>(&WorkerRequest::Ping, &[]);
    assert!(tokio::time::timeout(Duration::from_millis(300), call).await.is_err(), "no answer is whole");
    let grown = live().saturating_sub(before);
    assert!(grown < 2 * PER_CONNECTION + 256 * 1024, "the client allocated {grown} bytes for 256 MiB claimed");
    answer.abort();
}
