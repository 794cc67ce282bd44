//! Several client processes at once; atomic replacement under concurrent reads.

mod common;
use common::{data, Pool};
use std::sync::Arc;

const MIB: usize = 1 << 20;

#[test]
fn concurrent_writers_and_readers_of_different_files() {
    let pool = Arc::new(Pool::start(3, "16MiB", "128MiB"));
    let handles: Vec<_> = (0..4u64)
        .map(|c| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for i in 0..4u64 {
                    let d = data(c * 100 + i, (i as usize + 1) * MIB + c as usize);
                    let local = pool.dir().join(format!("c{c}-{i}"));
                    std::fs::write(&local, &d).unwrap();
                    let path = format!("/c{c}/f{i}");
                    pool.ok(&["mkdir", "-p", &format!("/c{c}")]);
                    pool.ok(&["put", local.to_str().unwrap(), &path]);
                    assert!(pool.get(&path) == d, "{path}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(pool.ok(&["ls", "/"]), "c0/\nc1/\nc2/\nc3/\n");
}

#[test]
fn put_replaces_atomically_under_concurrent_reads() {
    let pool = Arc::new(Pool::start(2, "64MiB", "64MiB"));
    let a = vec![b'a'; 9 * MIB];
    let b = vec![b'b'; 9 * MIB];
    pool.put("/swap", &a);
    let la = pool.dir().join("a");
    let lb = pool.dir().join("b");
    std::fs::write(&la, &a).unwrap();
    std::fs::write(&lb, &b).unwrap();
    let writer = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            for i in 0..6 {
                let src = if i % 2 == 0 { &lb } else { &la };
                pool.ok(&["put", src.to_str().unwrap(), "/swap"]);
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() || reads < 3 {
        let got = pool.get("/swap");
        assert!(got == a || got == b, "a reader saw a mix of old and new content");
        reads += 1;
    }
    writer.join().unwrap();
}
