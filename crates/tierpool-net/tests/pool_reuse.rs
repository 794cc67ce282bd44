//! A pool does not send a request into a connection its server has
//! already dropped for idling: a request that may not be retried still
//! goes through. Many calls at once share at most `max_open` connections.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{ChunkBuffers, Dropped, Limits, Pool, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_dropped_while_idle_is_not_reused() {
    let limits = Limits { idle_timeout: Duration::from_millis(200), ..Limits::default() };
    let (addr, stats) = start(limits, Duration::ZERO).await;
    let pool: Pool<Worker> = Pool::new(addr, PoolConfig::with(secret()));
    for round in 1..=3u64 {
        let (r, _) = pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
        assert_eq!(r, WorkerResponse::Pong);
        wait_until(Duration::from_secs(2), "idle drop", || stats.snapshot().dropped.idle_timeout == round).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.dropped), (3, Dropped { idle_timeout: 3, ..Dropped::default() }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_of_a_whole_chunk_arrive_in_kept_buffers_with_their_own_bytes() {
    const CHUNK: u64 = 1 << 20;
    let (addr, _) = start(Limits::default(), Duration::ZERO).await;
    let buffers = ChunkBuffers::new(CHUNK as usize, 2);
    let pool: Pool<Worker> =
        Pool::new(addr, PoolConfig { buffers: Some(buffers.clone()), ..PoolConfig::with(secret()) });
    let get = |index: u64, version: u64| {
        let key = ChunkKey { inode: InodeId(1), index, version, home: None };
        (key, WorkerRequest::GetChunk { key, mem_only: false })
    };
    for version in 1..=3 {
        let (key, req) = get(CHUNK, version);
        let (r, bytes) = pool.call(&req, &[], true).await.unwrap();
        assert_eq!(r, WorkerResponse::Chunk);
        assert_eq!(bytes, chunk_bytes(key), "version {version}: its own bytes, not the last answer's");
        assert_eq!(buffers.stats().lent, 1, "held while its bytes are");
        drop(bytes);
        assert_eq!((buffers.stats().spare, buffers.stats().lent), (1, 0), "back once they are dropped");
    }
    let s = buffers.stats();
    assert_eq!((s.fresh, s.reused), (1, 2));
    // An answer of another length takes none.
    let (key, req) = get(CHUNK - 1, 4);
    let (_, bytes) = pool.call(&req, &[], true).await.unwrap();
    assert_eq!(bytes, chunk_bytes(key));
    assert_eq!((buffers.stats().fresh, buffers.stats().reused, buffers.stats().lent), (1, 2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_as_long_as_the_callers_room_is_read_straight_into_it() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let buffers = ChunkBuffers::new(1 << 20, 2);
    let pool: Pool<Worker> =
        Pool::new(addr, PoolConfig { buffers: Some(buffers.clone()), ..PoolConfig::with(secret()) });
    let get = |len: u64, version: u64| {
        let key = ChunkKey { inode: InodeId(1), index: len, version, home: None };
        (key, WorkerRequest::GetChunk { key, mem_only: false })
    };
    // Shorter than what the connection reads ahead, longer, a whole chunk.
    for (version, len) in [(1, 1u64), (2, 100_000), (3, 1 << 20)] {
        let (key, req) = get(len, version);
        let mut room = vec![0u8; len as usize];
        let (r, body) = pool.call_into(&req, &[], true, Some(&mut room)).await.unwrap();
        assert_eq!((r, body), (WorkerResponse::Chunk, None), "{len} bytes: landed");
        assert!(room == chunk_bytes(key), "{len} bytes: exact");
    }
    assert_eq!(buffers.stats().fresh + buffers.stats().reused, 0, "no kept buffer taken");
    // Another length comes back as it came, the room untouched.
    let (key, req) = get(500, 4);
    let mut room = vec![9u8; 501];
    let (_, body) = pool.call_into(&req, &[], true, Some(&mut room)).await.unwrap();
    assert_eq!(body.as_deref(), Some(&chunk_bytes(key)[..]));
    assert!(room.iter().all(|&b| b == 9));
    let (r, body) = pool.call_into(&WorkerRequest::Ping, &[], true, Some(&mut room)).await.unwrap();
    assert_eq!((r, body.as_deref()), (WorkerResponse::Pong, Some(&[][..])), "no payload: an empty one, not landed");
    // An error answer is an error; the connection carried every exchange whole.
    let not_served = WorkerRequest::DeleteInodes { inodes: vec![InodeId(1)] };
    let e = pool.call_into(&not_served, &[], true, Some(&mut room)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let (r, _) = pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
    assert_eq!(r, WorkerResponse::Pong);
    assert_eq!(stats.snapshot().connections_accepted, 1, "one connection carried them all");
}

fn put(index: u64) -> WorkerRequest {
    let key = ChunkKey { inode: InodeId(1), index, version: 1, home: None };
    WorkerRequest::PutChunk { key, checksum: 0, attrs: ChunkAttrs::default(), table: 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_at_once_beyond_max_open_wait_their_turn_on_the_same_connections() {
    // Each put is held 30 ms by the server, so the 40 calls overlap.
    let (addr, stats) = start(Limits::default(), Duration::from_millis(30)).await;
    let cfg = PoolConfig { max_open: 3, max_idle: 3, ..PoolConfig::with(secret()) };
    let pool = std::sync::Arc::new(Pool::<Worker>::new(addr, cfg));
    let calls: Vec<_> = (0..40u64)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.call(&put(i), &vec![7; i as usize], false).await })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let (r, _) = call.await.unwrap().unwrap();
        assert_eq!(r, WorkerResponse::Deleted { chunks: i as u64 }, "call {i}: its own payload's length");
    }
    let s = stats.snapshot();
    assert_eq!(s.connections_accepted, 3, "three connections carried every call");
    // A call that finds every turn taken for its whole timeout gives up,
    // naming why. One connection, made ahead (so holding it starts at
    // once); two puts take it in turn, each held until it times out (the
    // server holds a put 3 s), and a ping waiting behind both gives up first.
    let cfg = PoolConfig { max_open: 1, request_timeout: Duration::from_secs(1), ..PoolConfig::with(secret()) };
    let (addr, _) = start(Limits::default(), Duration::from_secs(3)).await;
    let pool = std::sync::Arc::new(Pool::<Worker>::new(addr.clone(), cfg));
    pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
    let mut calls = Vec::new();
    for i in 0..2 {
        let pool = pool.clone();
        calls.push(tokio::spawn(async move { pool.call(&put(i), &[], false).await }));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let e = pool.call(&WorkerRequest::Ping, &[], true).await.unwrap_err();
    assert_eq!(e.message, format!("cannot connect to {addr}: all 1 connections stayed busy for 1s"));
    assert!(tierpool_net::stayed_busy(&e) && tierpool_net::Connection::never_sent(&e), "{e}");
    for call in calls {
        let e = call.await.unwrap().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(!tierpool_net::stayed_busy(&e), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_reused_only_on_the_runtime_it_was_opened_on() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let pool: std::sync::Arc<Pool<Worker>> = std::sync::Arc::new(Pool::new(addr, PoolConfig::with(secret())));
    // A thread with a runtime of its own calls twice, then ends with its runtime.
    let theirs = pool.clone();
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for _ in 0..2 {
            let (r, _) = rt.block_on(theirs.call(&WorkerRequest::Ping, &[], false)).unwrap();
            assert_eq!(r, WorkerResponse::Pong);
        }
    })
    .await
    .unwrap();
    assert_eq!(stats.snapshot().connections_accepted, 1, "the second call reused the first's connection");
    // Its idle connection belongs to a runtime that is gone: a call that
    // may not be retried gets a connection of its own runtime.
    for _ in 0..2 {
        let (r, _) = pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
        assert_eq!(r, WorkerResponse::Pong);
    }
    assert_eq!(stats.snapshot().connections_accepted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_did_not_run_meanwhile_still_sees_its_connection_was_dropped() {
    let limits = Limits { idle_timeout: Duration::from_millis(200), ..Limits::default() };
    let (addr, stats) = start(limits, Duration::ZERO).await;
    let pool: Pool<Worker> = Pool::new(addr, PoolConfig::with(secret()));
    let watch = stats.clone();
    tokio::task::spawn_blocking(move || {
        // A thread's own runtime, run only while it waits for a call.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for round in 1..=2u64 {
            let (r, _) = rt.block_on(pool.call(&WorkerRequest::Ping, &[], false)).unwrap();
            assert_eq!(r, WorkerResponse::Pong, "round {round}");
            let since = std::time::Instant::now();
            while watch.snapshot().dropped.idle_timeout < round {
                assert!(since.elapsed() < Duration::from_secs(2), "the server never dropped the idle connection");
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    assert_eq!(stats.snapshot().connections_accepted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_connections_of_a_runtime_said_to_have_ended_close_at_the_next_call() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let pool: std::sync::Arc<Pool<Worker>> = std::sync::Arc::new(Pool::new(addr, PoolConfig::with(secret())));
    // A thread's own runtime calls, then ends, as its owner says.
    let theirs = pool.clone();
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(theirs.call(&WorkerRequest::Ping, &[], false)).unwrap();
        tierpool_net::runtime_ended(rt.handle().id());
    })
    .await
    .unwrap();
    assert_eq!(stats.snapshot().connections_open, 1, "kept idle");
    let (r, _) = pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
    assert_eq!(r, WorkerResponse::Pong);
    let s = stats.clone();
    wait_until(Duration::from_secs(2), "the ended runtime's connection closed", || s.snapshot().connections_open == 1)
        .await;
    assert_eq!(stats.snapshot().connections_accepted, 2);
}
