//! A full pool refuses writes clearly and keeps serving what it holds.

mod common;
use common::{data, Pool};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

#[test]
fn pool_full_fails_clearly_and_keeps_existing_data() {
    let pool = Pool::start(2, "4MiB", "8MiB");
    let mut stored = Vec::new();
    let mut failure = None;
    for i in 0..40u64 {
        let d = data(i, 2 * MIB);
        let local = pool.dir().join("f.tmp");
        std::fs::write(&local, &d).unwrap();
        let out = pool.cli(&["put", "--chunk-size", "1MiB", local.to_str().unwrap(), &format!("/f{i}")]);
        if out.status.success() {
            stored.push((format!("/f{i}"), d));
        } else {
            failure = Some(String::from_utf8(out.stderr).unwrap());
            break;
        }
    }
    let e = failure.expect("24MiB of budget cannot take 80MiB");
    assert!(e.contains("pool full"), "{e}");
    assert!(!stored.is_empty());
    let failed = format!("/f{}", stored.len());
    assert!(pool.err(&["stat", &failed]).contains("no such file or directory"), "a failed put publishes nothing");
    for w in pool.fresh_status()["workers"].as_array().unwrap() {
        assert!(w["mem"]["used"].as_u64() <= w["mem"]["capacity"].as_u64());
        assert!(w["disk"]["used"].as_u64() <= w["disk"]["capacity"].as_u64());
    }
    for (p, d) in &stored {
        assert!(pool.get(p) == *d, "{p} intact after pool full");
    }
    eprintln!("phase: removing files frees space once garbage collection ran");
    for (p, _) in &stored {
        pool.ok(&["rm", p]);
    }
    let t = Instant::now();
    loop {
        let out = pool.cli(&["put", "--chunk-size", "1MiB", pool.dir().join("f.tmp").to_str().unwrap(), "/again"]);
        if out.status.success() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "space never freed: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(500));
    }
}
