//! Every worker ends up with the pool's eviction attributes, whatever
//! pushes were lost and however often the coordinator restarted.

use crate::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::engine::{Effect, Engine};
use tierpool_meta::{MetaOp, MetaReply, Owner};
use tierpool_types::{ChunkAttrs, InodeId, Priority, WorkerId};

/// What a worker believes: inode -> attributes (absent: default).
type WorkerView = BTreeMap<InodeId, ChunkAttrs>;

fn apply(view: &mut WorkerView, changes: &[(InodeId, ChunkAttrs)], replace: bool) {
    if replace {
        view.clear();
    }
    for (i, a) in changes {
        view.insert(*i, *a);
    }
    view.retain(|_, a| *a != ChunkAttrs::default());
}

#[derive(Clone, Debug)]
enum Event {
    SetAttrs {
        file: u8,
        priority: u8,
        pinned: bool,
    },
    Beat(u32),
    Wait(u64),
    Tick,
    /// The coordinator restarts: everything volatile is forgotten.
    Restart,
}

fn events() -> impl Strategy<Value = (Vec<Event>, Vec<bool>)> {
    let evs = prop::collection::vec(
        prop_oneof![
            3 => (0u8..4, 1u8..=5, any::<bool>()).prop_map(|(file, priority, pinned)| Event::SetAttrs { file, priority, pinned }),
            3 => (1u32..3).prop_map(Event::Beat),
            2 => (0u64..5000).prop_map(Event::Wait),
            1 => Just(Event::Tick),
            1 => Just(Event::Restart),
        ],
        1..80,
    );
    (evs, prop::collection::vec(any::<bool>(), 200))
}

fn setup() -> Engine {
    let mut e = engine();
    for w in 1..3u32 {
        let op = MetaOp::RegisterWorker {
            id: Some(WorkerId(w)),
            addr: format!("w{w}"),
            host: "h".into(),
            rack: "r".into(),
            mem_capacity: 1,
            disk_capacity: 1,
            at_once: false,
        };
        e.execute(&op, Owner::default(), 1, secs(0)).unwrap();
    }
    for f in 0..4 {
        let Ok((MetaReply::Inodes { first, .. }, _)) =
            e.execute(&MetaOp::AllocInodes { count: 1 }, Owner::default(), 2, secs(0))
        else {
            panic!("alloc")
        };
        let op = MetaOp::CommitFile {
            path: format!("/f{f}"),
            inode: first,
            size: 1,
            chunk_size: 4096,
            checksums: vec![1],
            homes: Vec::new(),
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: false,
        };
        e.execute(&op, Owner::default(), 3, secs(0)).unwrap();
    }
    // Start from a fresh engine, as a coordinator just started would.
    Engine::new(e.state().clone(), config())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn lost_pushes_and_restarts_never_leave_a_worker_stale((evs, delivered) in events()) {
        let mut e = setup();
        let mut views: BTreeMap<WorkerId, WorkerView> = BTreeMap::new();
        let mut deliver = delivered.into_iter().cycle();
        let mut now = Duration::ZERO;
        let mut carry = |e: &mut Engine, effects: Vec<Effect>, views: &mut BTreeMap<WorkerId, WorkerView>| {
            for eff in effects {
                if let Effect::PushAttrs { workers, changes, replace } = eff {
                    for w in workers {
                        if deliver.next().unwrap_or(true) {
                            apply(views.entry(w).or_default(), &changes, replace);
                        } else {
                            e.push_failed(w);
                        }
                    }
                }
            }
        };
        for ev in evs {
            match ev {
                Event::SetAttrs { file, priority, pinned } => {
                    let op = MetaOp::SetAttrs { path: format!("/f{file}"), priority: Some(Priority::new(priority).unwrap()), pinned: Some(pinned) };
                    let (_, effects) = e.execute(&op, Owner::default(), 9, now).unwrap();
                    carry(&mut e, effects, &mut views);
                }
                Event::Beat(w) => {
                    let (known, effects) = e.heartbeat(WorkerId(w), now);
                    prop_assert!(known);
                    carry(&mut e, effects, &mut views);
                }
                Event::Wait(ms) => now += Duration::from_millis(ms),
                Event::Tick => {
                    let effects = e.tick(now);
                    carry(&mut e, effects, &mut views);
                }
                Event::Restart => {
                    e = Engine::new(e.state().clone(), config());
                    now = Duration::ZERO;
                }
            }
        }
        // Every worker, at its next heartbeats (pushes delivered from now on), agrees with the state.
        let deliver_all = |effects: Vec<Effect>, views: &mut BTreeMap<WorkerId, WorkerView>| {
            for eff in effects {
                if let Effect::PushAttrs { workers, changes, replace } = eff {
                    for w in workers {
                        apply(views.entry(w).or_default(), &changes, replace);
                    }
                }
            }
        };
        for w in 1..3u32 {
            let (_, effects) = e.heartbeat(WorkerId(w), now);
            deliver_all(effects, &mut views);
        }
        let truth: WorkerView = e.state().data_attrs().into_iter().collect();
        for w in 1..3u32 {
            prop_assert_eq!(views.get(&WorkerId(w)).cloned().unwrap_or_default(), truth.clone(), "worker {}", w);
        }
    }
}
