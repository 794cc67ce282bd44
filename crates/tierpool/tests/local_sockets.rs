//! Clients on the pool's machine reach its servers through their local
//! sockets; a client told not to (`TIERPOOL_LOCAL_SOCKETS=0`), or a server
//! started without them, goes over TCP. The bytes are the same either way,
//! and each worker counts the connections it accepted, local ones apart.

mod common;
use common::{data, Pool};
use std::time::{Duration, Instant};

/// Worker `i`'s connections (accepted over TCP, accepted locally), once
/// they satisfy `want`.
fn connections_when(pool: &Pool, i: usize, what: &str, want: impl Fn(u64, u64) -> bool) -> (u64, u64) {
    let t = Instant::now();
    loop {
        let c = pool.status()["workers"][i]["connections"].clone();
        let (accepted, local) = (c["accepted"].as_u64().unwrap(), c["local"].as_u64().unwrap());
        if want(accepted - local, local) {
            return (accepted - local, local);
        }
        assert!(t.elapsed() < Duration::from_secs(20), "worker {i}: {what}: {c}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn clients_here_use_local_sockets_and_tcp_when_told_not_to_or_when_a_server_has_none() {
    let mut pool = Pool::start(1, "64MiB", "256MiB");
    // Worker 1 listens on TCP alone (and connects to worker 0 over TCP as it takes partitions).
    pool.worker_env = vec![("TIERPOOL_LOCAL_SOCKETS".into(), "0".into())];
    pool.add_worker("64MiB", "256MiB");
    pool.wait_alive(2);
    pool.wait_balanced();
    let (tcp0, local0) = connections_when(&pool, 0, "the coordinator's connections, local", |_, l| l > 0);
    let (tcp1, local1) = connections_when(&pool, 1, "its connections, none local", |t, _| t > 0);
    assert_eq!(local1, 0);

    // 16 chunks of 4 MiB, spread over both workers by hash.
    let bytes = data(11, 64 << 20);
    pool.put("/both", &bytes);
    connections_when(&pool, 0, "the put's, local", |t, l| t == tcp0 && l > local0);
    let (tcp1, local1) = connections_when(&pool, 1, "the put's, over TCP", |t, l| t > tcp1 && l == 0);
    assert_eq!(pool.get("/both"), bytes);

    // A client told not to use them reads the same bytes over TCP.
    let out = pool.cmd(&["cat", "/both"]).env("TIERPOOL_LOCAL_SOCKETS", "0").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, bytes);
    connections_when(&pool, 0, "the read's, over TCP", |t, _| t > tcp0);
    connections_when(&pool, 1, "the read's, over TCP", |t, l| t > tcp1 && l == local1);
}
