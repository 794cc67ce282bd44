//! A pool does not send a request into a connection its server has
//! already dropped for idling: a request that may not be retried still
//! goes through.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{ChunkBuffers, Dropped, Limits, Pool, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkKey, InodeId};

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
