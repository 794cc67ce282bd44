//! Partition moves driven as the coordinator drives them, through any
//! interleaving of joins, drains, removals, worker crashes and restarts,
//! failed copies and coordinator crashes (the state rebuilt by replaying
//! the log, interrupted moves given up). A model says which workers hold
//! each partition's committed chunks; after every event:
//!
//! - every partition has exactly one owner, a known worker, and one table
//!   per epoch (the same owners whenever an epoch is seen again, across
//!   restarts too);
//! - every partition not lost to a removal is held by its owner (a move
//!   switches the owner only once the target holds the chunks);
//! - a join changes the goal only by giving partitions to the joiner, a
//!   drain only by taking the drained worker's away; a move begins only
//!   toward the goal (moves begun toward an older goal may have to come
//!   back: a drain of the worker they go to);
//!
//! and once the events are over and every worker is back, the moves reach
//! the goal and the shares follow the weights within two partitions (one
//! of rounding, one that only a rebalance, not a join, may even out).

use crate::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::engine::moves::Move;
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, MetaReply, MetaState, Owner};
use tierpool_types::WorkerId;

const PARTITIONS: u32 = 8;

#[derive(Clone, Debug)]
enum Event {
    /// A new worker of this weight registers.
    Join(u64),
    /// Worker `i % known` is drained.
    Drain(usize),
    /// Worker `i % known` is removed, as the coordinator allows it: dead,
    /// or owning nothing.
    Remove(usize),
    /// Worker `i % known` is killed -9 (its chunks are on DISK: kept).
    Crash(usize),
    /// Worker `i % known` is started again.
    Restart(usize),
    /// The coordinator begins the moves there is room for.
    Step,
    /// Copy `i % running` ends: done if both ends are up, else failed.
    Copy(usize),
    /// Copy `i % running` fails (a network error).
    Fail(usize),
    Wait(u64),
    /// kill -9 of the coordinator, then its restart.
    CoordinatorCrash,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            2 => (1u64..4).prop_map(Event::Join),
            1 => any::<usize>().prop_map(Event::Drain),
            1 => any::<usize>().prop_map(Event::Remove),
            1 => any::<usize>().prop_map(Event::Crash),
            2 => any::<usize>().prop_map(Event::Restart),
            4 => Just(Event::Step),
            4 => any::<usize>().prop_map(Event::Copy),
            1 => any::<usize>().prop_map(Event::Fail),
            2 => (0u64..5).prop_map(Event::Wait),
            1 => Just(Event::CoordinatorCrash),
        ],
        1..60,
    )
}

struct Sim {
    engine: Engine,
    log: Vec<MetaOp>,
    now: Duration,
    /// Workers whose process runs.
    up: BTreeSet<WorkerId>,
    /// Who holds each partition's committed chunks.
    holders: BTreeMap<u32, BTreeSet<WorkerId>>,
    lost: BTreeSet<u32>,
    running: Vec<Move>,
    /// The owners seen at each epoch.
    epochs: BTreeMap<u64, Vec<Option<WorkerId>>>,
}

impl Sim {
    fn new() -> Sim {
        let mut sim = Sim {
            engine: engine(),
            log: vec![MetaOp::Init { partitions: PARTITIONS }],
            now: secs(1),
            up: BTreeSet::new(),
            holders: BTreeMap::new(),
            lost: BTreeSet::new(),
            running: Vec::new(),
            epochs: BTreeMap::new(),
        };
        sim.join(2);
        // The first worker owns every partition, and holds its chunks.
        let first = *sim.up.first().unwrap();
        sim.holders = (0..PARTITIONS).map(|p| (p, BTreeSet::from([first]))).collect();
        sim
    }

    fn exec(&mut self, op: MetaOp) -> Option<MetaReply> {
        let (reply, _) = self.engine.execute(&op, Owner::default(), 7, self.now).ok()?;
        self.log.push(op);
        Some(reply)
    }

    /// Where each partition is to end: the goal, or the table if none.
    fn planned(&self) -> Vec<Option<WorkerId>> {
        let s = self.engine.state();
        if s.goal().is_empty() {
            s.table().owners().to_vec()
        } else {
            s.goal().to_vec()
        }
    }

    fn known(&self) -> Vec<WorkerId> {
        self.engine.state().workers().keys().copied().collect()
    }

    fn pick(&self, i: usize) -> Option<WorkerId> {
        let k = self.known();
        (!k.is_empty()).then(|| k[i % k.len()])
    }

    fn join(&mut self, weight: u64) {
        let op = MetaOp::RegisterWorker {
            id: None,
            addr: format!("10.0.0.{}:1", self.log.len()),
            host: "h".into(),
            rack: "r".into(),
            mem_capacity: weight,
            disk_capacity: 0,
            at_once: false,
        };
        let before = self.planned();
        if let Some(MetaReply::Worker { id }) = self.exec(op) {
            self.up.insert(id);
            self.engine.heartbeat(id, self.now);
            let after = self.planned();
            for p in 0..PARTITIONS as usize {
                assert!(
                    after[p] == before[p] || after[p] == Some(id),
                    "a join gives partitions to the joiner only: {before:?} -> {after:?}"
                );
            }
        }
    }

    fn beat(&mut self) {
        for w in self.up.clone() {
            self.engine.heartbeat(w, self.now);
        }
    }

    fn step(&mut self) -> Result<(), TestCaseError> {
        let moves = self.engine.next_moves(self.now);
        if moves.is_empty() {
            return Ok(());
        }
        let state = self.engine.state();
        for m in &moves {
            for p in &m.partitions {
                prop_assert_eq!(state.goal()[*p as usize], Some(m.to), "a move goes toward the goal");
                prop_assert_eq!(state.table().owner(*p), Some(m.from));
            }
        }
        let begin = moves.iter().flat_map(|m| m.partitions.iter().map(|p| (*p, m.to))).collect();
        prop_assert!(self.exec(MetaOp::BeginMoves { moves: begin }).is_some(), "next_moves offers valid moves");
        self.running.extend(moves);
        Ok(())
    }

    /// Copy `i` ends; it succeeded only if asked and both ends are up.
    fn end_copy(&mut self, i: usize, ok: bool) {
        if self.running.is_empty() {
            return;
        }
        let m = self.running.remove(i % self.running.len());
        if ok && self.up.contains(&m.from) && self.up.contains(&m.to) {
            self.engine.move_copied(&m, 1);
            // What was given up meanwhile is a stray copy on the target, soon
            // deleted: it does not count.
            let partitions = self.engine.finishable(&m);
            if !partitions.is_empty() && self.exec(MetaOp::FinishMoves { partitions: partitions.clone() }).is_some() {
                for p in &partitions {
                    // The target copied what the source held; the old owner
                    // deletes its copy (a little later: here at once).
                    let h = self.holders.get_mut(p).unwrap();
                    let had = h.contains(&m.from);
                    h.clear();
                    if had {
                        h.insert(m.to);
                    }
                }
            }
        } else {
            self.engine.move_failed(&m, self.now);
            self.exec(MetaOp::AbortMoves { partitions: m.partitions.clone() });
        }
    }

    fn remove(&mut self, w: WorkerId) {
        let dead = !self.engine.is_alive(w, self.now);
        let owns = self.engine.state().table().shares().get(&w).copied().unwrap_or(0);
        if !dead && owns > 0 {
            return;
        }
        if self.exec(MetaOp::RemoveWorker { id: w }).is_some() {
            self.up.remove(&w);
            for (p, h) in self.holders.iter_mut() {
                h.remove(&w);
                if h.is_empty() {
                    self.lost.insert(*p);
                }
            }
            // Its copies in flight end in errors.
            for m in std::mem::take(&mut self.running) {
                if m.from == w || m.to == w {
                    self.engine.move_failed(&m, self.now);
                } else {
                    self.running.push(m);
                }
            }
        }
    }

    /// kill -9 and restart: the state is what the log replays; the moves
    /// under way are given up (their copies are not trusted).
    fn restart_coordinator(&mut self) {
        let mut s = MetaState::new();
        for op in &self.log {
            s.execute(op, 7).expect("a logged op replays");
        }
        self.engine = Engine::new(s, config());
        self.running.clear();
        self.beat();
        let interrupted = self.engine.interrupted_moves();
        if !interrupted.is_empty() {
            self.exec(MetaOp::AbortMoves { partitions: interrupted });
        }
    }

    fn apply(&mut self, e: &Event) -> Result<(), TestCaseError> {
        match e {
            Event::Join(w) => self.join(*w),
            Event::Drain(i) => {
                if let Some(w) = self.pick(*i) {
                    let before = self.planned();
                    if self.exec(MetaOp::DrainWorker { id: w }).is_some() {
                        let after = self.planned();
                        for p in 0..PARTITIONS as usize {
                            prop_assert!(
                                after[p] == before[p] || before[p] == Some(w),
                                "a drain moves its partitions only"
                            );
                            prop_assert_ne!(after[p], Some(w));
                        }
                    }
                }
            }
            Event::Remove(i) => {
                if let Some(w) = self.pick(*i) {
                    self.remove(w);
                }
            }
            Event::Crash(i) => {
                if let Some(w) = self.pick(*i) {
                    self.up.remove(&w);
                }
            }
            Event::Restart(i) => {
                if let Some(w) = self.pick(*i) {
                    self.up.insert(w);
                    self.engine.heartbeat(w, self.now);
                }
            }
            Event::Step => self.step()?,
            Event::Copy(i) => self.end_copy(*i, true),
            Event::Fail(i) => self.end_copy(*i, false),
            Event::Wait(s) => {
                self.now += secs(*s);
                self.beat();
            }
            Event::CoordinatorCrash => self.restart_coordinator(),
        }

        self.check()
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        let state = self.engine.state();
        let t = state.table();
        for p in 0..PARTITIONS {
            let owner = t.owner(p);
            prop_assert!(owner.is_some_and(|o| state.workers().contains_key(&o)), "partition {p}: owner {owner:?}");
            if !self.lost.contains(&p) {
                prop_assert!(self.holders[&p].contains(&owner.unwrap()), "partition {p}: its owner {owner:?} holds it");
            }
        }
        let seen = self.epochs.entry(t.epoch()).or_insert_with(|| t.owners().to_vec());
        prop_assert_eq!(&seen[..], t.owners(), "one table per epoch {}", t.epoch());
        Ok(())
    }

    /// Every worker back, copies done, steps taken until the goal is reached.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        self.up.extend(self.known());
        self.now += secs(120);
        self.beat();
        for _ in 0..200 {
            while !self.running.is_empty() {
                self.end_copy(0, true);
                self.check()?;
            }
            if self.engine.state().goal().is_empty() {
                break;
            }
            self.now += secs(61);
            self.beat();
            self.step()?;
            self.check()?;
        }
        let state = self.engine.state();
        prop_assert!(state.goal().is_empty(), "the goal is reached");
        prop_assert!(state.table().moving().is_empty());
        let active: Vec<_> = state.workers().values().filter(|w| !state.draining().contains(&w.id)).collect();
        let total: u64 = active.iter().map(|w| w.mem_capacity).sum();
        let shares = state.table().shares();
        for w in &active {
            let want = PARTITIONS as f64 * w.mem_capacity as f64 / total as f64;
            let got = shares.get(&w.id).copied().unwrap_or(0) as f64;
            prop_assert!((got - want).abs() < 2.0, "{}: {got} partitions for a share of {want}", w.id);
        }
        for w in state.draining() {
            prop_assert_eq!(shares.get(w).copied().unwrap_or(0), 0, "a drained worker ends with nothing");
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_partition_keeps_one_owner_that_holds_it_and_the_goal_is_reached(evs in events()) {
        let mut sim = Sim::new();
        for e in &evs {
            sim.apply(e)?;
        }
        sim.finish()?;
    }
}

#[test]
fn a_joiner_gets_its_share_and_nobody_else_trades() {
    let mut sim = Sim::new();
    sim.join(2);
    sim.join(4);
    let before = sim.engine.state().table().clone();
    sim.finish().unwrap();
    let after = sim.engine.state().table();
    let (w1, w2, w3) = (WorkerId(1), WorkerId(2), WorkerId(3));
    assert_eq!(after.shares(), BTreeMap::from([(w1, 2), (w2, 2), (w3, 4)]));
    for p in 0..PARTITIONS {
        assert!(after.owner(p) == before.owner(p) || after.owner(p) != Some(w1), "partition {p} moved to w1");
    }
}
