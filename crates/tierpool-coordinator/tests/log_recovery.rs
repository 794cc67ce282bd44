//! The metadata log: what was acknowledged survives a restart, torn tails are
//! cut, snapshots compact, concurrent changes share fsyncs.

use std::path::Path;
use std::sync::Arc;
use tierpool_coordinator::log;
use tierpool_coordinator::service::Coordinator;
use tierpool_coordinator::CoordinatorConfig;
use tierpool_meta::{MetaOp, MetaState, Owner};
use tierpool_types::ErrorKind;

fn open(dir: &Path, snapshot_every: u64) -> Arc<Coordinator> {
    let mut cfg = CoordinatorConfig::new(dir.to_path_buf(), "127.0.0.1:0".into());
    cfg.snapshot_every = snapshot_every;
    cfg.partitions = 16;
    let (state, lsn, writer) = log::open(&dir.join("meta")).unwrap();
    Coordinator::new(cfg, tierpool_net::Credentials::none(), state, lsn, writer)
}

fn reopened_state(dir: &Path) -> MetaState {
    log::open(&dir.join("meta")).unwrap().0
}

fn mkdir(i: u32) -> MetaOp {
    MetaOp::Mkdir { path: format!("/d{i}"), parents: false, mode: 0o755 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_changes_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open(tmp.path(), 1_000_000);
    c.initialise().await.unwrap();
    for i in 0..20 {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    c.execute(MetaOp::Remove { path: "/d3".into(), recursive: false }, Owner::default()).await.unwrap();
    let live = c.state();
    drop(c);
    assert_eq!(reopened_state(tmp.path()), live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_is_cut_and_earlier_records_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open(tmp.path(), 1_000_000);
    c.initialise().await.unwrap();
    for i in 0..5 {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    let live = c.state();
    drop(c);
    // Reopening compacts into a snapshot; write more, then tear the last record.
    let c = open(tmp.path(), 1_000_000);
    c.execute(mkdir(100), Owner::default()).await.unwrap();
    let with_100 = c.state();
    drop(c);
    let seg = std::fs::read_dir(tmp.path().join("meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("log-"))
        .unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    assert!(!bytes.is_empty());
    std::fs::write(&seg, &bytes[..bytes.len() - 3]).unwrap();
    let recovered = reopened_state(tmp.path());
    assert_eq!(recovered, live, "the torn record is gone, everything before it is there");
    assert_ne!(recovered, with_100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_compact_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open(tmp.path(), 10);
    c.initialise().await.unwrap();
    for i in 0..35 {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    let live = c.state();
    drop(c);
    let segs: Vec<_> = std::fs::read_dir(tmp.path().join("meta"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("log-"))
        .collect();
    assert_eq!(segs.len(), 1, "older segments are dropped after a snapshot: {segs:?}");
    assert!(tmp.path().join("meta/snapshot").exists());
    assert_eq!(reopened_state(tmp.path()), live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_snapshot_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open(tmp.path(), 1_000_000);
    c.initialise().await.unwrap();
    c.execute(mkdir(1), Owner::default()).await.unwrap();
    drop(c);
    drop(reopened_state(tmp.path())); // compacts into a snapshot
    let snap = tmp.path().join("meta/snapshot");
    let mut b = std::fs::read(&snap).unwrap();
    let n = b.len();
    b[n - 2] ^= 0xff;
    std::fs::write(&snap, b).unwrap();
    let e = log::open(&tmp.path().join("meta")).err().expect("must refuse a corrupt snapshot");
    assert_eq!(e.kind, ErrorKind::Corrupt);
    assert!(e.message.contains("checksum mismatch"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_changes_share_fsyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open(tmp.path(), 1_000_000);
    c.initialise().await.unwrap();
    let before = c.log_syncs();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..400 {
        let c = c.clone();
        tasks.spawn(async move { c.execute(mkdir(i), Owner::default()).await.unwrap() });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let syncs = c.log_syncs() - before;
    assert!(syncs < 400, "400 concurrent changes took {syncs} fsyncs");
    let live = c.state();
    drop(c);
    assert_eq!(reopened_state(tmp.path()), live);
}
