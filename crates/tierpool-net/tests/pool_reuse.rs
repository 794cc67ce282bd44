//! A pool does not send a request into a connection its server has
//! already dropped for idling: a request that may not be retried still
//! goes through.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{Dropped, Limits, Pool, PoolConfig};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};

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
