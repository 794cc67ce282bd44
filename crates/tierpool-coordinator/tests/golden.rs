//! The golden files of the coordinator's durable formats (see
//! `tests/golden/README.md`) decode and replay to the states they were
//! written from, and the current version still encodes them byte for byte.

#[path = "golden/dump.rs"]
mod dump;

use std::path::PathBuf;
use tierpool_coordinator::log;
use tierpool_coordinator::records::{decode_record, decode_snapshot, encode_record, encode_record_in};
use tierpool_coordinator::records::{encode_snapshot, encode_snapshot_in, Decoded, LogRecord};
use tierpool_meta::{MetaOp, MetaState, Owner};

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(golden(name)).unwrap()
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(golden(name)).unwrap()
}

fn records(seg: &[u8]) -> Vec<LogRecord> {
    let (mut out, mut off) = (Vec::new(), 0);
    loop {
        match decode_record(&seg[off..]) {
            Decoded::Record(r, used) => {
                out.push(r);
                off += used;
            }
            Decoded::End => return out,
            other => panic!("golden segment at byte {off}: {other:?}"),
        }
    }
}

#[test]
fn log_v1_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v1");
    let recs = records(&seg);
    assert_eq!(recs.len(), 28);
    assert_eq!(recs.iter().map(|r| r.lsn).collect::<Vec<_>>(), (1..=28).collect::<Vec<_>>());
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    }
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v1.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(1, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 1 no longer encode as they did");
}

#[test]
fn snapshot_v2_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v2");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 28);
    assert_eq!(dump::dump(&state), expected("state-log-v1.txt"));
    assert!(
        encode_snapshot_in(2, lsn, &state).unwrap() == bytes,
        "snapshots of version 2 no longer encode as they did"
    );
}

#[test]
fn snapshot_v1_is_migrated_to_its_state() {
    let (lsn, state) = decode_snapshot(&read("snapshot-v1")).unwrap();
    assert_eq!(lsn, 77);
    assert_eq!(dump::dump(&state), expected("state-snapshot-v1.txt"));
    // Written back in the current version, it reads back the same.
    let (lsn2, state2) = decode_snapshot(&encode_snapshot(lsn, &state)).unwrap();
    assert_eq!((lsn2, dump::dump(&state2)), (77, expected("state-snapshot-v1.txt")));
}

/// What a coordinator finds in its directory after an upgrade: an old
/// snapshot, or a segment of old records. It recovers the same state.
#[test]
fn a_coordinator_recovers_from_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::copy(golden("log-v1"), meta.join(format!("log-{:020}", 1))).unwrap();
    let (state, lsn, _writer) = log::open(&meta).unwrap();
    assert_eq!((lsn, dump::dump(&state)), (28, expected("state-log-v1.txt")));

    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::copy(golden("snapshot-v1"), meta.join("snapshot")).unwrap();
    let (state, lsn, _writer) = log::open(&meta).unwrap();
    assert_eq!((lsn, dump::dump(&state)), (77, expected("state-snapshot-v1.txt")));
}

#[test]
fn log_v2_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v2");
    let recs = records(&seg);
    assert_eq!(recs.len(), 29);
    assert!(matches!(recs[28].op, MetaOp::Retire { .. }));
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    }
    assert_eq!(dump::dump(&state), expected("state-log-v2.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(2, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 2 no longer encode as they did");
}

#[test]
fn snapshot_v3_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v3");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 29);
    assert_eq!(dump::dump(&state), expected("state-log-v2.txt"));
    assert!(
        encode_snapshot_in(3, lsn, &state).unwrap() == bytes,
        "snapshots of version 3 no longer encode as they did"
    );
}

#[test]
fn log_v3_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v3");
    let recs = records(&seg);
    assert_eq!(recs.len(), 36);
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    }
    assert_eq!(dump::dump(&state), expected("state-log-v3.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(3, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 3 no longer encode as they did");
}

#[test]
fn snapshot_v4_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v4");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 36);
    assert_eq!(dump::dump(&state), expected("state-log-v3.txt"));
    assert!(
        encode_snapshot_in(4, lsn, &state).unwrap() == bytes,
        "snapshots of version 4 no longer encode as they did"
    );
}

#[test]
fn log_v4_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v4");
    let recs = records(&seg);
    assert_eq!(recs.len(), 38);
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    }
    assert_eq!(dump::dump(&state), expected("state-log-v4.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record(r, &mut again);
    }
    assert!(again == seg, "log records of version 4 no longer encode as they did");
    // Older versions cannot hold a speed: an error, not a silent loss.
    assert!(encode_record_in(3, &recs[36], &mut Vec::new()).is_err());
    assert!(encode_snapshot_in(4, 38, &state).is_err());
}

#[test]
fn snapshot_v5_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v5");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 38);
    assert_eq!(dump::dump(&state), expected("state-log-v4.txt"));
    assert!(encode_snapshot(lsn, &state) == bytes, "snapshots of version 5 no longer encode as they did");
}

/// The ops of `log-v3`, then worker 8 slowed to 40% of a healthy worker's
/// bandwidth and worker 1 to 25% (ops 37 and 38).
fn log_v4_records() -> Vec<LogRecord> {
    let mut recs = log_v3_records();
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap();
    }
    for (id, percent) in [(8, 40), (1, 25)] {
        let last = recs.last().unwrap().clone();
        let op = MetaOp::SetSpeed { id: tierpool_types::WorkerId(id), percent };
        let r = LogRecord { lsn: last.lsn + 1, time: last.time + 1_000_000_007, owner: Owner::default(), op };
        state.execute_as(&r.op, r.owner, r.time).unwrap();
        recs.push(r);
    }
    recs
}

/// The ops of `log-v2` and then a worker joining, a move begun, one
/// finished, one given up, a drain and a rebalance (ops 30 to 35).
fn log_v3_records() -> Vec<LogRecord> {
    let mut recs = records(&read("log-v2"));
    let mut state = MetaState::new();
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap();
    }
    let push = |recs: &mut Vec<LogRecord>, state: &mut MetaState, op: MetaOp| {
        let last = recs.last().unwrap().clone();
        let r = LogRecord { lsn: last.lsn + 1, time: last.time + 1_000_000_007, owner: Owner::default(), op };
        state.execute_as(&r.op, r.owner, r.time).unwrap();
        recs.push(r);
    };
    let join = MetaOp::RegisterWorker {
        id: None,
        addr: "127.0.0.1:7703".into(),
        host: "h3".into(),
        rack: "r1".into(),
        mem_capacity: 256 << 20,
        disk_capacity: 4 << 30,
        at_once: false,
    };
    push(&mut recs, &mut state, join);
    let moves = tierpool_placement::plan::next_moves(state.table(), state.goal(), 2);
    let ps: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
    push(&mut recs, &mut state, MetaOp::BeginMoves { moves });
    push(&mut recs, &mut state, MetaOp::FinishMoves { partitions: vec![ps[0]] });
    push(&mut recs, &mut state, MetaOp::AbortMoves { partitions: vec![ps[1]] });
    push(&mut recs, &mut state, MetaOp::DrainWorker { id: tierpool_types::WorkerId(1) });
    push(&mut recs, &mut state, MetaOp::Rebalance);
    push(&mut recs, &mut state, MetaOp::RemoveWorker { id: tierpool_types::WorkerId(7) });
    recs
}

/// Writes the golden files of the current versions once, when asked
/// (`TIERPOOL_WRITE_GOLDEN=1`) and only if they are missing.
#[test]
#[ignore = "writes the golden files of a new version: TIERPOOL_WRITE_GOLDEN=1 cargo test --test golden -- --ignored"]
fn write_missing_golden_files_of_the_current_versions() {
    if std::env::var_os("TIERPOOL_WRITE_GOLDEN").is_none() || golden("log-v4").exists() {
        return;
    }
    let recs = log_v4_records();
    let (mut seg, mut state) = (Vec::new(), MetaState::new());
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap();
        encode_record(r, &mut seg);
    }
    std::fs::write(golden("log-v4"), seg).unwrap();
    std::fs::write(golden("snapshot-v5"), encode_snapshot(recs.len() as u64, &state)).unwrap();
    std::fs::write(golden("state-log-v4.txt"), dump::dump(&state)).unwrap();
}
