//! The metadata log: what was acknowledged survives a restart, torn tails are
//! cut, snapshots compact, concurrent changes share fsyncs; with a periodic
//! fsync, changes are acknowledged once written, read back by another
//! opener before any fsync, and nothing is deleted on their strength before it;
//! requests that ask to be answered once written are, and `SyncLog` fsyncs them;
//! records are kept in order across snapshots, and written when no one waits.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tierpool_coordinator::log;
use tierpool_coordinator::service::Coordinator;
use tierpool_coordinator::{CoordinatorConfig, LogSync};
use tierpool_meta::{MetaOp, MetaReply, MetaState, Owner};
use tierpool_net::Handler;
use tierpool_proto::{CoordRequest, CoordResponse};
use tierpool_types::{ChunkAttrs, ErrorKind, DEFAULT_CHUNK_SIZE};

fn open(dir: &Path, snapshot_every: u64) -> Arc<Coordinator> {
    open_syncing(dir, snapshot_every, LogSync::Always)
}

fn open_syncing(dir: &Path, snapshot_every: u64, sync: LogSync) -> Arc<Coordinator> {
    let mut cfg = CoordinatorConfig::new(dir.to_path_buf(), "127.0.0.1:0".into());
    cfg.snapshot_every = snapshot_every;
    cfg.partitions = 16;
    cfg.gc_grace = Duration::ZERO;
    cfg.log_sync = sync;
    let (state, lsn, writer) = log::open_with(&dir.join("meta"), sync).unwrap();
    Coordinator::new(cfg, tierpool_net::Credentials::none(), state, lsn, writer)
}

/// Copies the log and snapshot of `from` to `to` (to read them as a
/// restarted coordinator would, leaving the running one's files alone).
/// A snapshot being written may rename its file or drop the segments it
/// covers between the listing and the copy: then the copy starts again.
fn copy_meta(from: &Path, to: &Path) {
    'again: for _ in 0..100 {
        let _ = std::fs::remove_dir_all(to.join("meta"));
        std::fs::create_dir_all(to.join("meta")).unwrap();
        for e in std::fs::read_dir(from.join("meta")).unwrap() {
            let e = e.unwrap();
            match std::fs::copy(e.path(), to.join("meta").join(e.file_name())) {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue 'again,
                Err(err) => panic!("copying {}: {err}", e.path().display()),
            }
        }
        return;
    }
    panic!("the log's files kept changing under the copy");
}

fn reopened_state(dir: &Path) -> MetaState {
    log::open(&dir.join("meta")).unwrap().0
}

fn mkdir(i: u32) -> MetaOp {
    MetaOp::Mkdir { path: format!("/d{i}"), parents: false, mode: 0o755 }
}

/// Where the records of a segment end: the zeros after them are space
/// written ahead.
fn records_end(bytes: &[u8]) -> usize {
    bytes.len() - bytes.iter().rev().take_while(|&&b| b == 0).count()
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(dir.join("meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("log-"))
        .collect();
    segs.sort();
    segs
}

/// A new pool in `dir` with `n` directories made: its state.
async fn with_dirs(dir: &Path, n: u32) -> MetaState {
    let c = open(dir, 1_000_000);
    c.initialise().await.unwrap();
    for i in 0..n {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    c.state()
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
    let live = with_dirs(tmp.path(), 5).await;
    // Reopening compacts into a snapshot; write more, then tear the last record.
    let c = open(tmp.path(), 1_000_000);
    c.execute(mkdir(100), Owner::default()).await.unwrap();
    let with_100 = c.state();
    drop(c);
    let seg = segments(tmp.path()).remove(0);
    let mut bytes = std::fs::read(&seg).unwrap();
    let end = records_end(&bytes);
    assert!(end > 0);
    // The last record loses its last bytes; the space allocated after it stays.
    bytes[end - 3..end].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let recovered = reopened_state(tmp.path());
    assert_eq!(recovered, live, "the torn record is gone, everything before it is there");
    assert_ne!(recovered, with_100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn space_written_ahead_reads_as_the_end_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let live = with_dirs(tmp.path(), 20).await;
    let segs = segments(tmp.path());
    assert_eq!(segs.len(), 1);
    let bytes = std::fs::read(&segs[0]).unwrap();
    assert!(bytes.len() as u64 >= log::RESERVE, "{} bytes: space is written ahead", bytes.len());
    assert!(records_end(&bytes) < bytes.len() && records_end(&bytes) > 0);
    // A run that ended with its segment written ahead, and then another
    // segment after it (a run that stopped between a snapshot and the
    // removal of older segments): the first is sealed, and its zeros are
    // still its end, not a corrupt record.
    let later = segs[0].with_file_name("log-00000000000099999999");
    std::fs::write(&later, vec![0u8; 4096]).unwrap();
    assert_eq!(reopened_state(tmp.path()), live);
    // Reopened: compacted, and what comes next is written after it.
    let c = open(tmp.path(), 1_000_000);
    c.execute(mkdir(100), Owner::default()).await.unwrap();
    let with_100 = c.state();
    drop(c);
    assert_eq!(reopened_state(tmp.path()), with_100);
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
    let segs = segments(tmp.path());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_fsync_acknowledges_written_changes_which_another_opener_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open_syncing(tmp.path(), 1_000_000, LogSync::Every(Duration::from_secs(3600)));
    c.initialise().await.unwrap();
    let before = c.log_syncs();
    for i in 0..50 {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    let (lsn, synced) = c.log_lsns();
    assert_eq!(c.log_syncs(), before, "50 changes acknowledged one after another, none waiting for an fsync");
    assert!(synced < lsn, "synced {synced}, logged {lsn}");
    // As after the coordinator's process is killed: the kernel holds the records.
    assert_eq!(reopened_state(tmp.path()), c.state());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_fsync_catches_up_within_its_period() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open_syncing(tmp.path(), 1_000_000, LogSync::Every(Duration::from_millis(20)));
    c.initialise().await.unwrap();
    for i in 0..50 {
        c.execute(mkdir(i), Owner::default()).await.unwrap();
    }
    let mut waited = 0;
    while c.log_lsns().1 < c.log_lsns().0 {
        assert!(waited < 500, "not fsynced after 5 s: {:?}", c.log_lsns());
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert!(c.log_syncs() < 50, "{} fsyncs for 50 changes", c.log_syncs());
}

/// `req` as a client sends it.
async fn ask(c: &Coordinator, req: CoordRequest) -> tierpool_types::Result<CoordResponse> {
    c.handle(req, bytes::Bytes::new()).await.0
}

/// `req` asking to be answered once written.
fn written(req: CoordRequest) -> CoordRequest {
    CoordRequest::Written { req: tierpool_proto::encode(&req).into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_once_written_is_kept_and_sync_log_fsyncs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open_syncing(tmp.path(), 1_000_000, LogSync::Every(Duration::from_secs(3600)));
    c.initialise().await.unwrap();
    for i in 0..20 {
        let r = ask(&c, written(CoordRequest::Meta { op: mkdir(i), owner: Owner::default() })).await.unwrap();
        assert_eq!(r, CoordResponse::Meta(MetaReply::Done));
    }
    let (lsn, synced) = c.log_lsns();
    assert!(synced < lsn, "not fsynced yet: synced {synced}, logged {lsn}");
    // As after the coordinator's process is killed: the kernel holds them.
    let copy = tempfile::tempdir().unwrap();
    copy_meta(tmp.path(), copy.path());
    assert_eq!(reopened_state(copy.path()), c.state());
    let machine = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let answer = ask(&c, CoordRequest::SyncLog).await.unwrap();
    assert_eq!(answer, CoordResponse::LogSynced { machine: machine.trim().to_owned() });
    let (lsn, synced) = c.log_lsns();
    assert_eq!(synced, lsn, "fsynced when SyncLog is answered");
    // One level only; and bytes that are no request are refused.
    let e = ask(&c, written(written(CoordRequest::Ping))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert_eq!(e.message, "a Written request carries another request, not a Written one");
    assert!(ask(&c, CoordRequest::Written { req: vec![0xff; 3].into() }).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_answered_before_an_fsync_skips_the_ids_a_crash_may_have_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("meta").join("periodic-sync");
    let first = {
        let c = open(tmp.path(), 7);
        c.initialise().await.unwrap();
        // Across snapshots (every 7 records): answered, and read back, once written.
        for i in 0..20 {
            ask(&c, written(CoordRequest::Meta { op: mkdir(i), owner: Owner::default() })).await.unwrap();
            let stat = ask(&c, written(CoordRequest::Stat { path: format!("/d{i}") })).await.unwrap();
            assert!(matches!(stat, CoordResponse::Info(_)), "{stat:?}");
        }
        assert!(marker.exists(), "written before the first answer given before its fsync");
        let live = c.state();
        drop(c);
        assert_eq!(reopened_state(tmp.path()), live);
        live.stat("/d19").unwrap().id.0
    };
    let c = open(tmp.path(), 7);
    c.initialise().await.unwrap();
    assert!(!marker.exists(), "this run has answered nothing before its fsync yet");
    let MetaReply::Inodes { first: next, .. } =
        c.execute(MetaOp::AllocInodes { count: 1 }, Owner::default()).await.unwrap()
    else {
        panic!("no inodes")
    };
    assert!(next.0 > first + (1 << 32), "{} after {first}", next.0);
}

/// A removed file, due for collection at once (no grace): `true` if the
/// coordinator collected it within a while.
async fn collected_after_removal(c: &Coordinator) -> bool {
    let MetaReply::Inodes { first, .. } = c.execute(MetaOp::AllocInodes { count: 1 }, Owner::default()).await.unwrap()
    else {
        panic!("no inodes")
    };
    let data = bytes::Bytes::from_static(b"small");
    let put = MetaOp::CommitInline {
        path: "/f".into(),
        inode: first,
        data,
        chunk_size: DEFAULT_CHUNK_SIZE,
        attrs: ChunkAttrs::default(),
        mode: 0o644,
        overwrite: false,
    };
    c.execute(put, Owner::default()).await.unwrap();
    c.execute(MetaOp::Remove { path: "/f".into(), recursive: false }, Owner::default()).await.unwrap();
    assert_eq!(c.state().pending_gc().len(), 1);
    for _ in 0..50 {
        c.tick();
        tokio::time::sleep(Duration::from_millis(10)).await;
        if c.state().pending_gc().is_empty() {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_collected_on_the_strength_of_a_change_not_yet_fsynced() {
    let tmp = tempfile::tempdir().unwrap();
    let c = open_syncing(tmp.path(), 1_000_000, LogSync::Every(Duration::from_secs(3600)));
    c.initialise().await.unwrap();
    assert!(!collected_after_removal(&c).await, "a removal a crash of the machine could take back was collected");
    // The same with an fsync before every acknowledgement: collected.
    let tmp = tempfile::tempdir().unwrap();
    let c = open_syncing(tmp.path(), 1_000_000, LogSync::Always);
    c.initialise().await.unwrap();
    assert!(collected_after_removal(&c).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_changes_across_snapshots_are_kept_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    // A snapshot every 7 records: writers keep meeting one in the queue,
    // which they leave to the flusher thread with what follows it.
    let c = open(tmp.path(), 7);
    c.initialise().await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300 {
        let c = c.clone();
        tasks.spawn(async move { c.execute(mkdir(i), Owner::default()).await.unwrap() });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let live = c.state();
    let copy = tempfile::tempdir().unwrap();
    copy_meta(tmp.path(), copy.path());
    assert_eq!(reopened_state(copy.path()), live, "read as a restart would, while the pool runs");
    // Closed, with snapshots written by threads of their own meanwhile:
    // the last one and the segments after it hold every record.
    drop(c);
    let segs = segments(tmp.path());
    assert_eq!(segs.len(), 1, "segments a written snapshot covers are dropped: {segs:?}");
    assert_eq!(reopened_state(tmp.path()), live);
}

#[test]
fn records_no_one_waits_for_are_written_by_the_flusher_thread() {
    use tierpool_coordinator::records::{encode_record, LogRecord};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("meta");
    let (mut state, lsn, writer) = log::open(&dir).unwrap();
    assert_eq!(lsn, 0);
    for (lsn, op) in [(1, MetaOp::Init { partitions: 16 }), (2, mkdir(1)), (3, mkdir(2))] {
        let rec = LogRecord { lsn, time: 1, owner: Owner::default(), op };
        state.execute_as(&rec.op, rec.owner, rec.time).unwrap();
        let mut bytes = Vec::new();
        encode_record(&rec, &mut bytes);
        writer.append(bytes, lsn);
    }
    // Nothing waits on the writer: its flusher thread writes them (every
    // few milliseconds), with the writer still open.
    let copy = tempfile::tempdir().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let _ = std::fs::remove_dir_all(copy.path().join("meta"));
        copy_meta(tmp.path(), copy.path());
        if reopened_state(copy.path()) == state {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "records queued 10 s ago are not in the log");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(writer);
}
