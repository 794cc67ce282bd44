//! A server refuses peers that do not prove the pool's secret before it
//! reads a frame of theirs, counts each as dropped, and tells them why; a
//! pool of connections does the handshake once per connection.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{Connection, Credentials, Dropped, Limits, Pool, PoolConfig, Secret};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_are_refused_before_a_frame_is_read() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let wrong: Credentials = Secret::from_key(&[9; 32], "/wrong/secret").unwrap().into();
    // Over TCP (a peer on this machine would use the local socket: local_sockets.rs).
    let e = Connection::connect_via(&addr, SECOND, &wrong, false).await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    let expected =
        format!("the pool at {addr} refused this client's secret (from /wrong/secret): it is not that pool's");
    assert_eq!(e.message, expected);
    let e = Connection::connect_via(&addr, SECOND, &Credentials::none(), false).await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    assert!(e.message.contains("which has no secret"), "{}", e.message);
    // A well-formed chunk put sent without the handshake: refused at its
    // fourth byte, its body never read or charged, the handler never run.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let msg = put_message();
    s.write_all(&[&head(msg.len(), 1000)[..], &msg, &[7; 1000]].concat()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(5 * SECOND, s.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got.len(), 36 + 5, "a hello, then a refusal: {got:?}");
    assert_eq!(&got[36..], b"TP\x23\x13\x02");
    let st = stats.snapshot();
    assert_eq!(st.dropped, Dropped { unauthenticated: 3, ..Dropped::default() });
    assert_eq!((st.bytes_held_peak, st.connections_accepted), (0, 3));
    let (r, _) = connect(&addr).await.call::<Worker>(&WorkerRequest::Ping, &[]).await.unwrap();
    assert_eq!(r, WorkerResponse::Pong);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_does_the_handshake_once_per_connection() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let pool: Pool<Worker> = Pool::new(addr, PoolConfig::with(secret()));
    for _ in 0..200 {
        let (r, _) = pool.call(&WorkerRequest::Ping, &[], false).await.unwrap();
        assert_eq!(r, WorkerResponse::Pong);
    }
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.dropped), (1, Dropped::default()));
}
