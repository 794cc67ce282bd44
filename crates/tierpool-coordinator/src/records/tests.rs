//! Framing of records and snapshots, and the lock on released formats.

use super::*;
use serde_reflection::{Registry, Samples, Tracer, TracerConfig};
use std::path::PathBuf;
use tierpool_meta::Owner;
use tierpool_types::WorkerId;

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
    let next = LOG_RECORD_VERSION + 1;
    let Decoded::Unusable(e) = decode_record(&frame(&[next, 1, 2, 3])) else { panic!("version {next}") };
    assert_eq!(e.kind, ErrorKind::Corrupt);
    assert!(e.message.contains(&format!("log record version {next} is not known")), "{}", e.message);
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

// ---- replication: log version 5, snapshot version 6 ----

#[test]
fn ops_of_replication_round_trip_in_log_v5_and_have_no_older_form() {
    let ops = [
        MetaOp::SetReplication { replicas: 3, spread: tierpool_types::Spread::Host },
        MetaOp::WorkerDown { id: WorkerId(4) },
        MetaOp::WorkerUp { id: WorkerId(4) },
        MetaOp::SetReplicas { path: "/a/b".into(), replicas: 2, recursive: true },
        MetaOp::SetReplicas { path: "/c".into(), replicas: 1, recursive: false },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let r = LogRecord { lsn: i as u64 + 1, time: 9, owner: Owner { uid: 1, gid: 2 }, op };
        let mut buf = Vec::new();
        encode_record(&r, &mut buf);
        assert_eq!(buf[8], LOG_RECORD_VERSION, "written in the newest version");
        assert_eq!(decode_record(&buf), Decoded::Record(r.clone(), buf.len()));
        let mut v5 = Vec::new();
        encode_record_in(5, &r, &mut v5).unwrap();
        assert_eq!(v5[8], 5);
        assert_eq!(decode_record(&v5), Decoded::Record(r.clone(), v5.len()));
        for v in 1..=4 {
            assert!(encode_record_in(v, &r, &mut Vec::new()).is_err(), "{:?} in version {v}", r.op);
        }
    }
    // An op version 4 holds is still written in it on request.
    let mut v4 = Vec::new();
    encode_record_in(4, &rec(1), &mut v4).unwrap();
    assert_eq!(v4[8], 4);
    assert_eq!(decode_record(&v4), Decoded::Record(rec(1), v4.len()));
}

fn worker(s: &mut MetaState, n: u32, at_once: bool) {
    let op = MetaOp::RegisterWorker {
        id: None,
        addr: format!("10.0.0.{n}:7700"),
        host: format!("h{n}"),
        rack: format!("r{}", n % 2),
        mem_capacity: 1 << 30,
        disk_capacity: 8 << 30,
        at_once,
    };
    s.execute(&op, 1).unwrap();
}

fn ok(s: &mut MetaState, op: MetaOp) {
    s.execute(&op, 2).unwrap_or_else(|e| panic!("{op:?}: {e}"));
}

/// A pool of `replicas` slots per partition in the middle of everything
/// replication adds: copies per path, a worker joining with moves toward
/// it, one finished; all but one of the first workers down, with repairs
/// (moves from no owner) in progress; then the last of them down too, so
/// that the goal leaves slots unowned (fewer live workers than replicas).
fn replicated_state(replicas: u8) -> MetaState {
    let mut s = MetaState::new();
    ok(&mut s, MetaOp::Init { partitions: 16 });
    ok(&mut s, MetaOp::SetReplication { replicas, spread: tierpool_types::Spread::Host });
    for n in 0..replicas {
        worker(&mut s, u32::from(n), true);
    }
    ok(&mut s, MetaOp::Mkdir { path: "/a/b".into(), parents: true, mode: 0o755 });
    ok(&mut s, MetaOp::Mkdir { path: "/c".into(), parents: false, mode: 0o755 });
    ok(&mut s, MetaOp::SetReplicas { path: "/a".into(), replicas: 1, recursive: true });
    ok(&mut s, MetaOp::SetReplicas { path: "/c".into(), replicas, recursive: false });
    ok(&mut s, MetaOp::Mkdir { path: "/a/b/new".into(), parents: false, mode: 0o755 });
    worker(&mut s, 9, false);
    let moves = tierpool_placement::plan::next_moves(s.table(), s.goal(), 3);
    let first = moves[0].0;
    ok(&mut s, MetaOp::BeginMoves { moves });
    ok(&mut s, MetaOp::FinishMoves { partitions: vec![first] });
    let first: Vec<WorkerId> = s.workers().keys().copied().take(usize::from(replicas) - 1).collect();
    for id in first {
        ok(&mut s, MetaOp::WorkerDown { id });
    }
    let repairs = tierpool_placement::plan::next_moves(s.table(), s.goal(), 4);
    ok(&mut s, MetaOp::BeginMoves { moves: repairs });
    let last = s.workers().keys().copied().nth(usize::from(replicas) - 1).unwrap();
    ok(&mut s, MetaOp::WorkerDown { id: last });
    s.check_invariants().unwrap();
    s
}

#[test]
fn replicated_states_round_trip_through_snapshot_v6() {
    for replicas in [2, 3] {
        let s = replicated_state(replicas);
        let t = s.table();
        assert_eq!(t.replicas(), replicas);
        assert!(t.owners().contains(&None), "R={replicas}: an unowned slot");
        assert!(t.moving().keys().any(|slot| t.owner(*slot).is_none()), "R={replicas}: a move from no owner");
        assert!(s.goal().contains(&None), "R={replicas}: a goal leaving a slot unowned");
        assert_eq!(s.down().len(), usize::from(replicas));
        let bytes = encode_snapshot(77, &s);
        assert_eq!(bytes[6], SNAPSHOT_VERSION);
        assert_eq!(decode_snapshot(&bytes).unwrap(), (77, s.clone()), "R={replicas}");
        for v in 2..=5 {
            assert!(encode_snapshot_in(v, 77, &s).is_err(), "R={replicas} in snapshot version {v}");
        }
    }
}

/// Copies set per path in a pool of one replica still need version 6: they
/// count once the pool's replication is raised (before any worker joins).
#[test]
fn copies_per_path_in_a_pool_of_one_replica_need_snapshot_v6() {
    let mut s = MetaState::new();
    ok(&mut s, MetaOp::Init { partitions: 4 });
    ok(&mut s, MetaOp::Mkdir { path: "/x".into(), parents: false, mode: 0o755 });
    ok(&mut s, MetaOp::SetReplicas { path: "/x".into(), replicas: 1, recursive: false });
    assert!(encode_snapshot_in(5, 3, &s).is_err());
    let (_, back) = decode_snapshot(&encode_snapshot(3, &s)).unwrap();
    assert_eq!(back, s);
}

/// Snapshot version 6 of `s`, edited by `edit`, then decoded.
fn decode_edited_v6(s: &MetaState, edit: impl FnOnce(&mut snapshot_v6::StateV6)) -> Result<(u64, MetaState)> {
    let mut state = snapshot_v6::StateV6::from_view(&s.view());
    edit(&mut state);
    decode_snapshot(&frame_snapshot(6, &encode(&snapshot_v6::SnapshotV6 { lsn: 1, state })))
}

#[test]
fn snapshot_v6_refuses_impossible_replication() {
    let s = replicated_state(2);
    decode_edited_v6(&s, |_| {}).unwrap();
    // A partition whose replica 0 is owned, and its replica 1.
    let p = (0..16).find(|p| s.table().owner(*p).is_some()).unwrap();
    let (p, sibling, owner) = (p as usize, p as usize + 16, s.table().owner(p).unwrap().0);
    type Edit = Box<dyn FnOnce(&mut snapshot_v6::StateV6)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("replicas per partition", Box::new(|v| v.replicas = 0)),
        ("slots of replicas in a table of one", Box::new(|v| v.replicas = 1)),
        ("do not extend its first replicas", Box::new(|v| v.slots.truncate(16))),
        ("do not extend its first replicas", Box::new(move |v| v.v5.v4.table.owners[p] = None)),
        (
            "moves or a goal outside the slots",
            Box::new(move |v| {
                v.v5.v4.moving.insert(p as u32, owner + 100);
            }),
        ),
        ("two replicas of a partition", Box::new(move |v| v.slots[sibling] = Some(owner))),
        (
            "a move of a slot",
            Box::new(move |v| {
                v.moving_slots.insert(sibling as u32, owner);
            }),
        ),
        (
            "dead inode 999",
            Box::new(|v| {
                v.inode_replicas.insert(999, 1);
            }),
        ),
        (
            "keeps 0 copies",
            Box::new(|v| {
                v.inode_replicas.insert(1, 0);
            }),
        ),
        (
            "down worker w77 is unknown",
            Box::new(|v| {
                v.down.insert(77);
            }),
        ),
    ];
    for (want, edit) in edits {
        let e = decode_edited_v6(&s, edit).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Corrupt, "{want}: {e}");
        assert!(e.message.contains(want), "{want}: {}", e.message);
    }
}

// ---- placement: log version 6, snapshot version 7 ----

#[test]
fn ops_of_placement_round_trip_in_log_v6_and_have_no_older_form() {
    use tierpool_types::{ChunkKey, ChunkRef, InodeId, Placement, Spread};
    let placed = ChunkRef { version: 12, len: 100, checksum: 7, home: Some(3) };
    let ops = [
        MetaOp::SetReplication { replicas: 2, spread: Spread::Rack },
        MetaOp::SetPlacement { path: "/tmp".into(), placement: Placement::LocalOnly, recursive: true },
        MetaOp::SetPlacement { path: "/x".into(), placement: Placement::Hash, recursive: false },
        MetaOp::CommitFile {
            path: "/f".into(),
            inode: InodeId(9),
            size: 5,
            chunk_size: 4096,
            checksums: vec![1],
            homes: vec![Some(2)],
            attrs: Default::default(),
            mode: 0o644,
            overwrite: true,
        },
        MetaOp::UpdateFile {
            inode: InodeId(9),
            size: 100,
            truncate: None,
            chunks: vec![(0, placed), (1, ChunkRef::HOLE)],
        },
        MetaOp::GcChunksDone { keys: vec![placed.key(InodeId(9), 0), ChunkKey::hashed(InodeId(9), 1, 4)] },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let r = LogRecord { lsn: i as u64 + 1, time: 9, owner: Owner { uid: 1, gid: 2 }, op };
        let mut buf = Vec::new();
        encode_record(&r, &mut buf);
        assert_eq!(buf[8], LOG_RECORD_VERSION);
        assert_eq!(decode_record(&buf), Decoded::Record(r.clone(), buf.len()));
        let mut v6 = Vec::new();
        encode_record_in(6, &r, &mut v6).unwrap();
        assert_eq!(v6[8], 6);
        assert_eq!(decode_record(&v6), Decoded::Record(r.clone(), v6.len()));
        for v in 1..=5 {
            assert!(encode_record_in(v, &r, &mut Vec::new()).is_err(), "{:?} in version {v}", r.op);
        }
    }
}

/// A pool keeping replicas apart by rack, a directory placed `local` and
/// a file in it with placed chunks, one of them replaced (its old version
/// awaiting collection keeps its home).
fn placed_state() -> MetaState {
    use tierpool_types::{ChunkRef, InodeId, Placement, Spread};
    let mut s = MetaState::new();
    ok(&mut s, MetaOp::Init { partitions: 16 });
    ok(&mut s, MetaOp::SetReplication { replicas: 2, spread: Spread::Rack });
    for n in 0..3 {
        worker(&mut s, n, false);
    }
    ok(&mut s, MetaOp::Mkdir { path: "/near".into(), parents: false, mode: 0o755 });
    ok(&mut s, MetaOp::SetPlacement { path: "/near".into(), placement: Placement::Local, recursive: false });
    ok(&mut s, MetaOp::AllocInodes { count: 10 });
    let id = InodeId(s.next_inode().0 - 10);
    let commit = MetaOp::CommitFile {
        path: "/near/f".into(),
        inode: id,
        size: 3 * 4096,
        chunk_size: 4096,
        checksums: vec![1, 2, 3],
        homes: vec![Some(5), None, Some(15)],
        attrs: Default::default(),
        mode: 0o644,
        overwrite: false,
    };
    ok(&mut s, commit);
    let newer = ChunkRef { version: id.0 + 1, len: 10, checksum: 4, home: Some(7) };
    ok(&mut s, MetaOp::UpdateFile { inode: id, size: 3 * 4096, truncate: None, chunks: vec![(0, newer)] });
    s.check_invariants().unwrap();
    s
}

#[test]
fn placed_states_round_trip_through_snapshot_v7_only() {
    let s = placed_state();
    assert!(s.placed());
    assert!(s.pending_chunks().iter().any(|k| k.home == Some(5)), "the replaced version keeps its home");
    let bytes = encode_snapshot_in(7, 5, &s).unwrap();
    assert_eq!(bytes[6], 7);
    let (_, back) = decode_snapshot(&bytes).unwrap();
    assert_eq!(back, s);
    assert!(back.placed() && back.spread() == tierpool_types::Spread::Rack);
    let v8 = encode_snapshot_in(8, 5, &s).unwrap();
    assert_eq!(v8[6], 8);
    assert!(v8[19..].starts_with(&bytes[19..]), "the nested version 7 state differs");
    assert_eq!(decode_snapshot(&v8).unwrap().1, s);
    for v in 2..=6 {
        assert!(encode_snapshot_in(v, 5, &s).is_err(), "snapshot version {v}");
    }
}

/// Snapshot version 7 of `s`, edited by `edit`, then decoded.
fn decode_edited_v7(s: &MetaState, edit: impl FnOnce(&mut snapshot_v7::StateV7)) -> Result<(u64, MetaState)> {
    let mut state = snapshot_v7::StateV7::from_view(&s.view());
    edit(&mut state);
    decode_snapshot(&frame_snapshot(7, &encode(&snapshot_v7::SnapshotV7 { lsn: 1, state })))
}

#[test]
fn snapshot_v7_refuses_impossible_placement() {
    let s = placed_state();
    decode_edited_v7(&s, |_| {}).unwrap();
    let (&(file, _), _) = snapshot_v7::StateV7::from_view(&s.view()).homes.iter().next().map(|e| (e.0, e.1)).unwrap();
    type Edit = Box<dyn FnOnce(&mut snapshot_v7::StateV7)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("spread of replicas 9", Box::new(|v| v.spread = 9)),
        (
            "placement policy 7",
            Box::new(|v| {
                v.placements.insert(1, 7);
            }),
        ),
        (
            "listed with the default placement",
            Box::new(|v| {
                v.placements.insert(1, 0);
            }),
        ),
        (
            "placement of dead inode 999",
            Box::new(|v| {
                v.placements.insert(999, 1);
            }),
        ),
        (
            "home partition 16 in a pool of 16",
            Box::new(move |v| {
                v.homes.insert((file, 1), 16);
            }),
        ),
        (
            "which is not a file",
            Box::new(|v| {
                v.homes.insert((1, 0), 2);
            }),
        ),
        (
            "which holds none",
            Box::new(move |v| {
                v.homes.insert((file, 9), 2);
            }),
        ),
        (
            "which awaits no collection",
            Box::new(move |v| {
                v.pending_homes.insert(frozen::ChunkKeyV1 { inode: file, index: 2, version: 1 }, 3);
            }),
        ),
    ];
    for (want, edit) in edits {
        let e = decode_edited_v7(&s, edit).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Corrupt, "{want}: {e}");
        assert!(e.message.contains(want), "{want}: {}", e.message);
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
        (
            "log-v5",
            trace_with(
                t::<log_v5::RecordV5>,
                &[&t::<KindV1>, &t::<log_v1::NewNodeV1>, &t::<log_v3::OpV3>, &t::<log_v4::OpV4>, &t::<log_v5::OpV5>],
            ),
        ),
        ("snapshot-v6", trace_with(t::<snapshot_v6::SnapshotV6>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        (
            "log-v6",
            trace_with(
                t::<log_v6::RecordV6>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                ],
            ),
        ),
        ("snapshot-v7", trace_with(t::<snapshot_v7::SnapshotV7>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        (
            "log-v7",
            trace_with(
                t::<log_v7::RecordV7>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                ],
            ),
        ),
        ("snapshot-v8", trace_with(t::<snapshot_v8::SnapshotV8>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        (
            "log-v8",
            trace_with(
                t::<log_v8::RecordV8>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                ],
            ),
        ),
        ("snapshot-v9", trace_with(t::<snapshot_v9::SnapshotV9>, &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>])),
        (
            "log-v9",
            trace_with(
                t::<log_v9::RecordV9>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                ],
            ),
        ),
        (
            "snapshot-v10",
            trace_with(
                t::<snapshot_v10::SnapshotV10>,
                &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>, &t::<snapshot_v10::FrozenBodyV10>],
            ),
        ),
        (
            "log-v10",
            trace_with(
                t::<log_v10::RecordV10>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                ],
            ),
        ),
        (
            "snapshot-v11",
            trace_with(
                t::<snapshot_v11::SnapshotV11>,
                &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>, &t::<snapshot_v10::FrozenBodyV10>],
            ),
        ),
        (
            "log-v11",
            trace_with(
                t::<log_v11::RecordV11>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                ],
            ),
        ),
        (
            "snapshot-v12",
            trace_with(
                t::<snapshot_v12::SnapshotV12>,
                &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>, &t::<snapshot_v10::FrozenBodyV10>],
            ),
        ),
        (
            "log-v12",
            trace_with(
                t::<log_v12::RecordV12>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                ],
            ),
        ),
        (
            "log-v13",
            trace_with(
                t::<log_v13::RecordV13>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                    &t::<log_v13::OpV13>,
                    &t::<log_v13::TxNsV13>,
                ],
            ),
        ),
        (
            "snapshot-v13",
            trace_with(
                t::<snapshot_v13::SnapshotV13>,
                &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>, &t::<snapshot_v10::FrozenBodyV10>],
            ),
        ),
        (
            "log-v14",
            trace_with(
                t::<log_v14::RecordV14>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                    &t::<log_v13::OpV13>,
                    &t::<log_v13::TxNsV13>,
                    &t::<log_v14::OpV14>,
                ],
            ),
        ),
        (
            "log-v15",
            trace_with(
                t::<log_v15::RecordV15>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                    &t::<log_v13::OpV13>,
                    &t::<log_v13::TxNsV13>,
                    &t::<log_v14::OpV14>,
                    &t::<log_v15::OpV15>,
                ],
            ),
        ),
        (
            "snapshot-v14",
            trace_with(
                t::<snapshot_v14::SnapshotV14>,
                &[&t::<KindV1>, &t::<snapshot_v2::BodyV2>, &t::<snapshot_v10::FrozenBodyV10>],
            ),
        ),
        (
            "log-v16",
            trace_with(
                t::<log_v16::RecordV16>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                    &t::<log_v13::OpV13>,
                    &t::<log_v13::TxNsV13>,
                    &t::<log_v14::OpV14>,
                    &t::<log_v15::OpV15>,
                    &t::<log_v16::OpV16>,
                ],
            ),
        ),
        (
            "log-v17",
            trace_with(
                t::<log_v17::RecordV17>,
                &[
                    &t::<KindV1>,
                    &t::<log_v1::NewNodeV1>,
                    &t::<log_v3::OpV3>,
                    &t::<log_v4::OpV4>,
                    &t::<log_v5::OpV5>,
                    &t::<log_v6::OpV6>,
                    &t::<log_v7::OpV7>,
                    &t::<log_v8::OpV8>,
                    &t::<log_v9::OpV9>,
                    &t::<log_v10::OpV10>,
                    &t::<log_v11::OpV11>,
                    &t::<log_v12::OpV12>,
                    &t::<log_v13::OpV13>,
                    &t::<log_v13::TxNsV13>,
                    &t::<log_v14::OpV14>,
                    &t::<log_v15::OpV15>,
                    &t::<log_v16::OpV16>,
                    &t::<log_v17::OpV17>,
                ],
            ),
        ),
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

// ---- under-stores: log version 7, snapshot version 8 ----

fn attachment(mode: tierpool_meta::WriteMode) -> tierpool_meta::Attachment {
    let options = [("endpoint".to_string(), "http://127.0.0.1:9000".to_string())].into();
    tierpool_meta::Attachment { uri: "s3://lake/2026".into(), mode, readonly: true, options }
}

#[test]
fn ops_of_under_stores_round_trip_in_log_v7_and_have_no_older_form() {
    use tierpool_types::{ChunkRef, InodeId};
    let stored = ChunkRef { version: 12, len: 100, checksum: 7, home: Some(3) };
    let ops = [
        MetaOp::Attach { path: "/lake".into(), attachment: attachment(tierpool_meta::WriteMode::Through) },
        MetaOp::Attach { path: "/po".into(), attachment: attachment(tierpool_meta::WriteMode::PoolOnly) },
        MetaOp::Attach { path: "/wb".into(), attachment: attachment(tierpool_meta::WriteMode::Back) },
        MetaOp::Detach { path: "/lake".into() },
        MetaOp::AdoptFile {
            parent: InodeId(4),
            name: "part-0".into(),
            size: 9000,
            chunk_size: 4096,
            mtime: 123,
            etag: "abc".into(),
            mode: 0o644,
        },
        MetaOp::Persisted {
            inode: InodeId(9),
            chunks: vec![stored, ChunkRef::BELOW, ChunkRef::HOLE],
            size: 9000,
            mtime: 5,
            etag: "e".into(),
            key: None,
        },
        MetaOp::LoadChunks { inode: InodeId(9), chunks: vec![(1, stored)] },
        MetaOp::Unload { inode: InodeId(9) },
        MetaOp::AdoptDir { parent: InodeId(4), name: "day1".into(), mode: 0o755 },
        MetaOp::Disown { parent: InodeId(4), name: "day0".into() },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let r = LogRecord { lsn: i as u64 + 1, time: 9, owner: Owner { uid: 1, gid: 2 }, op };
        let mut buf = Vec::new();
        encode_record_in(7, &r, &mut buf).unwrap();
        assert_eq!(buf[8], 7);
        assert_eq!(decode_record(&buf), Decoded::Record(r.clone(), buf.len()));
        let mut newest = Vec::new();
        encode_record(&r, &mut newest);
        assert_eq!((newest[8], decode_record(&newest)), (LOG_RECORD_VERSION, Decoded::Record(r.clone(), newest.len())));
        for v in 1..=6 {
            assert!(encode_record_in(v, &r, &mut Vec::new()).is_err(), "{:?} in version {v}", r.op);
        }
    }
}

#[test]
fn a_persisted_file_naming_its_key_round_trips_in_log_v8_only() {
    use tierpool_types::{ChunkRef, InodeId};
    let stored = ChunkRef { version: 12, len: 100, checksum: 7, home: Some(3) };
    let op = MetaOp::Persisted {
        inode: InodeId(9),
        chunks: vec![stored, ChunkRef::BELOW],
        size: 4196,
        mtime: 5,
        etag: "e".into(),
        key: Some("day1/part-0.bin".into()),
    };
    let r = LogRecord { lsn: 3, time: 9, owner: Owner { uid: 1, gid: 2 }, op };
    let mut buf = Vec::new();
    encode_record_in(8, &r, &mut buf).unwrap();
    assert_eq!(buf[8], 8);
    assert_eq!(decode_record(&buf), Decoded::Record(r.clone(), buf.len()));
    for v in 1..=7 {
        let e = encode_record_in(v, &r, &mut Vec::new()).unwrap_err();
        assert!(e.message.contains("key has no log record version"), "{e}");
    }
}

/// A pool with an under-store attached at `/lake`: a file adopted with
/// its chunks below, one chunk loaded; a file made in the pool, dirty.
pub(super) fn attached_state() -> MetaState {
    use tierpool_types::ChunkRef;
    let mut s = MetaState::new();
    ok(&mut s, MetaOp::Init { partitions: 16 });
    worker(&mut s, 0, false);
    ok(&mut s, MetaOp::Mkdir { path: "/lake".into(), parents: false, mode: 0o755 });
    ok(&mut s, MetaOp::Attach { path: "/lake".into(), attachment: attachment(tierpool_meta::WriteMode::Through) });
    let lake = s.stat("/lake").unwrap().id;
    let adopt = MetaOp::AdoptFile {
        parent: lake,
        name: "part-0".into(),
        size: 9000,
        chunk_size: 4096,
        mtime: 123,
        etag: "abc".into(),
        mode: 0o644,
    };
    ok(&mut s, adopt);
    let f = s.stat("/lake/part-0").unwrap().id;
    ok(&mut s, MetaOp::AllocInodes { count: 4 });
    let v = s.next_inode().0 - 4;
    let loaded = ChunkRef { version: v, len: 4096, checksum: 8, home: None };
    ok(&mut s, MetaOp::LoadChunks { inode: f, chunks: vec![(1, loaded)] });
    s.check_invariants().unwrap();
    s
}

#[test]
fn attached_states_round_trip_through_snapshot_v8_only() {
    let s = attached_state();
    let bytes = encode_snapshot_in(8, 5, &s).unwrap();
    assert_eq!(bytes[6], 8);
    let (_, back) = decode_snapshot(&bytes).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.attachments().len(), 1);
    for v in 2..=7 {
        assert!(encode_snapshot_in(v, 5, &s).is_err(), "snapshot version {v}");
    }
}

#[test]
fn snapshot_v8_refuses_an_origin_of_a_dead_inode_or_chunks_below_without_one() {
    let s = attached_state();
    let mut state = snapshot_v8::StateV8::from_view(&s.view());
    let (id, o) = state.origins.pop_first().unwrap();
    state.origins.insert(9999, o.clone());
    let e = decode_snapshot(&frame_snapshot(8, &encode(&snapshot_v8::SnapshotV8 { lsn: 1, state }))).unwrap_err();
    assert!(e.message.contains("origin of dead inode 9999"), "{}", e.message);
    let mut state = snapshot_v8::StateV8::from_view(&s.view());
    state.origins.remove(&id);
    let e = decode_snapshot(&frame_snapshot(8, &encode(&snapshot_v8::SnapshotV8 { lsn: 1, state }))).unwrap_err();
    assert!(e.message.contains("chunks below but no under-store object"), "{}", e.message);
}
