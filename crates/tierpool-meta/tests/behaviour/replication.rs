//! Replication: the pool's copies per chunk, per-path copies, and what a
//! worker going down or coming back does to the table.

use crate::common::*;
use std::collections::BTreeSet;
use tierpool_meta::{MetaOp, MetaReply, MetaState};
use tierpool_placement::plan::next_moves;
use tierpool_types::{ErrorKind, WorkerId};

fn worker(i: u32) -> MetaOp {
    worker_at(i, &format!("node{i}"), "r1")
}

/// Worker `i` registering with these host and rack labels.
fn worker_at(i: u32, host: &str, rack: &str) -> MetaOp {
    MetaOp::RegisterWorker {
        id: Some(WorkerId(i)),
        addr: format!("10.0.0.{i}:7000"),
        host: host.into(),
        rack: rack.into(),
        mem_capacity: 10,
        disk_capacity: 0,
        at_once: false,
    }
}

/// A pool keeping `r` copies with `n` workers, moved to its goal.
fn pool(r: u8, n: u32) -> MetaState {
    let mut s = ready();
    s.execute(&MetaOp::SetReplication { replicas: r, spread: tierpool_types::Spread::Host }, 2).unwrap();
    for i in 1..=n {
        s.execute(&worker(i), 3).unwrap();
        settle(&mut s);
    }
    s
}

/// Moves every slot to its goal as the coordinator does (sources alive).
fn settle(s: &mut MetaState) {
    for _ in 0..1000 {
        let moves = next_moves(s.table(), s.goal(), 64);
        if moves.is_empty() {
            return;
        }
        let slots: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
        s.execute(&MetaOp::BeginMoves { moves }, 4).unwrap();
        s.execute(&MetaOp::FinishMoves { partitions: slots }, 5).unwrap();
    }
    panic!("the goal is never reached");
}

fn distinct(s: &MetaState) {
    let t = s.table();
    for p in 0..t.partitions() {
        let h = t.holders(p);
        let set: BTreeSet<_> = h.iter().collect();
        assert_eq!(set.len(), h.len(), "partition {p}: {h:?}");
    }
}

#[test]
fn replication_is_set_before_any_worker_joins_and_never_after() {
    let mut s = pool(2, 3);
    assert_eq!(s.table().replicas(), 2);
    assert_eq!(s.table().slots(), 32);
    distinct(&s);
    assert!(s.table().owners().iter().all(Option::is_some), "three workers hold every replica of two");
    let e = fails(&mut s, MetaOp::SetReplication { replicas: 3, spread: tierpool_types::Spread::Host });
    assert_eq!(
        e,
        (
            ErrorKind::InvalidArgument,
            "the pool keeps 2 copies of each chunk (set when it was created): it cannot change to 3".into()
        )
    );
    s.execute(&MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Host }, 6).unwrap();
    let e = fails(&mut ready(), MetaOp::SetReplication { replicas: 0, spread: tierpool_types::Spread::Host });
    assert_eq!(e.0, ErrorKind::InvalidArgument);
}

#[test]
fn new_entries_inherit_the_copies_of_their_directory() {
    let mut s = pool(3, 3);
    mkdir(&mut s, "/scratch");
    mkdir(&mut s, "/scratch/deep");
    let before = commit(&mut s, "/scratch/old", 10);
    assert_eq!(before.replicas, 3, "the pool's by default");
    let r = s.execute(&MetaOp::SetReplicas { path: "/scratch".into(), replicas: 1, recursive: false }, 7).unwrap();
    assert_eq!(r, MetaReply::Replicas { changed: vec![] }, "a directory alone has no chunks");
    assert_eq!(commit(&mut s, "/scratch/new", 10).replicas, 1);
    assert_eq!(s.stat("/scratch/old").unwrap().replicas, 3, "without -r, entries keep theirs");
    assert_eq!(s.stat("/scratch/deep").unwrap().replicas, 3);
    let r = s.execute(&MetaOp::SetReplicas { path: "/scratch".into(), replicas: 2, recursive: true }, 8).unwrap();
    let old = before.id;
    let new = s.stat("/scratch/new").unwrap().id;
    assert_eq!(r, MetaReply::Replicas { changed: vec![(old, 3, 2), (new, 1, 2)] });
    assert_eq!(commit(&mut s, "/scratch/deep/f", 10).replicas, 2);
    let e = fails(&mut s, MetaOp::SetReplicas { path: "/scratch".into(), replicas: 4, recursive: false });
    assert_eq!(
        e,
        (
            ErrorKind::InvalidArgument,
            "cannot keep 4 copies: the pool keeps at most 3 copies of each chunk (its --replicas when it was created)"
                .into()
        )
    );
}

#[test]
fn a_down_worker_lets_go_of_replicas_that_survive_elsewhere_and_repair_restores_them() {
    let mut s = pool(2, 4);
    let gone = WorkerId(2);
    let had = s.table().shares()[&gone];
    assert!(had > 0);
    s.execute(&MetaOp::WorkerDown { id: gone }, 9).unwrap();
    assert!(!s.table().shares().contains_key(&gone), "every partition had another replica: all let go");
    assert_eq!(s.table().owners().iter().filter(|o| o.is_none()).count() as u32, had);
    assert!(s.goal().iter().all(|g| g.is_some_and(|g| g != gone)), "the goal deals them to the others");
    settle(&mut s);
    distinct(&s);
    assert!(s.table().owners().iter().all(|o| o.is_some_and(|w| w != gone)));
    assert!(s.replica_health(&[], &BTreeSet::from([gone])).unwrap().is_empty());
    // Back: it takes its share again.
    s.execute(&MetaOp::WorkerUp { id: gone }, 10).unwrap();
    settle(&mut s);
    distinct(&s);
    assert!(s.table().shares()[&gone] > 0);
    let e = fails(&mut s, MetaOp::WorkerUp { id: gone });
    assert_eq!(e, (ErrorKind::InvalidArgument, "worker w2 is not down".into()));
}

#[test]
fn with_two_workers_a_down_one_leaves_single_copies_reported_short() {
    let mut s = pool(2, 2);
    let info = commit(&mut s, "/f", 3 * CHUNK);
    s.execute(&MetaOp::WorkerDown { id: WorkerId(1) }, 9).unwrap();
    settle(&mut s);
    assert!(s.table().owners().iter().all(|o| *o != Some(WorkerId(1))));
    assert!(s.table().holders(0).len() == 1, "no third worker to take the lost replicas");
    let h = s.replica_health(&[], &BTreeSet::new()).unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].inode, h[0].replicas, h[0].chunks, h[0].under, h[0].lost), (info.id, 2, 3, 3, 0));
}

#[test]
fn a_down_worker_of_a_pool_of_one_copy_keeps_its_partitions() {
    let mut s = ready();
    s.execute(&worker(1), 3).unwrap();
    let e = fails(&mut s, MetaOp::WorkerDown { id: WorkerId(1) });
    assert_eq!(e.0, ErrorKind::InvalidArgument);
}

#[test]
fn removing_a_worker_whose_replicas_survive_loses_nothing() {
    let mut s = pool(2, 3);
    commit(&mut s, "/f", 8 * CHUNK);
    match s.execute(&MetaOp::RemoveWorker { id: WorkerId(3) }, 9).unwrap() {
        MetaReply::WorkerRemoved { lost, .. } => assert!(lost.is_empty(), "{lost:?}"),
        r => panic!("{r:?}"),
    }
    settle(&mut s);
    distinct(&s);
    assert!(s.table().owners().iter().all(Option::is_some));
}

#[test]
fn a_drain_that_would_leave_too_few_workers_for_the_copies_is_refused() {
    let mut s = pool(2, 2);
    let e = fails(&mut s, MetaOp::DrainWorker { id: WorkerId(1) });
    assert_eq!(
        e,
        (
            ErrorKind::InvalidArgument,
            "draining worker w1 would leave 1 workers for 2 copies of each chunk: add a worker first, or remove it"
                .into()
        )
    );
}

#[test]
fn replicas_go_to_distinct_hosts_where_they_can() {
    let mut s = ready();
    s.execute(&MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Host }, 2).unwrap();
    for i in 1..=4u32 {
        s.execute(&worker_at(i, &format!("node{}", i % 2), "r1"), 3).unwrap();
        settle(&mut s);
    }
    distinct(&s);
    let host = |w: WorkerId| w.0 % 2;
    let t = s.table();
    let apart = (0..t.partitions()).filter(|p| {
        let h = t.holders(*p);
        h.len() == 2 && host(h[0]) != host(h[1])
    });
    assert_eq!(apart.count() as u32, t.partitions(), "two hosts, two replicas: one on each");
}

/// `--spread rack`: four workers on four hosts in two racks keep the two
/// replicas of every partition in different racks (by host alone, half
/// the partitions could keep both in one rack); the spread, like the
/// replication, is fixed once a worker joined.
#[test]
fn with_spread_rack_replicas_go_to_distinct_racks() {
    use tierpool_types::Spread;
    let mut s = ready();
    s.execute(&MetaOp::SetReplication { replicas: 2, spread: Spread::Rack }, 2).unwrap();
    for i in 1..=4u32 {
        s.execute(&worker_at(i, &format!("node{i}"), &format!("r{}", i % 2)), 3).unwrap();
        settle(&mut s);
    }
    distinct(&s);
    assert_eq!(s.spread(), Spread::Rack);
    let rack = |w: WorkerId| w.0 % 2;
    let t = s.table();
    for p in 0..t.partitions() {
        let h = t.holders(p);
        assert!(h.len() == 2 && rack(h[0]) != rack(h[1]), "partition {p}: {h:?} in one rack");
    }
    let e = fails(&mut s, MetaOp::SetReplication { replicas: 2, spread: Spread::Host });
    assert_eq!(
        e,
        (
            ErrorKind::InvalidArgument,
            "the pool spreads replicas by rack (set when it was created): it cannot change to host".into()
        )
    );
}

/// Placement policies: inherited by new entries, set on a tree with
/// `recursive`, a `local-only` path keeping one copy; the homes a commit
/// names are kept with the chunks and must be partitions of the pool.
#[test]
fn placement_is_inherited_and_homes_are_checked_and_kept() {
    use tierpool_types::{ChunkRef, Placement};
    let mut s = pool(2, 3);
    assert!(!s.placed());
    mkdir(&mut s, "/tmp");
    commit(&mut s, "/tmp/old", 10);
    let set = MetaOp::SetPlacement { path: "/tmp".into(), placement: Placement::LocalOnly, recursive: false };
    assert_eq!(s.execute(&set, 4).unwrap(), MetaReply::Placed { inodes: 1 });
    assert!(s.placed());
    let new = commit(&mut s, "/tmp/new", 10);
    assert_eq!((new.placement, new.replicas), (Placement::LocalOnly, 1), "inherited, one copy");
    let old = s.stat("/tmp/old").unwrap();
    assert_eq!((old.placement, old.replicas), (Placement::Hash, 2), "what exists is unchanged");
    let set = MetaOp::SetPlacement { path: "/".into(), placement: Placement::RoundRobin, recursive: true };
    assert_eq!(s.execute(&set, 5).unwrap(), MetaReply::Placed { inodes: 4 });
    assert_eq!(s.stat("/tmp/old").unwrap().placement, Placement::RoundRobin);

    let id = alloc(&mut s);
    let mut op = commit_op("/tmp/placed", id, 3 * CHUNK, false);
    if let MetaOp::CommitFile { homes, .. } = &mut op {
        *homes = vec![Some(3), None, Some(16)];
    }
    let e = fails(&mut s, op.clone());
    assert_eq!(
        e,
        (ErrorKind::InvalidArgument, "/tmp/placed: home partition 16 is not one of the pool's 16 partitions".into())
    );
    if let MetaOp::CommitFile { homes, .. } = &mut op {
        *homes = vec![Some(3), None];
    }
    let e = fails(&mut s, op.clone());
    assert_eq!(e, (ErrorKind::InvalidArgument, "/tmp/placed: 2 home partitions given for 3 chunks".into()));
    if let MetaOp::CommitFile { homes, .. } = &mut op {
        *homes = vec![Some(3), None, Some(15)];
    }
    let MetaReply::Info(i) = s.execute(&op, 6).unwrap() else { panic!() };
    assert_eq!(i.chunks.iter().map(|c| c.home).collect::<Vec<_>>(), vec![Some(3), None, Some(15)]);

    // A replaced placed version awaits collection under its home.
    let newer = ChunkRef { version: alloc(&mut s).0, len: 5, checksum: 9, home: Some(20) };
    let update = MetaOp::UpdateFile { inode: i.id, size: 3 * CHUNK, truncate: None, chunks: vec![(0, newer)] };
    let e = fails(&mut s, update);
    assert_eq!(e, (ErrorKind::InvalidArgument, "home partition 20 is not one of the pool's 16 partitions".into()));
    let newer = ChunkRef { home: Some(7), ..newer };
    let update = MetaOp::UpdateFile { inode: i.id, size: 3 * CHUNK, truncate: None, chunks: vec![(0, newer)] };
    s.execute(&update, 7).unwrap();
    assert!(s.pending_chunks().contains(&i.chunks[0].key(i.id, 0)));
    assert_eq!(s.stat("/tmp/placed").unwrap().chunks[0].home, Some(7));
    s.check_invariants().unwrap();
}

/// A worker joining while another is down: the goal deals the down
/// worker's slots to the live ones, never names it (found by the property
/// test of taking a state apart: the goal kept the down worker's slots).
#[test]
fn a_worker_joining_while_another_is_down_gets_a_goal_without_it() {
    let mut s = pool(2, 1);
    mkdir(&mut s, "/a");
    s.execute(&MetaOp::WorkerDown { id: WorkerId(1) }, 4).unwrap();
    s.execute(&worker(2), 5).unwrap();
    s.check_invariants().unwrap();
    assert!(s.goal().iter().flatten().all(|w| *w == WorkerId(2)), "{:?}", s.goal());
    s.execute(&MetaOp::WorkerUp { id: WorkerId(1) }, 6).unwrap();
    s.check_invariants().unwrap();
}

#[test]
fn a_worker_restarted_after_a_clean_stop_keeps_its_partitions() {
    let mut s = pool(2, 3);
    let table = s.table().clone();
    let back = |i: u32, kept: bool| match worker(i) {
        MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, .. } => {
            MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once: kept }
        }
        _ => unreachable!(),
    };
    // Its memory written to disk before it stopped: nothing to refill.
    s.execute(&back(2, true), 9).unwrap();
    assert_eq!(s.table(), &table);
    assert!(s.down().is_empty() && next_moves(s.table(), s.goal(), 64).is_empty());
    // Declared down while it was stopped: back up, taking its share again by moves.
    s.execute(&MetaOp::WorkerDown { id: WorkerId(2) }, 10).unwrap();
    s.execute(&back(2, true), 11).unwrap();
    assert!(s.down().is_empty());
    settle(&mut s);
    distinct(&s);
    assert!(s.table().shares()[&WorkerId(2)] > 0);
    // A process that lost its memory is taken down and up: its slots are refilled.
    let before = s.table().clone();
    s.execute(&back(3, false), 12).unwrap();
    assert_ne!(s.table(), &before, "its replicas are let go, to be copied back");
    settle(&mut s);
    distinct(&s);
}
