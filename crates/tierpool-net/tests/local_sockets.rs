//! A client on the server's machine connects through the server's local
//! socket, with the same handshake and frames as over TCP; it falls back to
//! TCP when the local socket is off, missing, or held by something else.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{Connection, Credentials, Dropped, Limits, Secret};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkAttrs, ChunkKey, ErrorKind, InodeId};

const SECOND: Duration = Duration::from_secs(1);

/// Sends a chunk of `len` bytes and checks the server got all of them.
async fn put(conn: &mut Connection, len: usize) {
    let key = ChunkKey::hashed(InodeId(1), 0, 1);
    let req = WorkerRequest::PutChunk { key, checksum: 0, attrs: ChunkAttrs::default(), table: 0 };
    let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (r, _) = conn.call::<Worker>(&req, &payload).await.unwrap();
    assert!(matches!(r, WorkerResponse::Deleted { chunks } if chunks == len as u64), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_here_goes_through_the_local_socket_unless_told_not_to() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let mut near = Connection::connect_via(&addr, SECOND, &creds(), true).await.unwrap();
    assert!(near.is_local());
    assert_eq!(near.peer(), addr, "named by the address dialled");
    put(&mut near, 4 << 20).await;
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.connections_local), (1, 1));
    assert_eq!(s.transfer_bytes, 0, "a local socket is not a link: its transfers are not timed");

    let mut far = Connection::connect_via(&addr, SECOND, &creds(), false).await.unwrap();
    assert!(!far.is_local());
    put(&mut far, 4 << 20).await;
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.connections_local, s.transfer_bytes), (2, 1, 4 << 20));
    // Both stay usable, each on its own transport.
    put(&mut near, 100).await;
    put(&mut far, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_socket_asks_the_same_secret() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let wrong: Credentials = Secret::from_key(&[9; 32], "/wrong/secret").unwrap().into();
    let e = Connection::connect_via(&addr, SECOND, &wrong, true).await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    let expected =
        format!("the pool at {addr} refused this client's secret (from /wrong/secret): it is not that pool's");
    assert_eq!(e.message, expected, "the same error as over TCP");
    // Refused on the local socket, then over TCP, whose refusal it reports
    // (a refusal on a local socket may come from whatever holds the name).
    wait_until(5 * SECOND, "both refusals counted", || stats.snapshot().dropped.unauthenticated == 2).await;
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.connections_local), (2, 1));
    assert_eq!(s.dropped, Dropped { unauthenticated: 2, ..Dropped::default() });
}

/// Takes the local socket name of the free port it returns, before any
/// server binds it; what holds it answers every peer with `answer`.
async fn squat<F, Fut>(answer: F) -> String
where
    F: Fn(tokio::net::UnixStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let squatter = tokio::net::UnixListener::bind(format!("\0tierpool/{addr}")).unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = squatter.accept().await {
            tokio::spawn(answer(s));
        }
    });
    addr
}

/// Serves `addr` (whose local socket name is taken) and connects to it.
async fn reach_past_the_squatter(addr: &str) {
    let listener = tierpool_net::bind(addr).await.unwrap();
    assert!(!listener.has_local_socket());
    let server = tierpool_net::Server::new(listener, Limits::default(), secret()).unwrap();
    let stats = server.stats();
    tokio::spawn(server.run(std::sync::Arc::new(TestHandler { delay: Duration::ZERO })));
    let started = std::time::Instant::now();
    let mut conn = Connection::connect_via(addr, 3 * SECOND, &creds(), true).await.unwrap();
    assert!(!conn.is_local(), "the squatter failed the handshake: TCP");
    assert!(started.elapsed() < 2 * SECOND, "at most a second lost on the squatter: {:?}", started.elapsed());
    put(&mut conn, 1000).await;
    assert_eq!((stats.snapshot().connections_accepted, stats.snapshot().connections_local), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_held_by_something_else_leaves_the_server_on_tcp_and_clients_reach_it() {
    // Something that hangs up at once, as a stray process might.
    reach_past_the_squatter(&squat(|s| async move { drop(s) }).await).await;
    // Something that refuses every secret, as an impostor would.
    let other = Secret::from_key(&[7; 32], "/another/pool").unwrap();
    let addr = squat(move |mut s| {
        let other = other.clone();
        async move {
            let _ = tierpool_net::auth::accept(&mut s, &other, SECOND).await;
        }
    })
    .await;
    reach_past_the_squatter(&addr).await;
    // Something that never answers: the client gives up on it after a second.
    let addr = squat(|s| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(s);
    })
    .await;
    reach_past_the_squatter(&addr).await;
}
