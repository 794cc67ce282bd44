//! Workers joining, coming back, being drained and removed; the goal the
//! partition table moves toward and the moves that reach it.

use crate::common::*;
use tierpool_meta::{MetaOp, MetaReply, MetaState};
use tierpool_placement::plan::{next_moves, remaining};
use tierpool_types::{ErrorKind, WorkerId};

fn worker(id: Option<u32>, mem: u64, disk: u64) -> MetaOp {
    MetaOp::RegisterWorker {
        id: id.map(WorkerId),
        addr: format!("10.0.0.1:{mem}"),
        host: "node1".into(),
        rack: "r1".into(),
        mem_capacity: mem,
        disk_capacity: disk,
        at_once: false,
    }
}

fn register(s: &mut MetaState, op: MetaOp) -> WorkerId {
    match s.execute(&op, 3).unwrap() {
        MetaReply::Worker { id } => id,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn goal_shares(s: &MetaState) -> Vec<(WorkerId, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for w in s.goal().iter().flatten() {
        *m.entry(*w).or_insert(0) += 1;
    }
    m.into_iter().collect()
}

/// Moves every partition to its goal, `room` at a time, as the coordinator does.
fn reach_goal(s: &mut MetaState, room: usize) -> usize {
    let mut rounds = 0;
    loop {
        let moves = next_moves(s.table(), s.goal(), room);
        if moves.is_empty() {
            return rounds;
        }
        let ps: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
        s.execute(&MetaOp::BeginMoves { moves }, 4).unwrap();
        s.execute(&MetaOp::FinishMoves { partitions: ps }, 5).unwrap();
        rounds += 1;
    }
}

/// Two workers of weights 1 and 3, the first owning every partition, the
/// goal giving the second its share.
fn two_workers() -> MetaState {
    let mut s = ready();
    register(&mut s, worker(None, 1, 0));
    register(&mut s, worker(Some(7), 1, 2));
    s
}

#[test]
fn the_first_worker_takes_every_partition_and_the_next_ones_set_a_goal() {
    let mut s = two_workers();
    assert_eq!(register(&mut s, worker(None, 0, 0)), WorkerId(8), "ids grow past the largest seen");
    assert_eq!(s.table().shares(), [(WorkerId(1), 16)].into_iter().collect(), "no owner changes without a copy");
    assert_eq!(goal_shares(&s), [(WorkerId(1), 4), (WorkerId(7), 12)]);
    assert!(s.table().moving().is_empty());
    assert_eq!(s.workers().len(), 3);
    assert_eq!(s.workers()[&WorkerId(7)].disk_capacity, 2);
}

#[test]
fn a_join_at_once_changes_owners_at_once_as_old_logs_did() {
    let mut s = ready();
    register(&mut s, worker(None, 1, 0));
    let epoch = s.table().epoch();
    let MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, .. } = worker(Some(7), 1, 2) else {
        unreachable!()
    };
    let op = MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once: true };
    register(&mut s, op);
    assert_eq!(s.table().shares(), [(WorkerId(1), 4), (WorkerId(7), 12)].into_iter().collect());
    assert_eq!((s.goal(), s.table().epoch()), (&[][..], epoch + 1));
}

#[test]
fn moves_reach_the_goal_and_each_finish_grows_the_epoch() {
    let mut s = two_workers();
    let goal = s.goal().to_vec();
    let epoch = s.table().epoch();
    assert_eq!(remaining(s.table(), &goal), 12);
    let moves = next_moves(s.table(), &goal, 5);
    let ps: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
    s.execute(&MetaOp::BeginMoves { moves: moves.clone() }, 4).unwrap();
    assert_eq!(s.table().moving().len(), 5);
    assert!(ps.iter().all(|p| s.table().owner(*p) == Some(WorkerId(1))), "owners stay until the copy is done");
    assert_eq!(s.table().epoch(), epoch, "starting a move changes no owner");
    s.execute(&MetaOp::AbortMoves { partitions: vec![ps[0]] }, 5).unwrap();
    s.execute(&MetaOp::FinishMoves { partitions: ps[1..].to_vec() }, 6).unwrap();
    assert_eq!((s.table().epoch(), s.table().moving().len()), (epoch + 1, 0));
    assert!(ps[1..].iter().all(|p| s.table().owner(*p) == Some(WorkerId(7))));
    assert_eq!(s.table().owner(ps[0]), Some(WorkerId(1)), "an aborted move leaves its owner");
    assert_eq!(reach_goal(&mut s, 3), 3);
    assert_eq!(s.table().owners(), &goal[..]);
    assert!(s.goal().is_empty(), "a reached goal is forgotten");
}

#[test]
fn moves_that_cannot_be_made_fail_and_change_nothing() {
    let mut s = two_workers();
    let p = 3;
    let e = fails(&mut s, MetaOp::BeginMoves { moves: vec![(p, WorkerId(9))] });
    assert_eq!(e, (ErrorKind::NotFound, "worker w9 is not part of the pool".into()));
    let e = fails(&mut s, MetaOp::BeginMoves { moves: vec![(p, WorkerId(1))] });
    assert_eq!(e, (ErrorKind::InvalidArgument, "partition 3 is already on worker w1".into()));
    let e = fails(&mut s, MetaOp::BeginMoves { moves: vec![(p, WorkerId(7)), (p, WorkerId(7))] });
    assert_eq!(e, (ErrorKind::InvalidArgument, "partition 3 is moving already".into()));
    let e = fails(&mut s, MetaOp::FinishMoves { partitions: vec![p] });
    assert_eq!(e, (ErrorKind::InvalidArgument, "partition 3 is not moving".into()));
    s.execute(&MetaOp::DrainWorker { id: WorkerId(7) }, 4).unwrap();
    let e = fails(&mut s, MetaOp::BeginMoves { moves: vec![(p, WorkerId(7))] });
    assert_eq!(e, (ErrorKind::InvalidArgument, "worker w7 is draining: it takes no partitions".into()));
}

#[test]
fn a_drained_worker_is_left_with_nothing() {
    let mut s = two_workers();
    reach_goal(&mut s, 4);
    register(&mut s, worker(None, 2, 2));
    s.execute(&MetaOp::DrainWorker { id: WorkerId(7) }, 4).unwrap();
    assert_eq!(s.draining().iter().copied().collect::<Vec<_>>(), [WorkerId(7)]);
    assert_eq!(goal_shares(&s), [(WorkerId(1), 3), (WorkerId(8), 13)]);
    reach_goal(&mut s, 2);
    assert_eq!(s.table().shares().get(&WorkerId(7)), None);
    // a worker joining during a drain gives the drained one nothing back
    register(&mut s, worker(None, 100, 0));
    assert!(!s.goal().contains(&Some(WorkerId(7))));
    let e = fails(&mut s, MetaOp::DrainWorker { id: WorkerId(5) });
    assert_eq!(e, (ErrorKind::NotFound, "worker w5 is not part of the pool".into()));
}

#[test]
fn the_last_worker_can_be_neither_drained_nor_removed() {
    let mut s = ready();
    register(&mut s, worker(None, 1, 0));
    let e = fails(&mut s, MetaOp::DrainWorker { id: WorkerId(1) });
    assert_eq!(
        e,
        (
            ErrorKind::InvalidArgument,
            "worker w1 is the last one not draining: nothing could take its partitions".into()
        )
    );
    let e = fails(&mut s, MetaOp::RemoveWorker { id: WorkerId(1) });
    assert_eq!(e, (ErrorKind::InvalidArgument, "worker w1 is the pool's last worker".into()));
}

#[test]
fn a_removed_worker_s_partitions_change_owner_at_once_and_its_moves_are_given_up() {
    let mut s = two_workers();
    reach_goal(&mut s, 16);
    register(&mut s, worker(None, 4, 0));
    let mine: Vec<u32> = (0..16).filter(|p| s.table().owner(*p) == Some(WorkerId(1))).collect();
    let moves = next_moves(s.table(), s.goal(), 16);
    s.execute(&MetaOp::BeginMoves { moves }, 4).unwrap();
    let before = s.table().clone();
    let reply = s.execute(&MetaOp::RemoveWorker { id: WorkerId(1) }, 5).unwrap();
    assert_eq!(reply, MetaReply::WorkerRemoved { partitions: mine.clone(), lost: vec![] });
    assert!(!s.workers().contains_key(&WorkerId(1)));
    for p in 0..16 {
        let o = s.table().owner(p).unwrap();
        assert_ne!(o, WorkerId(1));
        if !mine.contains(&p) {
            assert_eq!(Some(o), before.owner(p), "partition {p} of a survivor stays");
        }
    }
    assert!(s.table().moving().iter().all(|(p, to)| *to != WorkerId(1) && !mine.contains(p)));
    assert!(!s.goal().contains(&Some(WorkerId(1))));
}

#[test]
fn rebalance_sets_the_goal_the_weights_ask_for() {
    let mut s = two_workers();
    reach_goal(&mut s, 16);
    s.execute(&MetaOp::Rebalance, 4).unwrap();
    assert!(s.goal().is_empty(), "a balanced table has nothing to reach");
    register(&mut s, worker(Some(1), 3, 0));
    assert!(s.goal().is_empty(), "a worker coming back changes nothing by itself");
    s.execute(&MetaOp::Rebalance, 5).unwrap();
    assert_eq!(goal_shares(&s), [(WorkerId(1), 8), (WorkerId(7), 8)]);
}

#[test]
fn a_known_worker_is_updated_without_a_rebalance() {
    let mut s = ready();
    let id = register(&mut s, worker(None, 1, 1));
    register(&mut s, worker(None, 1, 1));
    let (table, goal) = (s.table().clone(), s.goal().to_vec());
    assert_eq!(register(&mut s, worker(Some(id.0), 100, 100)), id);
    assert_eq!((s.table(), s.goal()), (&table, &goal[..]));
    let w = &s.workers()[&id];
    assert_eq!((w.id, w.mem_capacity, w.addr.as_str()), (id, 100, "10.0.0.1:100"));
}

#[test]
fn a_slow_worker_s_share_shrinks_with_its_speed_and_comes_back() {
    let mut s = ready();
    let a = register(&mut s, worker(None, 1, 0));
    let b = register(&mut s, worker(None, 1, 0));
    reach_goal(&mut s, 16);
    assert_eq!(s.table().shares(), [(a, 8), (b, 8)].into_iter().collect());
    let before = s.table().clone();
    // b delivers a quarter of a's bandwidth: weights 1 and 0.25.
    s.execute(&MetaOp::SetSpeed { id: b, percent: 25 }, 6).unwrap();
    assert_eq!(s.speeds().get(&b), Some(&25));
    assert_eq!(goal_shares(&s), [(a, 13), (b, 3)], "16 * 1/1.25 and 16 * 0.25/1.25, rounded");
    for p in 0..16 {
        let g = s.goal()[p as usize];
        assert!(g == before.owner(p) || before.owner(p) == Some(b), "only b's partitions move");
    }
    reach_goal(&mut s, 16);
    // Back to full speed: shares by capacity again, only toward b.
    let before = s.table().clone();
    s.execute(&MetaOp::SetSpeed { id: b, percent: 100 }, 7).unwrap();
    assert!(s.speeds().is_empty());
    assert_eq!(goal_shares(&s), [(a, 8), (b, 8)]);
    for p in 0..16 {
        let g = s.goal()[p as usize];
        assert!(g == before.owner(p) || g == Some(b), "only partitions toward b move");
    }
    for (id, percent, e) in [(b, 0, "a speed of 0% is not in 1..=100"), (b, 101, "a speed of 101% is not in 1..=100")] {
        let err = s.execute(&MetaOp::SetSpeed { id, percent }, 8).unwrap_err();
        assert_eq!((err.kind, err.message.as_str()), (ErrorKind::InvalidArgument, e));
    }
    assert_eq!(
        s.execute(&MetaOp::SetSpeed { id: WorkerId(99), percent: 50 }, 8).unwrap_err().kind,
        ErrorKind::NotFound
    );
}
