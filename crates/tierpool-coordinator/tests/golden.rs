//! The golden files of the coordinator's durable formats (see
//! `tests/golden/README.md`) decode and replay to the states they were
//! written from, and the current version still encodes them byte for byte.

#[path = "golden/dump.rs"]
mod dump;

use std::path::PathBuf;
use tierpool_coordinator::log;
use tierpool_coordinator::records::{
    decode_record, decode_snapshot, encode_record, encode_snapshot, Decoded, LogRecord,
};
use tierpool_meta::MetaState;

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
        encode_record(r, &mut again);
    }
    assert!(again == seg, "log records of version 1 no longer encode as they did");
}

#[test]
fn snapshot_v2_decodes_to_its_state_and_encodes_to_the_same_bytes() {
    let bytes = read("snapshot-v2");
    let (lsn, state) = decode_snapshot(&bytes).unwrap();
    assert_eq!(lsn, 28);
    assert_eq!(dump::dump(&state), expected("state-log-v1.txt"));
    assert!(encode_snapshot(lsn, &state) == bytes, "snapshots of version 2 no longer encode as they did");
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
