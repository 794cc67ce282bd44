//! Repair driven as the coordinator drives it, in a pool keeping two
//! copies of each chunk on four workers: workers crash (never the last
//! live copy of a partition) and come back, the coordinator restarts,
//! copies end or fail in any order. A model says which workers hold each
//! partition's chunks; after every event:
//!
//! - no worker holds two replicas of a partition, and every owner of a
//!   replica that runs holds its chunks (a slot changes owner only once
//!   the new owner copied them, from a worker that holds them);
//! - a partition never loses its last copy;
//!
//! and once every worker is back, the moves end with every partition's
//! two replicas on two distinct workers holding its chunks.

use crate::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::engine::moves::Move;
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, MetaState, Owner};
use tierpool_types::WorkerId;

const PARTITIONS: u32 = 8;

#[derive(Clone, Debug)]
enum Event {
    Crash(usize),
    Restart(usize),
    Step,
    Copy(usize),
    Fail(usize),
    Wait(u64),
    CoordinatorCrash,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            2 => any::<usize>().prop_map(Event::Crash),
            2 => any::<usize>().prop_map(Event::Restart),
            4 => Just(Event::Step),
            4 => any::<usize>().prop_map(Event::Copy),
            1 => any::<usize>().prop_map(Event::Fail),
            3 => (0u64..6).prop_map(Event::Wait),
            1 => Just(Event::CoordinatorCrash),
        ],
        1..80,
    )
}

struct Sim {
    engine: Engine,
    log: Vec<MetaOp>,
    now: std::time::Duration,
    up: BTreeSet<WorkerId>,
    /// Who holds each partition's chunks.
    has: BTreeMap<u32, BTreeSet<WorkerId>>,
    running: Vec<Move>,
}

impl Sim {
    fn new() -> Sim {
        let mut s = MetaState::new();
        let mut log = vec![
            MetaOp::Init { partitions: PARTITIONS },
            MetaOp::SetReplication { replicas: 2, spread: tierpool_types::Spread::Host },
        ];
        for i in 1..=4u32 {
            log.push(MetaOp::RegisterWorker {
                id: Some(WorkerId(i)),
                addr: format!("10.0.0.{i}:1"),
                host: format!("h{i}"),
                rack: "r".into(),
                mem_capacity: 1,
                disk_capacity: 0,
                at_once: true,
            });
        }
        for op in &log {
            s.execute(op, 1).unwrap();
        }
        let has = (0..PARTITIONS).map(|p| (p, s.table().holders(p).into_iter().collect())).collect();
        let mut sim =
            Sim { engine: Engine::new(s, config()), log, now: secs(1), up: BTreeSet::new(), has, running: vec![] };
        sim.up = (1..=4).map(WorkerId).collect();
        sim.beat();
        sim
    }

    fn exec(&mut self, op: MetaOp) -> bool {
        let ok = self.engine.execute(&op, Owner::default(), 7, self.now).is_ok();
        if ok {
            self.log.push(op);
        }
        ok
    }

    fn beat(&mut self) {
        for w in self.up.clone() {
            self.engine.heartbeat(w, self.now);
        }
    }

    fn step(&mut self) -> Result<(), TestCaseError> {
        for op in self.engine.standing_ops(self.now) {
            prop_assert!(self.exec(op), "a change of standing applies");
        }
        let moves = self.engine.next_moves(self.now);
        let t = self.engine.state().table();
        for m in &moves {
            for s in &m.partitions {
                let p = t.partition_of_slot(*s);
                prop_assert!(self.has[&p].contains(&m.from), "slot {s} is copied from {} which holds it", m.from);
            }
        }
        if moves.is_empty() {
            return Ok(());
        }
        let begin = moves.iter().flat_map(|m| m.partitions.iter().map(|s| (*s, m.to))).collect();
        prop_assert!(self.exec(MetaOp::BeginMoves { moves: begin }), "next_moves offers valid moves");
        self.running.extend(moves);
        Ok(())
    }

    fn end_copy(&mut self, i: usize, ok: bool) {
        if self.running.is_empty() {
            return;
        }
        let m = self.running.remove(i % self.running.len());
        let p_of = |e: &Engine, s: u32| e.state().table().partition_of_slot(s);
        if ok && self.up.contains(&m.from) && self.up.contains(&m.to) {
            self.engine.move_copied(&m, 1);
            let slots = self.engine.finishable(&m);
            let old: Vec<(u32, Option<WorkerId>)> =
                slots.iter().map(|s| (p_of(&self.engine, *s), self.engine.state().table().owner(*s))).collect();
            if !slots.is_empty() && self.exec(MetaOp::FinishMoves { partitions: slots }) {
                for (p, was) in old {
                    let h = self.has.get_mut(&p).unwrap();
                    h.insert(m.to);
                    // The old owner drops its copy (it holds no other slot of p).
                    if let Some(w) = was.filter(|w| !self.engine.state().table().holds(p, *w)) {
                        h.remove(&w);
                    }
                }
            }
        } else {
            self.engine.move_failed(&m, self.now);
            self.exec(MetaOp::AbortMoves { partitions: m.partitions.clone() });
        }
    }

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
        let w = |i: usize| WorkerId(1 + (i % 4) as u32);
        match e {
            Event::Crash(i) => {
                // Never the last live copy of a partition.
                let x = w(*i);
                let survives = self.has.values().all(|h| h.iter().any(|o| *o != x && self.up.contains(o)));
                if survives {
                    self.up.remove(&x);
                }
            }
            Event::Restart(i) => {
                let x = w(*i);
                if self.up.insert(x) {
                    // A new process registers: what it held in memory is
                    // gone, and in a replicated pool its replicas with a
                    // copy elsewhere are let go, to be copied back.
                    let op = MetaOp::RegisterWorker {
                        id: Some(x),
                        addr: format!("10.0.0.{}:1", x.0),
                        host: format!("h{}", x.0),
                        rack: "r".into(),
                        mem_capacity: 1,
                        disk_capacity: 0,
                        at_once: false,
                    };
                    let _ = self.exec(op);
                    // What it held of partitions it no longer holds is stale: dropped.
                    let t = self.engine.state().table();
                    for (p, h) in self.has.iter_mut() {
                        if !t.holds(*p, x) {
                            h.remove(&x);
                        }
                    }
                    self.engine.heartbeat(x, self.now);
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

    fn check(&self) -> Result<(), TestCaseError> {
        let t = self.engine.state().table();
        for p in 0..PARTITIONS {
            let holders = t.holders(p);
            let distinct: BTreeSet<_> = holders.iter().collect();
            prop_assert_eq!(distinct.len(), holders.len(), "partition {}: {:?}", p, holders);
            for o in holders.iter().filter(|o| self.up.contains(o)) {
                prop_assert!(self.has[&p].contains(o), "partition {}: owner {} holds its chunks", p, o);
            }
            prop_assert!(!self.has[&p].is_empty(), "partition {} kept a copy", p);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TestCaseError> {
        for x in 1..=4 {
            self.apply(&Event::Restart(x))?;
        }
        for _ in 0..300 {
            while !self.running.is_empty() {
                self.end_copy(0, true);
                self.check()?;
            }
            self.now += secs(61);
            self.beat();
            self.step()?;
            self.check()?;
            if self.running.is_empty() && self.engine.state().goal().is_empty() {
                break;
            }
        }
        let t = self.engine.state().table();
        prop_assert!(self.engine.state().down().is_empty(), "every worker is back up");
        for p in 0..PARTITIONS {
            let h = t.holders(p);
            prop_assert_eq!(h.len(), 2, "partition {} has two replicas again: {:?}", p, h);
            for o in h {
                prop_assert!(self.has[&p].contains(&o));
            }
        }
        Ok(())
    }
}

proptest! {
    #[test]
    fn repair_restores_both_replicas_whatever_fails(events in events()) {
        let mut sim = Sim::new();
        for e in &events {
            sim.apply(e)?;
        }
        sim.finish()?;
    }
}

#[test]
fn a_crashed_worker_is_declared_down_after_its_grace_and_its_replicas_are_copied_again() {
    let mut sim = Sim::new();
    let x = WorkerId(2);
    let had = sim.engine.state().table().shares()[&x];
    sim.apply(&Event::Crash(1)).unwrap();
    sim.apply(&Event::Wait(2)).unwrap();
    sim.step().unwrap();
    assert!(sim.engine.state().down().is_empty(), "not before its grace period");
    sim.apply(&Event::Wait(2)).unwrap();
    sim.step().unwrap();
    assert_eq!(sim.engine.state().down(), &BTreeSet::from([x]));
    assert!(!sim.engine.state().table().shares().contains_key(&x));
    let moving: usize = sim.running.iter().map(|m| m.partitions.len()).sum();
    assert_eq!(moving as u32, had, "every replica it held is being copied again");
    while !sim.running.is_empty() {
        sim.end_copy(0, true);
        sim.check().unwrap();
    }
    for p in 0..PARTITIONS {
        assert_eq!(sim.engine.state().table().holders(p).len(), 2);
    }
}
