//! Framing of records and snapshots, and the lock on released formats.

use super::*;
use serde_reflection::{Registry, Samples, Tracer, TracerConfig};
use std::path::PathBuf;
use tierpool_meta::Owner;

fn rec(lsn: u64) -> LogRecord {
    let op = MetaOp::Mkdir { path: format!("/d{lsn}"), parents: false, mode: 0o755 };
    LogRecord { lsn, time: 5, owner: Owner { uid: 7, gid: 8 }, op }
}

#[test]
fn records_round_trip_and_torn_tails_are_detected() {
    let mut buf = Vec::new();
    encode_record(&rec(1), &mut buf);
    encode_record(&rec(2), &mut buf);
    let Decoded::Record(r1, n1) = decode_record(&buf) else { panic!("first record") };
    assert_eq!(r1, rec(1));
    let Decoded::Record(r2, n2) = decode_record(&buf[n1..]) else { panic!("second record") };
    assert_eq!(r2, rec(2));
    assert_eq!(decode_record(&buf[n1 + n2..]), Decoded::End);
    // Every truncation of the second record is torn, never a wrong record.
    for cut in n1 + 1..n1 + n2 {
        assert!(matches!(decode_record(&buf[n1..cut]), Decoded::Torn(_)), "cut at {cut}");
    }
    let mut bad = buf.clone();
    bad[n1 + 10] ^= 0x40;
    assert!(matches!(decode_record(&bad[n1..]), Decoded::Torn(_)));
}

/// A record from a newer build (or an impossible one) stops recovery
/// instead of being cut off as if it were torn.
#[test]
fn unknown_versions_and_impossible_records_are_unusable_not_torn() {
    let frame = |body: &[u8]| {
        let mut out = (body.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
        out.extend_from_slice(body);
        out
    };
    let Decoded::Unusable(e) = decode_record(&frame(&[9, 1, 2, 3])) else { panic!("version 9") };
    assert_eq!(e.kind, ErrorKind::Corrupt);
    assert!(e.message.contains("log record version 9 is not known"), "{}", e.message);
    // A priority of 9 in a SetAttrs record.
    let op = log_v1::OpV1::SetAttrs { path: "/x".into(), priority: Some(9), pinned: None };
    let mut body = vec![1];
    body.extend(encode(&log_v1::RecordV1 { lsn: 1, time: 1, op }));
    let Decoded::Unusable(e) = decode_record(&frame(&body)) else { panic!("priority 9") };
    assert!(e.message.contains("priority 9"), "{}", e.message);
}

#[test]
fn snapshots_refuse_damage_and_unknown_versions() {
    let mut s = MetaState::new();
    s.execute(&MetaOp::Init { partitions: 4 }, 1).unwrap();
    let bytes = encode_snapshot(9, &s);
    assert_eq!(decode_snapshot(&bytes).unwrap(), (9, s));
    for (at, want) in [(0, "bad header"), (6, "version"), (30, "checksum"), (12, "truncated")] {
        let mut b = bytes.clone();
        b[at] ^= 0x55;
        let e = decode_snapshot(&b).unwrap_err();
        assert!(e.message.contains(want), "byte {at}: {}", e.message);
    }
}

// ---- the lock on released formats ----

/// Traces a record type; `enums` lists the enums inside it, whose every
/// variant must be explored too (a nested enum is otherwise only seen as
/// far as one sample goes).
/// Traces one type into a tracer.
type TraceFn = dyn Fn(&mut Tracer, &Samples);

fn trace_with(top: impl Fn(&mut Tracer, &Samples), enums: &[&TraceFn]) -> Registry {
    let mut tracer = Tracer::new(TracerConfig::default());
    let samples = Samples::new();
    for e in enums {
        e(&mut tracer, &samples);
    }
    top(&mut tracer, &samples);
    tracer.registry().expect("every type of a record is fully traced")
}

fn t<T: serde::de::DeserializeOwned>(tracer: &mut Tracer, samples: &Samples) {
    tracer.trace_type::<T>(samples).expect("record types are traceable");
}

/// The traced shape of every released format, by name.
fn released() -> Vec<(&'static str, Registry)> {
    use frozen::KindV1;
    vec![
        ("log-v1", trace_with(t::<log_v1::RecordV1>, &[&t::<KindV1>, &t::<log_v1::NewNodeV1>, &t::<log_v1::OpV1>])),
        ("snapshot-v1", trace_with(t::<snapshot_v1::SnapshotV1>, &[&t::<snapshot_v1::BodyV1>])),
        ("snapshot-v2", trace_with(t::<snapshot_v2::SnapshotV2>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        ("log-v2", trace_with(t::<log_v2::RecordV2>, &[&t::<KindV1>, &t::<log_v1::NewNodeV1>, &t::<log_v2::OpV2>])),
        ("snapshot-v3", trace_with(t::<snapshot_v3::SnapshotV3>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        ("log-v3", trace_with(t::<log_v3::RecordV3>, &[&t::<KindV1>, &t::<log_v1::NewNodeV1>, &t::<log_v3::OpV3>])),
        ("snapshot-v4", trace_with(t::<snapshot_v4::SnapshotV4>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        (
            "log-v4",
            trace_with(
                t::<log_v4::RecordV4>,
                &[&t::<KindV1>, &t::<log_v1::NewNodeV1>, &t::<log_v3::OpV3>, &t::<log_v4::OpV4>],
            ),
        ),
        ("snapshot-v5", trace_with(t::<snapshot_v5::SnapshotV5>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
    ]
}

fn formats_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/formats")
}

/// `Ok` if `registry` is exactly the shape locked in `formats/<name>.json`.
fn check_locked(name: &str, registry: &Registry) -> std::result::Result<(), String> {
    let path = formats_dir().join(format!("{name}.json"));
    let now = serde_json::to_string_pretty(registry).expect("a registry serialises");
    let locked = std::fs::read_to_string(&path).map_err(|e| {
        format!("{}: {e}. Lock a new format once by running this test with TIERPOOL_LOCK_NEW_FORMATS=1", path.display())
    })?;
    if locked.trim_end() == now.trim_end() {
        return Ok(());
    }
    Err(format!(
        "the record types of released format {name} changed (see {}).\n\
         Stored bytes of a released format never change: give the changed types a new \
         version (new record types, a golden file, a migration) and leave these alone.\n\
         now:\n{now}",
        path.display()
    ))
}

#[test]
fn released_formats_never_change() {
    let lock_new = std::env::var_os("TIERPOOL_LOCK_NEW_FORMATS").is_some();
    for (name, registry) in released() {
        let path = formats_dir().join(format!("{name}.json"));
        if lock_new && !path.exists() {
            std::fs::create_dir_all(formats_dir()).unwrap();
            std::fs::write(&path, serde_json::to_string_pretty(&registry).unwrap() + "\n").unwrap();
        }
        if let Err(e) = check_locked(name, &registry) {
            panic!("{e}");
        }
    }
}

/// The lock catches a change to a released type: here log record version
/// 1 with a field added to one op (the kind of edit that would silently
/// make every existing log unreadable).
#[test]
fn a_changed_record_type_fails_the_lock() {
    #[allow(dead_code)]
    mod edited {
        use serde::{Deserialize, Serialize};
        #[derive(Serialize, Deserialize)]
        pub struct RecordV1 {
            pub lsn: u64,
            pub time: u64,
            pub op: OpV1,
        }
        #[derive(Serialize, Deserialize)]
        pub enum OpV1 {
            Init { partitions: u32, replicas: u8 },
        }
    }
    let e = check_locked("log-v1", &trace_with(t::<edited::RecordV1>, &[&t::<edited::OpV1>])).unwrap_err();
    assert!(e.contains("record types of released format log-v1 changed"), "{e}");
    let (name, registry) = released().remove(0);
    check_locked(name, &registry).unwrap();
}
