//! Garbage is collected only after its grace period and never while a
//! client holds its inode; every batch is logged or retried.

use crate::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::engine::gc::Batch;
use tierpool_meta::engine::{Effect, Engine};
use tierpool_meta::{MetaOp, MetaReply, Owner};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, InodeId};

#[derive(Clone, Debug)]
enum Event {
    /// Writes (or replaces) file `/f<i>` with a fresh inode.
    Put(u8),
    Remove(u8),
    /// Publishes a new version of chunk 0 of `/f<i>`.
    Rewrite(u8),
    /// Session `s` holds the inodes `/f<i>` had at some point (by index into the history).
    Hold(u64, Vec<u8>),
    Wait(u64),
    Tick,
    /// The batch in flight is over: deleted everywhere (`true`) or not.
    Finish(bool),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    let f = 0u8..3;
    prop::collection::vec(
        prop_oneof![
            3 => f.clone().prop_map(Event::Put),
            2 => f.clone().prop_map(Event::Remove),
            2 => f.clone().prop_map(Event::Rewrite),
            2 => (0u64..2, prop::collection::vec(0u8..12, 0..4)).prop_map(|(s, i)| Event::Hold(s, i)),
            3 => (0u64..6000).prop_map(Event::Wait),
            3 => Just(Event::Tick),
            2 => any::<bool>().prop_map(Event::Finish),
        ],
        1..120,
    )
}

struct Driver {
    engine: Engine,
    now: Duration,
    wall: u64,
    version: u64,
    /// Every inode any file had, in order.
    history: Vec<InodeId>,
    /// Model of holds: session -> (renewed, inodes).
    holds: BTreeMap<u64, (Duration, Vec<InodeId>)>,
    /// When each item became pending (model of the grace period).
    pending_since: BTreeMap<(InodeId, Option<(u64, u64)>), Duration>,
    in_flight: Option<Batch>,
}

impl Driver {
    fn exec(&mut self, op: MetaOp) -> Option<MetaReply> {
        self.wall += 1;
        let before_gc = self.engine.state().pending_gc().clone();
        let before_keys = self.engine.state().pending_chunks().clone();
        let r = self.engine.execute(&op, Owner::default(), self.wall, self.now).ok().map(|(r, _)| r);
        for i in self.engine.state().pending_gc().difference(&before_gc) {
            self.pending_since.insert((*i, None), self.now);
        }
        for k in self.engine.state().pending_chunks().difference(&before_keys) {
            self.pending_since.insert((k.inode, Some((k.index, k.version))), self.now);
        }
        r
    }

    fn current(&self, f: u8) -> Option<InodeId> {
        self.engine.state().stat(&format!("/f{f}")).ok().map(|i| i.id)
    }

    fn held_now(&self) -> BTreeSet<InodeId> {
        (self.holds.values()).filter(|(t, _)| self.now - *t < HOLD).flat_map(|(_, i)| i.iter().copied()).collect()
    }

    fn check_batch(&self, b: &Batch) -> Result<(), TestCaseError> {
        let held = self.held_now();
        let items = (b.inodes.iter().map(|i| (*i, None)))
            .chain(b.keys.iter().map(|k: &ChunkKey| (k.inode, Some((k.index, k.version)))));
        for item in items {
            prop_assert!(!held.contains(&item.0), "{:?} collected while its inode is held", item);
            let since = self.pending_since.get(&item).copied().unwrap_or(self.now);
            prop_assert!(
                self.now - since >= GRACE,
                "{:?} collected {:?} after it became garbage",
                item,
                self.now - since
            );
        }
        Ok(())
    }

    fn step(&mut self, e: Event) -> Result<(), TestCaseError> {
        match e {
            Event::Put(f) => {
                let Some(MetaReply::Inodes { first, .. }) = self.exec(MetaOp::AllocInodes { count: 1 }) else {
                    return Ok(());
                };
                let op = MetaOp::CommitFile {
                    path: format!("/f{f}"),
                    inode: first,
                    size: 100,
                    chunk_size: 4096,
                    checksums: vec![7],
                    homes: Vec::new(),
                    attrs: ChunkAttrs::default(),
                    mode: 0o644,
                    overwrite: true,
                };
                if self.exec(op).is_some() {
                    self.history.push(first);
                }
            }
            Event::Remove(f) => {
                self.exec(MetaOp::Remove { path: format!("/f{f}"), recursive: false });
            }
            Event::Rewrite(f) => {
                if let Some(inode) = self.current(f) {
                    self.version += 1;
                    let r = ChunkRef { version: 1000 + self.version, len: 10, checksum: 1, home: None };
                    self.exec(MetaOp::UpdateFile { inode, size: 100, truncate: None, chunks: vec![(0, r)] });
                }
            }
            Event::Hold(s, picks) => {
                let inodes: Vec<InodeId> =
                    picks.iter().filter_map(|p| self.history.get(*p as usize).copied()).collect();
                self.engine.hold(s, inodes.clone(), self.now);
                if inodes.is_empty() {
                    self.holds.remove(&s);
                } else {
                    self.holds.insert(s, (self.now, inodes));
                }
            }
            Event::Wait(ms) => self.now += Duration::from_millis(ms),
            Event::Tick => {
                for eff in self.engine.tick(self.now) {
                    if let Effect::Collect(b) = eff {
                        prop_assert!(self.in_flight.is_none(), "a second batch while one is in flight");
                        self.check_batch(&b)?;
                        self.in_flight = Some(b);
                    }
                }
            }
            Event::Finish(ok) => {
                if let Some(b) = self.in_flight.take() {
                    if ok {
                        for op in self.engine.collected(&b) {
                            self.exec(op).expect("recording a collection succeeds");
                        }
                        for i in &b.inodes {
                            prop_assert!(!self.engine.state().pending_gc().contains(i));
                        }
                    } else {
                        self.engine.batch_failed(&b);
                    }
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn held_or_young_garbage_is_never_collected(evs in events()) {
        let mut d = Driver {
            engine: engine(),
            now: Duration::ZERO,
            wall: 10,
            version: 0,
            history: Vec::new(),
            holds: BTreeMap::new(),
            pending_since: BTreeMap::new(),
            in_flight: None,
        };
        for e in evs {
            d.step(e)?;
        }
        // Left alone long enough, with no holds, everything is collected.
        d.step(Event::Finish(true))?;
        d.holds.clear();
        for s in 0..2 {
            d.engine.hold(s, Vec::new(), d.now);
        }
        for _ in 0..50 {
            d.step(Event::Wait(6000))?;
            d.step(Event::Tick)?;
            d.step(Event::Finish(true))?;
        }
        prop_assert!(d.engine.state().pending_gc().is_empty());
        prop_assert!(d.engine.state().pending_chunks().is_empty());
    }
}

/// After a restart the engine knows no holds: everything pending waits a
/// whole grace period again, long enough for clients to renew.
#[test]
fn after_a_restart_pending_garbage_waits_a_full_grace_period() {
    let mut e = engine();
    let Ok((MetaReply::Inodes { first, .. }, _)) =
        e.execute(&MetaOp::AllocInodes { count: 1 }, Owner::default(), 2, secs(0))
    else {
        panic!("alloc")
    };
    let commit = MetaOp::CommitFile {
        path: "/f".into(),
        inode: first,
        size: 1,
        chunk_size: 4096,
        checksums: vec![1],
        homes: Vec::new(),
        attrs: ChunkAttrs::default(),
        mode: 0o644,
        overwrite: false,
    };
    e.execute(&commit, Owner::default(), 3, secs(0)).unwrap();
    e.execute(&MetaOp::Remove { path: "/f".into(), recursive: false }, Owner::default(), 4, secs(0)).unwrap();
    assert!(e.tick(secs(100)).iter().all(|x| !matches!(x, Effect::Collect(_))), "first seen now");
    let collect = e.tick(secs(105));
    assert!(matches!(&collect[..], [Effect::Collect(b)] if b.inodes == vec![first]), "{collect:?}");
    // A restarted engine over the same state starts counting again.
    let mut again = Engine::new(e.state().clone(), config());
    again.tick(secs(0));
    assert!(again.tick(secs(4)).is_empty());
    assert!(matches!(&again.tick(secs(5))[..], [Effect::Collect(_)]));
}

#[test]
fn garbage_is_reclaimable_at_once_unless_its_inode_is_held() {
    let mut e = engine();
    let put = |e: &mut Engine, path: &str| {
        let Ok((MetaReply::Inodes { first, .. }, _)) =
            e.execute(&MetaOp::AllocInodes { count: 1 }, Owner::default(), 2, secs(0))
        else {
            panic!("alloc")
        };
        let op = MetaOp::CommitFile {
            path: path.into(),
            inode: first,
            size: 1,
            chunk_size: 4096,
            checksums: vec![1],
            homes: Vec::new(),
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: true,
        };
        e.execute(&op, Owner::default(), 3, secs(0)).unwrap();
        first
    };
    let a = put(&mut e, "/a");
    let (_, effects) =
        e.execute(&MetaOp::Remove { path: "/a".into(), recursive: false }, Owner::default(), 4, secs(1)).unwrap();
    assert_eq!(effects, vec![Effect::Reclaim(tierpool_meta::Garbage { inodes: vec![a], keys: vec![] })]);
    let b = put(&mut e, "/b");
    e.hold(7, vec![b], secs(1));
    let (_, effects) =
        e.execute(&MetaOp::Remove { path: "/b".into(), recursive: false }, Owner::default(), 5, secs(2)).unwrap();
    assert!(effects.is_empty(), "a removed file held open keeps its chunks: {effects:?}");
}
