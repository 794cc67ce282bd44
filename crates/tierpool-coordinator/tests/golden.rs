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
use tierpool_types::WorkerId;

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
    let cases: &[(&str, u64, &str)] = &[
        ("log-v1", 28, "state-log-v1.txt"),
        ("snapshot-v1", 77, "state-snapshot-v1.txt"),
        ("log-v5", 51, "state-log-v5.txt"),
        ("snapshot-v6", 51, "state-log-v5.txt"),
        ("log-v6", 59, "state-log-v6.txt"),
        ("snapshot-v7", 59, "state-log-v6.txt"),
        ("log-v7", 72, "state-log-v7.txt"),
        ("snapshot-v8", 72, "state-log-v7.txt"),
        ("log-v8", 76, "state-log-v8.txt"),
        ("log-v9", LOG_V9_RECORDS, "state-log-v9.txt"),
        ("snapshot-v9", LOG_V9_RECORDS, "state-log-v9.txt"),
        ("log-v10", LOG_V10_RECORDS, "state-log-v10.txt"),
        ("snapshot-v10", LOG_V10_RECORDS, "state-log-v10.txt"),
        ("log-v11", LOG_V11_RECORDS, "state-log-v11.txt"),
        ("snapshot-v11", LOG_V11_RECORDS, "state-log-v11.txt"),
        ("log-v12", LOG_V12_RECORDS, "state-log-v12.txt"),
        ("snapshot-v12", LOG_V12_RECORDS, "state-log-v12.txt"),
        ("log-v13", LOG_V13_RECORDS, "state-log-v13.txt"),
        ("log-v14", LOG_V14_RECORDS, "state-log-v14.txt"),
        ("snapshot-v13", LOG_V14_RECORDS, "state-log-v14.txt"),
        ("log-v15", LOG_V15_RECORDS, "state-log-v15.txt"),
        ("log-v16", LOG_V16_RECORDS, "state-log-v16.txt"),
        ("snapshot-v14", LOG_V16_RECORDS, "state-log-v16.txt"),
        ("log-v17", LOG_V17_RECORDS, "state-log-v17.txt"),
    ];
    for (file, lsn, state) in cases {
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join("meta");
        std::fs::create_dir_all(&meta).unwrap();
        // A snapshot file, or the first segment of the log.
        let name = if file.starts_with("snapshot") { "snapshot".to_string() } else { format!("log-{:020}", 1) };
        std::fs::copy(golden(file), meta.join(name)).unwrap();
        let (recovered, at, _writer) = log::open(&meta).unwrap();
        assert_eq!((at, dump::dump(&recovered)), (*lsn, expected(state)), "{file}");
    }
}

/// Records in `log-v16`.
const LOG_V16_RECORDS: u64 = 136;
/// Records in `log-v17`.
const LOG_V17_RECORDS: u64 = 140;

/// Records in `log-v15`.
const LOG_V15_RECORDS: u64 = 130;

/// Records in `log-v14`.
const LOG_V14_RECORDS: u64 = 124;

/// Records in `log-v13`.
const LOG_V13_RECORDS: u64 = 119;

/// Records in `log-v12`.
const LOG_V12_RECORDS: u64 = 111;

/// Records in `log-v11`.
const LOG_V11_RECORDS: u64 = 103;

/// Records in `log-v10`.
const LOG_V10_RECORDS: u64 = 93;

/// Records in `log-v9`.
const LOG_V9_RECORDS: u64 = 83;

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
        encode_record_in(4, r, &mut again).unwrap();
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
    assert!(
        encode_snapshot_in(5, lsn, &state).unwrap() == bytes,
        "snapshots of version 5 no longer encode as they did"
    );
}

#[test]
fn log_v5_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v5");
    let recs = records(&seg);
    assert_eq!(recs.len(), 51);
    assert_eq!(recs.iter().map(|r| r.lsn).collect::<Vec<_>>(), (1..=51).collect::<Vec<_>>());
    assert_eq!(recs[1].op, MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Host });
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v5.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(5, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 5 no longer encode as they did");
    // Older versions cannot hold an op of replication, nor a snapshot
    // before version 6 the state: an error, not a silent loss.
    let replication = |op: &MetaOp| {
        matches!(
            op,
            MetaOp::SetReplication { .. }
                | MetaOp::WorkerDown { .. }
                | MetaOp::WorkerUp { .. }
                | MetaOp::SetReplicas { .. }
        )
    };
    assert_eq!(recs.iter().filter(|r| replication(&r.op)).count(), 6);
    for r in recs.iter().filter(|r| replication(&r.op)) {
        assert!(encode_record_in(4, r, &mut Vec::new()).is_err(), "lsn {}", r.lsn);
    }
    for v in 2..=5 {
        assert!(encode_snapshot_in(v, 51, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn snapshot_v6_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v6");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 51);
    assert_eq!(dump::dump(&state), expected("state-log-v5.txt"));
    // Every field, not only what the queries show (copies per path as set,
    // moves from no owner, the goal's unowned slots).
    assert_eq!(state, replay(&records(&read("log-v5"))));
    assert!(
        encode_snapshot_in(6, lsn, &state).unwrap() == bytes,
        "snapshots of version 6 no longer encode as they did"
    );
}

/// A state of one replica per partition is stored in version 6 as version
/// 5 stored it, followed by the (empty) fields of replication; and in
/// version 7 as version 6 stored it, followed by the (empty) fields of
/// placement; in version 8 as version 7 did, followed by the (empty)
/// fields of under-stores.
#[test]
fn snapshot_v6_of_one_replica_nests_the_bytes_of_version_5() {
    let v5 = read("snapshot-v5");
    let (lsn, state) = decode_snapshot(&v5).unwrap();
    let v6 = encode_snapshot_in(6, lsn, &state).unwrap();
    assert_eq!(v6[6], 6);
    assert!(v6[19..].starts_with(&v5[19..]), "the nested version 5 state differs");
    assert_eq!(decode_snapshot(&v6).unwrap(), (lsn, state.clone()));
    let v7 = encode_snapshot_in(7, lsn, &state).unwrap();
    assert_eq!(v7[6], 7);
    assert!(v7[19..].starts_with(&v6[19..]), "the nested version 6 state differs");
    assert_eq!(decode_snapshot(&v7).unwrap(), (lsn, state.clone()));
    let v8 = encode_snapshot_in(8, lsn, &state).unwrap();
    assert_eq!(v8[6], 8);
    assert!(v8[19..].starts_with(&v7[19..]), "the nested version 7 state differs");
    assert_eq!(decode_snapshot(&v8).unwrap(), (lsn, state.clone()));
    let v9 = encode_snapshot_in(9, lsn, &state).unwrap();
    assert_eq!(v9[6], 9);
    assert!(v9[19..].starts_with(&v8[19..]), "the nested version 8 state differs");
    assert_eq!(decode_snapshot(&v9).unwrap(), (lsn, state.clone()));
    let v10 = encode_snapshot_in(10, lsn, &state).unwrap();
    assert_eq!(v10[6], 10);
    assert!(v10[19..].starts_with(&v9[19..]), "the nested version 9 state differs");
    assert_eq!(decode_snapshot(&v10).unwrap(), (lsn, state.clone()));
    let v11 = encode_snapshot_in(11, lsn, &state).unwrap();
    assert_eq!(v11[6], 11);
    assert!(v11[19..].starts_with(&v10[19..]), "the nested version 10 state differs");
    assert_eq!(decode_snapshot(&v11).unwrap(), (lsn, state.clone()));
    let v12 = encode_snapshot_in(12, lsn, &state).unwrap();
    assert_eq!(v12[6], 12);
    assert!(v12[19..].starts_with(&v11[19..]), "the nested version 11 state differs");
    assert_eq!(decode_snapshot(&v12).unwrap(), (lsn, state.clone()));
    let v13 = encode_snapshot_in(13, lsn, &state).unwrap();
    assert_eq!(v13[6], 13);
    assert!(v13[19..].starts_with(&v12[19..]), "the nested version 12 state differs");
    assert_eq!(decode_snapshot(&v13).unwrap(), (lsn, state.clone()));
    let v14 = encode_snapshot(lsn, &state);
    assert_eq!(v14[6], 14);
    assert!(v14[19..].starts_with(&v13[19..]), "the nested version 13 state differs");
    assert_eq!(decode_snapshot(&v14).unwrap(), (lsn, state));
}

#[test]
fn log_v6_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v6");
    let recs = records(&seg);
    assert_eq!(recs.len(), 59);
    assert_eq!(recs[1].op, MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Rack });
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v6.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(6, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 6 no longer encode as they did");
    for v in 2..=6 {
        assert!(encode_snapshot_in(v, 59, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn snapshot_v7_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v7");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 59);
    assert_eq!(dump::dump(&state), expected("state-log-v6.txt"));
    assert_eq!(state, replay(&records(&read("log-v6"))));
    assert!(
        encode_snapshot_in(7, lsn, &state).unwrap() == bytes,
        "snapshots of version 7 no longer encode as they did"
    );
}

#[test]
fn log_v7_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v7");
    let recs = records(&seg);
    assert_eq!(recs.len(), 72);
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v7.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(7, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 7 no longer encode as they did");
    for v in 2..=7 {
        assert!(encode_snapshot_in(v, 72, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn log_v8_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v8");
    let recs = records(&seg);
    assert_eq!(recs.len(), 76);
    assert_eq!(recs[..72], records(&read("log-v7"))[..], "the records of log-v7 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v8.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(8, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 8 no longer encode as they did");
    let keyed = recs.iter().filter(|r| matches!(r.op, MetaOp::Persisted { key: Some(_), .. })).count();
    assert_eq!(keyed, 1);
}

#[test]
fn snapshot_v8_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v8");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 72);
    assert_eq!(dump::dump(&state), expected("state-log-v7.txt"));
    assert_eq!(state, replay(&records(&read("log-v7"))));
    assert!(
        encode_snapshot_in(8, lsn, &state).unwrap() == bytes,
        "snapshots of version 8 no longer encode as they did"
    );
}

#[test]
fn log_v9_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v9");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V9_RECORDS);
    assert_eq!(recs[..76], records(&read("log-v8"))[..], "the records of log-v8 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v9.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(9, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 9 no longer encode as they did");
    let inline = recs.iter().filter(|r| matches!(r.op, MetaOp::CommitInline { .. })).count();
    assert_eq!(inline, 4);
    for r in recs.iter().filter(|r| matches!(r.op, MetaOp::CommitInline { .. })) {
        assert!(encode_record_in(8, r, &mut Vec::new()).is_err());
    }
}

#[test]
fn snapshot_v9_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v9");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V9_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v9.txt"));
    assert_eq!(state, replay(&records(&read("log-v9"))));
    assert!(
        encode_snapshot_in(9, lsn, &state).unwrap() == bytes,
        "snapshots of version 9 no longer encode as they did"
    );
    assert_eq!(state.inline_usage(), (2, 11 + 5));
    for v in 2..=8 {
        assert!(encode_snapshot_in(v, lsn, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn log_v10_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v10");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V10_RECORDS);
    assert_eq!(recs[..LOG_V9_RECORDS as usize], records(&read("log-v9"))[..], "the records of log-v9 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v10.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(10, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 10 no longer encode as they did");
    let snapshot_ops = |r: &&LogRecord| {
        matches!(r.op, MetaOp::SnapshotCreate { .. } | MetaOp::SnapshotRemove { .. } | MetaOp::SnapshotRestore { .. })
    };
    assert_eq!(recs.iter().filter(snapshot_ops).count(), 6);
    for r in recs.iter().filter(snapshot_ops) {
        assert!(encode_record_in(9, r, &mut Vec::new()).is_err());
    }
}

#[test]
fn snapshot_v10_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v10");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V10_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v10.txt"));
    assert_eq!(state, replay(&records(&read("log-v10"))));
    assert!(
        encode_snapshot_in(10, lsn, &state).unwrap() == bytes,
        "snapshots of version 10 no longer encode as they did"
    );
    assert_eq!(state.snapshots(None).unwrap().len(), 2);
    for v in 2..=9 {
        assert!(encode_snapshot_in(v, lsn, &state).is_err(), "snapshot version {v}");
    }
}

/// Replays `recs` from an empty state.
fn replay(recs: &[LogRecord]) -> MetaState {
    let mut state = MetaState::new();
    for r in recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    }
    state
}

/// Runs `op` and appends it as the next record (as the owner root, a
/// second and a bit after the last one).
fn push(recs: &mut Vec<LogRecord>, state: &mut MetaState, op: MetaOp) {
    let last = recs.last().unwrap().clone();
    let r = LogRecord { lsn: last.lsn + 1, time: last.time + 1_000_000_007, owner: Owner::default(), op };
    state.execute_as(&r.op, r.owner, r.time).unwrap_or_else(|e| panic!("lsn {}: {e}", r.lsn));
    recs.push(r);
}

/// The next `room` moves toward the goal.
fn next_moves(state: &MetaState, room: usize) -> Vec<(u32, WorkerId)> {
    tierpool_placement::plan::next_moves(state.table(), state.goal(), room)
}

/// What `log-v3` added to `log-v2`: a worker joining, a move begun, one
/// finished, one given up, a drain, a rebalance and a removal.
fn membership_changes(recs: &mut Vec<LogRecord>, state: &mut MetaState) {
    let join = MetaOp::RegisterWorker {
        id: None,
        addr: "127.0.0.1:7703".into(),
        host: "h3".into(),
        rack: "r1".into(),
        mem_capacity: 256 << 20,
        disk_capacity: 4 << 30,
        at_once: false,
    };
    push(recs, state, join);
    let moves = next_moves(state, 2);
    let ss: Vec<u32> = moves.iter().map(|(s, _)| *s).collect();
    push(recs, state, MetaOp::BeginMoves { moves });
    push(recs, state, MetaOp::FinishMoves { partitions: vec![ss[0]] });
    push(recs, state, MetaOp::AbortMoves { partitions: vec![ss[1]] });
    push(recs, state, MetaOp::DrainWorker { id: WorkerId(1) });
    push(recs, state, MetaOp::Rebalance);
    push(recs, state, MetaOp::RemoveWorker { id: WorkerId(7) });
}

/// What `log-v4` added to `log-v3`: worker 8 slowed to 40% of a healthy
/// worker's bandwidth and worker 1 to 25%.
fn slow_workers(recs: &mut Vec<LogRecord>, state: &mut MetaState) {
    for (id, percent) in [(8, 40), (1, 25)] {
        push(recs, state, MetaOp::SetSpeed { id: WorkerId(id), percent });
    }
}

/// The ops of `log-v2` on a pool keeping two replicas of each partition
/// (`SetReplication` right after `Init`, as op 2; the later ops shift by
/// one lsn and keep their times), what `log-v3` and `log-v4` added, and
/// then replication at work (ops 40 to 51): a worker joining, copies per
/// path set (recursively and not), moves toward the joiner; worker 8 down,
/// repairs of its slots from their siblings begun and two finished;
/// worker 8 back up and a move toward it finished; worker 9 down in the
/// middle of moves (one of them a repair from no owner).
fn log_v5_records() -> Vec<LogRecord> {
    let v2 = records(&read("log-v2"));
    let replication = LogRecord {
        lsn: 2,
        time: v2[0].time + 1,
        owner: Owner::default(),
        op: MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Host },
    };
    let mut recs = vec![v2[0].clone(), replication];
    recs.extend(v2[1..].iter().map(|r| LogRecord { lsn: r.lsn + 1, ..r.clone() }));
    let mut state = replay(&recs);
    membership_changes(&mut recs, &mut state);
    slow_workers(&mut recs, &mut state);
    let join = MetaOp::RegisterWorker {
        id: None,
        addr: "127.0.0.1:7704".into(),
        host: "h4".into(),
        rack: "r2".into(),
        mem_capacity: 256 << 20,
        disk_capacity: 4 << 30,
        at_once: false,
    };
    push(&mut recs, &mut state, join);
    push(&mut recs, &mut state, MetaOp::SetReplicas { path: "/home".into(), replicas: 1, recursive: true });
    push(&mut recs, &mut state, MetaOp::SetReplicas { path: "/data/a.bin".into(), replicas: 2, recursive: false });
    let moves = next_moves(&state, 8);
    let ss: Vec<u32> = moves.iter().map(|(s, _)| *s).collect();
    push(&mut recs, &mut state, MetaOp::BeginMoves { moves });
    push(&mut recs, &mut state, MetaOp::FinishMoves { partitions: ss });
    push(&mut recs, &mut state, MetaOp::WorkerDown { id: WorkerId(8) });
    let repairs = next_moves(&state, 4);
    let ss: Vec<u32> = repairs.iter().map(|(s, _)| *s).collect();
    push(&mut recs, &mut state, MetaOp::BeginMoves { moves: repairs });
    push(&mut recs, &mut state, MetaOp::FinishMoves { partitions: ss[..2].to_vec() });
    push(&mut recs, &mut state, MetaOp::WorkerUp { id: WorkerId(8) });
    let moves = next_moves(&state, 4);
    let first = moves[0].0;
    push(&mut recs, &mut state, MetaOp::BeginMoves { moves });
    push(&mut recs, &mut state, MetaOp::FinishMoves { partitions: vec![first] });
    push(&mut recs, &mut state, MetaOp::WorkerDown { id: WorkerId(9) });
    recs
}

/// The records of `log-v6`: those of `log-v5` on a pool keeping its two
/// replicas on distinct racks (lsn 2), then placement: a directory placed
/// `local`, a file in it with chunks in homes, one of them replaced (its
/// old version awaiting collection, then collected), a tree placed
/// `round-robin` recursively, a file placed `local-only`.
fn log_v6_records() -> Vec<LogRecord> {
    use tierpool_types::{ChunkRef, InodeId, Placement, Spread};
    let mut recs = log_v5_records();
    recs[1].op = MetaOp::SetReplication { replicas: 2, spread: Spread::Rack };
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::Mkdir { path: "/near".into(), parents: false, mode: 0o755 });
    let local = MetaOp::SetPlacement { path: "/near".into(), placement: Placement::Local, recursive: false };
    push(&mut recs, &mut state, local);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 4 });
    let id = InodeId(state.next_inode().0 - 4);
    let commit = MetaOp::CommitFile {
        path: "/near/f".into(),
        inode: id,
        size: 2 * 4096 + 10,
        chunk_size: 4096,
        checksums: vec![11, 12, 13],
        homes: vec![Some(3), None, Some(15)],
        attrs: Default::default(),
        mode: 0o644,
        overwrite: false,
    };
    push(&mut recs, &mut state, commit);
    let newer = ChunkRef { version: id.0 + 1, len: 4096, checksum: 14, home: Some(9) };
    push(
        &mut recs,
        &mut state,
        MetaOp::UpdateFile { inode: id, size: 2 * 4096 + 10, truncate: None, chunks: vec![(0, newer)] },
    );
    let replaced = ChunkRef { version: 1, len: 4096, checksum: 11, home: Some(3) }.key(id, 0);
    push(&mut recs, &mut state, MetaOp::GcChunksDone { keys: vec![replaced] });
    let rr = MetaOp::SetPlacement { path: "/home".into(), placement: Placement::RoundRobin, recursive: true };
    push(&mut recs, &mut state, rr);
    let only = MetaOp::SetPlacement { path: "/data/a.bin".into(), placement: Placement::LocalOnly, recursive: false };
    push(&mut recs, &mut state, only);
    recs
}

/// The records of `log-v7`: those of `log-v6`, then under-stores: one
/// attached (through, with options) and its tree adopted (a directory, a
/// file of three chunks, one of them loaded, then all let go; a changed
/// object adopted again), a file made in the pool and persisted, another
/// store attached read-only in pool-only mode and detached.
fn log_v7_records() -> Vec<LogRecord> {
    use tierpool_meta::{Attachment, NewNode, WriteMode};
    use tierpool_types::ChunkRef;
    let mut recs = log_v6_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::Mkdir { path: "/lake".into(), parents: false, mode: 0o755 });
    let options = [("endpoint".to_string(), "http://127.0.0.1:9000".to_string())].into();
    let a = Attachment { uri: "s3://lake/2026".into(), mode: WriteMode::Through, readonly: false, options };
    push(&mut recs, &mut state, MetaOp::Attach { path: "/lake".into(), attachment: a });
    let lake = state.stat("/lake").unwrap().id;
    push(&mut recs, &mut state, MetaOp::AdoptDir { parent: lake, name: "day0".into(), mode: 0o755 });
    push(&mut recs, &mut state, MetaOp::Disown { parent: lake, name: "day0".into() });
    push(&mut recs, &mut state, MetaOp::AdoptDir { parent: lake, name: "day1".into(), mode: 0o755 });
    let day1 = state.stat("/lake/day1").unwrap().id;
    let adopt = |etag: &str, size: u64| MetaOp::AdoptFile {
        parent: day1,
        name: "part-0".into(),
        size,
        chunk_size: 4096,
        mtime: 1_700_000_000_000_000_000,
        etag: etag.into(),
        mode: 0o644,
    };
    push(&mut recs, &mut state, adopt("e1", 2 * 4096 + 5));
    let f = state.stat("/lake/day1/part-0").unwrap().id;
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 4 });
    let v = state.next_inode().0 - 4;
    let loaded = ChunkRef { version: v, len: 4096, checksum: 21, home: None };
    push(&mut recs, &mut state, MetaOp::LoadChunks { inode: f, chunks: vec![(1, loaded)] });
    push(&mut recs, &mut state, MetaOp::Unload { inode: f });
    push(&mut recs, &mut state, adopt("e2", 100));
    let made =
        MetaOp::MakeAt { parent: lake, name: "new".into(), node: NewNode::File { chunk_size: 4096 }, mode: 0o644 };
    push(&mut recs, &mut state, made);
    let n = state.stat("/lake/new").unwrap().id;
    let w = ChunkRef { version: v + 1, len: 7, checksum: 22, home: None };
    push(&mut recs, &mut state, MetaOp::UpdateFile { inode: n, size: 7, truncate: None, chunks: vec![(0, w)] });
    let persisted = MetaOp::Persisted { inode: n, chunks: vec![w], size: 7, mtime: 33, etag: "e3".into(), key: None };
    push(&mut recs, &mut state, persisted);
    recs
}

/// The records of `log-v8`: those of `log-v7`, then the file made in the
/// pool changed, renamed, and persisted naming its new key.
fn log_v8_records() -> Vec<LogRecord> {
    use tierpool_types::ChunkRef;
    let mut recs = log_v7_records();
    let mut state = replay(&recs);
    let n = state.stat("/lake/new").unwrap().id;
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let v = state.next_inode().0 - 1;
    let w = ChunkRef { version: v, len: 9, checksum: 23, home: None };
    push(&mut recs, &mut state, MetaOp::UpdateFile { inode: n, size: 9, truncate: None, chunks: vec![(0, w)] });
    push(&mut recs, &mut state, MetaOp::Rename { from: "/lake/new".into(), to: "/lake/renamed".into() });
    let persisted = MetaOp::Persisted {
        inode: n,
        chunks: vec![w],
        size: 9,
        mtime: 44,
        etag: "e4".into(),
        key: Some("renamed".into()),
    };
    push(&mut recs, &mut state, persisted);
    recs
}

/// The records of `log-v9`: those of `log-v8`, then small files kept
/// inline: one written, one replacing another inline file, one beneath the
/// attachment; the replaced one's successor rewritten on the workers.
fn log_v9_records() -> Vec<LogRecord> {
    use tierpool_types::{ChunkAttrs, ChunkRef, InodeId};
    let mut recs = log_v8_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 4 });
    let first = state.next_inode().0 - 4;
    let inline = |path: &str, inode: u64, data: &'static [u8]| MetaOp::CommitInline {
        path: path.into(),
        inode: InodeId(inode),
        data: bytes::Bytes::from_static(data),
        chunk_size: 1 << 20,
        attrs: ChunkAttrs::default(),
        mode: 0o640,
        overwrite: true,
    };
    push(&mut recs, &mut state, inline("/lake/small", first, b"hello small"));
    push(&mut recs, &mut state, inline("/twice", first + 1, b"first"));
    push(&mut recs, &mut state, inline("/twice", first + 2, b"again"));
    let w = ChunkRef { version: first + 3, len: 6, checksum: 24, home: None };
    push(
        &mut recs,
        &mut state,
        MetaOp::UpdateFile { inode: InodeId(first + 2), size: 6, truncate: None, chunks: vec![(0, w)] },
    );
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let last = state.next_inode().0 - 1;
    push(&mut recs, &mut state, inline("/tiny", last, b"tiny!"));
    recs
}

/// The records of `log-v10`: those of `log-v9`, then snapshots: of a
/// directory holding a hard link, a symlink and a device, of a directory
/// whose chunks have homes, and of an inline file; the live files then
/// rewritten and removed, one snapshot restored and one removed.
fn log_v10_records() -> Vec<LogRecord> {
    use tierpool_types::ChunkRef;
    let mut recs = log_v9_records();
    let mut state = replay(&recs);
    let snap = |path: &str, name: &str| MetaOp::SnapshotCreate { path: path.into(), name: name.into() };
    push(&mut recs, &mut state, snap("/home", "monday"));
    push(&mut recs, &mut state, snap("/near", "before"));
    push(&mut recs, &mut state, snap("/tiny", "t"));
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let v = state.next_inode().0 - 1;
    let near = state.stat("/near/f").unwrap().id;
    let w = ChunkRef { version: v, len: 4096, checksum: 25, home: Some(9) };
    push(&mut recs, &mut state, MetaOp::UpdateFile { inode: near, size: 8202, truncate: None, chunks: vec![(0, w)] });
    push(&mut recs, &mut state, MetaOp::Remove { path: "/home/b.bin".into(), recursive: false });
    push(&mut recs, &mut state, MetaOp::Remove { path: "/tiny".into(), recursive: false });
    push(&mut recs, &mut state, MetaOp::SnapshotRestore { path: "/near".into(), name: "before".into() });
    push(&mut recs, &mut state, MetaOp::SnapshotRestore { path: "/tiny".into(), name: "t".into() });
    push(&mut recs, &mut state, MetaOp::SnapshotRemove { path: "/tiny".into(), name: "t".into() });
    recs
}

#[test]
fn log_v11_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v11");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V11_RECORDS);
    assert_eq!(recs[..LOG_V10_RECORDS as usize], records(&read("log-v10"))[..], "the records of log-v10 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v11.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(11, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 11 no longer encode as they did");
    let checkpoint_ops = |r: &&LogRecord| matches!(r.op, MetaOp::Checkpoint { .. } | MetaOp::RegionRestore { .. });
    assert_eq!(recs.iter().filter(checkpoint_ops).count(), 5);
    for r in recs.iter().filter(checkpoint_ops) {
        assert!(encode_record_in(10, r, &mut Vec::new()).is_err());
    }
}

#[test]
fn snapshot_v11_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v11");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V11_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v11.txt"));
    assert_eq!(state, replay(&records(&read("log-v11"))));
    assert!(
        encode_snapshot_in(11, lsn, &state).unwrap() == bytes,
        "snapshots of version 11 no longer encode as they did"
    );
    assert_eq!(state.snapshots(Some("/grid")).unwrap().len(), 1);
    assert_eq!(state.stat("/grid").unwrap().restoring.as_deref(), Some("c2"));
    for v in 2..=10 {
        assert!(encode_snapshot_in(v, lsn, &state).is_err(), "snapshot version {v}");
    }
}

/// The records of `log-v11`: those of `log-v10`, then a region of four
/// chunks checkpointed twice (the second sharing two chunks with the
/// first), restored to the first, the first removed, and a restore to the
/// second begun and not finished.
fn log_v11_records() -> Vec<LogRecord> {
    use tierpool_types::{ChunkAttrs, ChunkRef, InodeId};
    let mut recs = log_v10_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let inode = InodeId(state.next_inode().0 - 1);
    let (size, chunk_size) = (3 * 4096 + 100, 4096);
    let attrs = ChunkAttrs::default();
    let region = MetaOp::CommitRegion { path: "/grid".into(), inode, size, chunk_size, attrs, mode: 0o600 };
    push(&mut recs, &mut state, region);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let v1 = state.next_inode().0 - 1;
    let len = |i: u64| (size - i * chunk_size).min(chunk_size);
    let first: Vec<ChunkRef> =
        (0..4).map(|i| ChunkRef { version: v1, len: len(i), checksum: 0x100 + i as u32, home: None }).collect();
    let ckpt = |name: &str, version: u64, chunks: Vec<ChunkRef>| MetaOp::Checkpoint {
        path: "/grid".into(),
        name: name.into(),
        inode,
        version,
        chunks,
    };
    push(&mut recs, &mut state, ckpt("c1", v1, first.clone()));
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let v2 = state.next_inode().0 - 1;
    let mut second = first.clone();
    for i in [1, 2] {
        second[i] = ChunkRef { version: v2, len: len(i as u64), checksum: 0x200 + i as u32, home: None };
    }
    push(&mut recs, &mut state, ckpt("c2", v2, second));
    let restore = |name: &str, done: bool| MetaOp::RegionRestore { path: "/grid".into(), name: name.into(), done };
    push(&mut recs, &mut state, restore("c1", false));
    push(&mut recs, &mut state, restore("c1", true));
    push(&mut recs, &mut state, MetaOp::SnapshotRemove { path: "/grid".into(), name: "c1".into() });
    push(&mut recs, &mut state, restore("c2", false));
    recs
}

#[test]
fn log_v12_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v12");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V12_RECORDS);
    assert_eq!(recs[..LOG_V11_RECORDS as usize], records(&read("log-v11"))[..], "the records of log-v11 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v12.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(12, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 12 no longer encode as they did");
    let commits = |r: &&LogRecord| matches!(r.op, MetaOp::Transact { .. });
    assert_eq!(recs.iter().filter(commits).count(), 3);
    for r in recs.iter().filter(commits) {
        assert!(encode_record_in(11, r, &mut Vec::new()).is_err());
    }
}

#[test]
fn snapshot_v12_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v12");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V12_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v12.txt"));
    assert_eq!(state, replay(&records(&read("log-v12"))));
    assert!(
        encode_snapshot_in(12, lsn, &state).unwrap() == bytes,
        "snapshots of version 12 no longer encode as they did"
    );
    assert!(state.task_committed("reduce-3") && !state.task_committed("reduce-4"));
    for v in 2..=11 {
        assert!(encode_snapshot_in(v, lsn, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn log_v13_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v13");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V13_RECORDS);
    assert_eq!(recs[..LOG_V12_RECORDS as usize], records(&read("log-v12"))[..], "the records of log-v12 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v13.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(13, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 13 no longer encode as they did");
    let steps = |r: &&LogRecord| matches!(&r.op, MetaOp::Transact { ns, .. } if !ns.is_empty());
    assert_eq!(recs.iter().filter(steps).count(), 2);
    for r in recs.iter().filter(steps) {
        assert!(encode_record_in(12, r, &mut Vec::new()).is_err());
    }
    // Its state has a snapshot form in the current snapshot version.
    let (lsn, again) = decode_snapshot(&encode_snapshot(LOG_V13_RECORDS, &state)).unwrap();
    assert_eq!((lsn, again), (LOG_V13_RECORDS, state));
}

#[test]
fn log_v14_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v14");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V14_RECORDS);
    assert_eq!(recs[..LOG_V13_RECORDS as usize], records(&read("log-v13"))[..], "the records of log-v13 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v14.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(14, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 14 no longer encode as they did");
    let modes = |r: &&LogRecord| matches!(&r.op, MetaOp::SetWriteMode { .. });
    assert_eq!(recs.iter().filter(modes).count(), 3);
    for r in recs.iter().filter(modes) {
        assert!(encode_record_in(13, r, &mut Vec::new()).is_err());
    }
}

#[test]
fn snapshot_v13_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v13");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V14_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v14.txt"));
    assert_eq!(state, replay(&records(&read("log-v14"))));
    assert!(
        encode_snapshot_in(13, lsn, &state).unwrap() == bytes,
        "snapshots of version 13 no longer encode as they did"
    );
    let mode = |p: &str| state.stat(p).unwrap().origin.unwrap().mode;
    assert_eq!(mode("/lake/small"), Some(tierpool_meta::WriteMode::Back));
    assert_eq!(mode("/lake/renamed"), None);
    for v in 2..=12 {
        assert!(encode_snapshot_in(v, lsn, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn log_v15_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v15");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V15_RECORDS);
    assert_eq!(recs[..LOG_V14_RECORDS as usize], records(&read("log-v14"))[..], "the records of log-v14 come first");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v15.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(15, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 15 no longer encode as they did");
    let updates = |r: &&LogRecord| matches!(&r.op, MetaOp::UpdateInline { .. });
    assert_eq!(recs.iter().filter(updates).count(), 3);
    for r in recs.iter().filter(updates) {
        let e = encode_record_in(14, r, &mut Vec::new()).unwrap_err();
        assert_eq!(e.message, "small contents given to a file have no log record version 14 form");
    }
    assert_eq!(state.stat("/index").unwrap().inline.as_deref(), Some(&b"index, small now"[..]));
    assert_eq!(state.stat("/out2").unwrap().inline, None, "emptied");
    // Its state has a snapshot form in the current snapshot version.
    let (lsn, again) = decode_snapshot(&encode_snapshot(LOG_V15_RECORDS, &state)).unwrap();
    assert_eq!((lsn, again), (LOG_V15_RECORDS, state));
}

#[test]
fn log_v16_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v16");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V16_RECORDS);
    assert_eq!(recs[..LOG_V15_RECORDS as usize], records(&read("log-v15"))[..], "the records of log-v15 come first");
    assert_eq!(recs, log_v16_records(), "the records as written");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v16.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record_in(16, r, &mut again).unwrap();
    }
    assert!(again == seg, "log records of version 16 no longer encode as they did");
    let pages = |r: &&LogRecord| {
        matches!(&r.op, MetaOp::Transact { regions, .. } if !regions.is_empty())
            || matches!(&r.op, MetaOp::RegionPagesWritten { .. })
    };
    assert_eq!(recs.iter().filter(pages).count(), 3);
    for r in recs.iter().filter(pages) {
        let e = encode_record_in(15, r, &mut Vec::new()).unwrap_err();
        assert_eq!(e.message, "region pages of a transaction have no log record version 15 form");
    }
    // The second commit's pages are pending: only version 14 snapshots hold them.
    assert_eq!(state.pending_pages().keys().copied().collect::<Vec<_>>(), vec![1]);
    for v in 2..=13 {
        assert!(encode_snapshot_in(v, LOG_V16_RECORDS, &state).is_err(), "snapshot version {v}");
    }
}

#[test]
fn snapshot_v14_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v14");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, LOG_V16_RECORDS);
    assert_eq!(dump::dump(&state), expected("state-log-v16.txt"));
    assert_eq!(state, replay(&records(&read("log-v16"))));
    assert!(encode_snapshot(lsn, &state) == bytes, "snapshots of version 14 no longer encode as they did");
    let pending = &state.pending_pages()[&1];
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].pages.iter().map(|(i, b)| (*i, b.len())).collect::<Vec<_>>(), vec![(0, 4096), (5, 4096)]);
}

#[test]
fn log_v17_replays_to_its_state_and_encodes_to_the_same_bytes() {
    let seg = read("log-v17");
    let recs = records(&seg);
    assert_eq!(recs.len() as u64, LOG_V17_RECORDS);
    assert_eq!(recs[..LOG_V16_RECORDS as usize], records(&read("log-v16"))[..], "the records of log-v16 come first");
    assert_eq!(recs, log_v17_records(), "the records as written");
    let state = replay(&recs);
    state.check_invariants().unwrap();
    assert_eq!(dump::dump(&state), expected("state-log-v17.txt"));
    let mut again = Vec::new();
    for r in &recs {
        encode_record(r, &mut again);
    }
    assert!(again == seg, "log records of version 17 no longer encode as they did");
    let made = |r: &&LogRecord| matches!(&r.op, MetaOp::MakeFileAt { .. });
    assert_eq!(recs.iter().filter(made).count(), 2);
    for r in recs.iter().filter(made) {
        let e = encode_record_in(16, r, &mut Vec::new()).unwrap_err();
        assert_eq!(e.message, "a file made with a reserved id has no log record version 16 form");
    }
    let f = state.stat("/p6/made").unwrap();
    assert_eq!((f.uid, f.gid, f.mode, f.inline.as_deref()), (1000, 100, 0o640, Some(&b"made, then published"[..])));
    assert_eq!(state.stat("/p6/empty").unwrap().size, 0);
    // Its state has a snapshot form in the current snapshot version.
    let (lsn, again) = decode_snapshot(&encode_snapshot(LOG_V17_RECORDS, &state)).unwrap();
    assert_eq!((lsn, again), (LOG_V17_RECORDS, state));
}

/// The records of `log-v17`: those of `log-v16`, then three ids reserved,
/// a file made with the first by a user and given small contents (as
/// version the third), and an empty one made with the second (the
/// snapshot format did not change).
fn log_v17_records() -> Vec<LogRecord> {
    use bytes::Bytes;
    use tierpool_types::InodeId;
    let mut recs = log_v16_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 3 });
    let (first, p6) = (InodeId(state.next_inode().0 - 3), state.stat("/p6").unwrap().id);
    let version = state.next_inode().0 - 1;
    let make = |name: &str, inode: InodeId, mode: u32| MetaOp::MakeFileAt {
        parent: p6,
        name: name.into(),
        inode,
        chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE,
        mode,
    };
    let last = recs.last().unwrap().clone();
    let owner = Owner { uid: 1000, gid: 100 };
    let r = LogRecord { lsn: last.lsn + 1, time: last.time + 1_000_000_007, owner, op: make("made", first, 0o640) };
    state.execute_as(&r.op, r.owner, r.time).unwrap();
    recs.push(r);
    let op = MetaOp::UpdateInline { inode: first, version, data: Bytes::from_static(b"made, then published") };
    push(&mut recs, &mut state, op);
    push(&mut recs, &mut state, make("empty", InodeId(first.0 + 1), 0o600));
    recs
}

/// The records of `log-v16`: those of `log-v15`, then a region of six
/// pages, a transaction writing two of its pages and a file, the pages
/// said written, and a transaction writing two pages that stay pending.
fn log_v16_records() -> Vec<LogRecord> {
    use bytes::Bytes;
    use tierpool_meta::{TxFile, TxRegion};
    use tierpool_types::{ChunkAttrs, ChunkRef, InodeId};
    let mut recs = log_v15_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 2 });
    let region = InodeId(state.next_inode().0 - 2);
    let v = state.next_inode().0 - 1;
    let op = MetaOp::CommitRegion {
        path: "/mesh".into(),
        inode: region,
        size: 6 * 4096,
        chunk_size: 8192,
        attrs: ChunkAttrs::default(),
        mode: 0o600,
    };
    push(&mut recs, &mut state, op);
    let page = |byte: u8| Bytes::from(vec![byte; 4096]);
    let index = state.stat("/index").unwrap().id;
    let write = TxFile {
        inode: index,
        size: 100,
        truncate: None,
        chunks: vec![(0, ChunkRef { version: v, len: 100, checksum: 0x61, home: None })],
    };
    let pages = TxRegion { inode: region, pages: vec![(1, page(0x11)), (2, page(0x12))] };
    let op = MetaOp::Transact { task: Some("step-1".into()), files: vec![write], ns: Vec::new(), regions: vec![pages] };
    push(&mut recs, &mut state, op);
    push(&mut recs, &mut state, MetaOp::RegionPagesWritten { id: 1 });
    let pages = TxRegion { inode: region, pages: vec![(0, page(0x21)), (5, page(0x25))] };
    let op = MetaOp::Transact { task: None, files: Vec::new(), ns: Vec::new(), regions: vec![pages] };
    push(&mut recs, &mut state, op);
    push(&mut recs, &mut state, MetaOp::Mkdir { path: "/p6".into(), parents: false, mode: 0o755 });
    recs
}

/// The records of `log-v15`: those of `log-v14`, then `/index` (stored
/// chunks) given small contents twice, and a file made by name given some
/// and then emptied (the snapshot format did not change).
fn log_v15_records() -> Vec<LogRecord> {
    use bytes::Bytes;
    use tierpool_types::InodeId;
    let mut recs = log_v14_records();
    let mut state = replay(&recs);
    let index = state.stat("/index").unwrap().id;
    let update = |inode, version, data: &'static [u8]| MetaOp::UpdateInline { inode, version, data: Bytes::from(data) };
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 2 });
    let v = state.next_inode().0 - 2;
    push(&mut recs, &mut state, update(index, v, b"index, small"));
    push(&mut recs, &mut state, update(index, v + 1, b"index, small now"));
    let node = tierpool_meta::NewNode::File { chunk_size: 4096 };
    push(&mut recs, &mut state, MetaOp::MakeAt { parent: InodeId::ROOT, name: "out2".into(), node, mode: 0o600 });
    let out2 = state.stat("/out2").unwrap().id;
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let w = state.next_inode().0 - 1;
    push(&mut recs, &mut state, update(out2, w, b""));
    recs
}

/// The records of `log-v14`: those of `log-v13`, then write modes of
/// files' own: every file beneath `/lake` pool-only, one of them back to
/// its attachment's, one back (which a rewrite of the file keeps).
fn log_v14_records() -> Vec<LogRecord> {
    use tierpool_meta::WriteMode;
    use tierpool_types::ChunkAttrs;
    let mut recs = log_v13_records();
    let mut state = replay(&recs);
    let set = |path: &str, mode, recursive| MetaOp::SetWriteMode { path: path.into(), mode, recursive };
    push(&mut recs, &mut state, set("/lake", Some(WriteMode::PoolOnly), true));
    push(&mut recs, &mut state, set("/lake/renamed", None, false));
    push(&mut recs, &mut state, set("/lake/small", Some(WriteMode::Back), false));
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let inode = tierpool_types::InodeId(state.next_inode().0 - 1);
    let op = MetaOp::CommitFile {
        path: "/lake/small".into(),
        inode,
        size: 4096,
        chunk_size: 4096,
        checksums: vec![0x61],
        homes: Vec::new(),
        attrs: ChunkAttrs::default(),
        mode: 0o644,
        overwrite: true,
    };
    push(&mut recs, &mut state, op);
    recs
}

/// The records of `log-v13`: those of `log-v12`, then a transaction that
/// makes a directory and a file in it (of one chunk), moves `/ledger`
/// into it and writes `/index`, and one that removes the directory's
/// tree after renaming it, with a task id.
fn log_v13_records() -> Vec<LogRecord> {
    use tierpool_meta::{TxFile, TxNs};
    use tierpool_types::{ChunkRef, InodeId};
    let mut recs = log_v12_records();
    let mut state = replay(&recs);
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 3 });
    let first = state.next_inode().0 - 3;
    let index = state.stat("/index").unwrap().id;
    let r = |version: u64, len: u64, checksum: u32| ChunkRef { version, len, checksum, home: None };
    let made = TxFile { inode: InodeId(first), size: 5, truncate: None, chunks: vec![(0, r(first + 1, 5, 0x51))] };
    let steps = vec![
        TxNs::Mkdir { path: "/out".into(), mode: 0o750 },
        TxNs::Create { path: "/out/part-0".into(), mode: 0o640, chunk_size: 4096, file: made },
        TxNs::Rename { from: "/ledger".into(), to: "/out/ledger".into() },
    ];
    let write = TxFile { inode: index, size: 100, truncate: None, chunks: vec![(0, r(first + 2, 100, 0x52))] };
    push(&mut recs, &mut state, MetaOp::Transact { task: None, files: vec![write], ns: steps, regions: Vec::new() });
    let steps = vec![
        TxNs::Rename { from: "/out".into(), to: "/done".into() },
        TxNs::Remove { path: "/done".into(), recursive: true },
    ];
    let op = MetaOp::Transact { task: Some("clean".into()), files: Vec::new(), ns: steps, regions: Vec::new() };
    push(&mut recs, &mut state, op);
    // Padding to a round count: directories made outside transactions.
    for d in ["/p1", "/p2", "/p3", "/p4", "/p5"] {
        push(&mut recs, &mut state, MetaOp::Mkdir { path: d.into(), parents: false, mode: 0o755 });
    }
    recs
}

/// The records of `log-v12`: those of `log-v11`, then two files, a
/// transaction with a task id rewriting a chunk of one, a second one
/// growing one file and cutting the other, and a read-only one with a
/// task id.
fn log_v12_records() -> Vec<LogRecord> {
    use tierpool_meta::TxFile;
    use tierpool_types::{ChunkAttrs, ChunkRef, InodeId};
    let mut recs = log_v11_records();
    let mut state = replay(&recs);
    let file = |recs: &mut Vec<LogRecord>, state: &mut MetaState, path: &str| {
        push(recs, state, MetaOp::AllocInodes { count: 1 });
        let inode = InodeId(state.next_inode().0 - 1);
        let op = MetaOp::CommitFile {
            path: path.into(),
            inode,
            size: 2 * 4096,
            chunk_size: 4096,
            checksums: vec![0x31, 0x32],
            homes: Vec::new(),
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: false,
        };
        push(recs, state, op);
        inode
    };
    let a = file(&mut recs, &mut state, "/ledger");
    let b = file(&mut recs, &mut state, "/index");
    push(&mut recs, &mut state, MetaOp::AllocInodes { count: 1 });
    let v = state.next_inode().0 - 1;
    let r = |len: u64, checksum: u32| ChunkRef { version: v, len, checksum, home: None };
    let one = TxFile { inode: a, size: 2 * 4096, truncate: None, chunks: vec![(1, r(4096, 0x41))] };
    let op = MetaOp::Transact { task: Some("reduce-3".into()), files: vec![one], ns: Vec::new(), regions: Vec::new() };
    push(&mut recs, &mut state, op);
    let grow = TxFile { inode: a, size: 3 * 4096 + 10, truncate: None, chunks: vec![(3, r(10, 0x42))] };
    let cut = TxFile { inode: b, size: 100, truncate: Some(100), chunks: vec![(0, r(100, 0x43))] };
    let op = MetaOp::Transact { task: None, files: vec![grow, cut], ns: Vec::new(), regions: Vec::new() };
    push(&mut recs, &mut state, op);
    let op = MetaOp::Transact { task: Some("report".into()), files: Vec::new(), ns: Vec::new(), regions: Vec::new() };
    push(&mut recs, &mut state, op);
    recs
}

/// Writes the golden files of the current versions once, when asked
/// (`TIERPOOL_WRITE_GOLDEN=1`) and only if they are missing.
#[test]
#[ignore = "writes the golden files of a new version: TIERPOOL_WRITE_GOLDEN=1 cargo test --test golden -- --ignored"]
fn write_missing_golden_files_of_the_current_versions() {
    if std::env::var_os("TIERPOOL_WRITE_GOLDEN").is_none() || golden("log-v17").exists() {
        return;
    }
    let recs = log_v17_records();
    let (mut seg, mut state) = (Vec::new(), MetaState::new());
    for r in &recs {
        state.execute_as(&r.op, r.owner, r.time).unwrap();
        encode_record(r, &mut seg);
    }
    std::fs::write(golden("log-v17"), seg).unwrap();
    std::fs::write(golden("state-log-v17.txt"), dump::dump(&state)).unwrap();
}
