//! Orphans: nothing referenced, kept by a snapshot, pending, held or lately
//! reserved is ever judged an orphan; what a dead writer left is, and its
//! id is retired.

use crate::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use tierpool_meta::engine::Engine;
use tierpool_meta::{Body, MetaOp, MetaReply, Owner};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, ErrorKind, InodeId};

#[derive(Clone, Debug)]
enum Event {
    Put(u8),
    Remove(u8),
    Rewrite(u8),
    /// A writer reserves an id and stores a chunk under it, never committing.
    Abandon,
    Hold(u64, Vec<u8>),
    Wait(u64),
    /// A snapshot of `/f{n}` taken, removed or restored.
    Snap(u8),
    Unsnap(u8),
    Restore(u8),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u8..3).prop_map(Event::Put),
            1 => (0u8..3).prop_map(Event::Remove),
            2 => (0u8..3).prop_map(Event::Rewrite),
            2 => Just(Event::Abandon),
            2 => (0u64..2, prop::collection::vec(0u8..16, 0..3)).prop_map(|(s, i)| Event::Hold(s, i)),
            3 => (0u64..8000).prop_map(Event::Wait),
            1 => (0u8..3).prop_map(Event::Snap),
            1 => (0u8..3).prop_map(Event::Unsnap),
            1 => (0u8..3).prop_map(Event::Restore),
        ],
        1..60,
    )
}

struct World {
    e: Engine,
    now: Duration,
    /// Every chunk any writer stored, and when its id was reserved.
    stored: Vec<(ChunkKey, Duration)>,
    /// Ids reserved, in order (what `Hold` picks from).
    ids: Vec<InodeId>,
    holds: std::collections::BTreeMap<u64, (Duration, Vec<InodeId>)>,
}

impl World {
    fn exec(&mut self, op: MetaOp) -> Option<MetaReply> {
        self.e.execute(&op, Owner::default(), 5, self.now).ok().map(|(r, _)| r)
    }

    fn reserve(&mut self) -> InodeId {
        let Some(MetaReply::Inodes { first, .. }) = self.exec(MetaOp::AllocInodes { count: 1 }) else {
            panic!("alloc")
        };
        self.ids.push(first);
        first
    }

    fn step(&mut self, ev: Event) {
        match ev {
            Event::Put(f) => {
                let id = self.reserve();
                self.stored.push((ChunkKey::hashed(id, 0, 1), self.now));
                let op = MetaOp::CommitFile {
                    path: format!("/f{f}"),
                    inode: id,
                    size: 10,
                    chunk_size: 4096,
                    checksums: vec![1],
                    homes: Vec::new(),
                    attrs: ChunkAttrs::default(),
                    mode: 0o644,
                    overwrite: true,
                };
                self.exec(op);
            }
            Event::Remove(f) => {
                self.exec(MetaOp::Remove { path: format!("/f{f}"), recursive: false });
            }
            Event::Rewrite(f) => {
                let Ok(info) = self.e.state().stat(&format!("/f{f}")) else { return };
                let v = self.reserve().0;
                self.stored.push((ChunkKey::hashed(info.id, 0, v), self.now));
                let r = ChunkRef { version: v, len: 10, checksum: 1, home: None };
                self.exec(MetaOp::UpdateFile { inode: info.id, size: 10, truncate: None, chunks: vec![(0, r)] });
            }
            Event::Abandon => {
                let id = self.reserve();
                self.stored.push((ChunkKey::hashed(id, 0, 1), self.now));
            }
            Event::Hold(s, picks) => {
                let inodes: Vec<InodeId> = picks.iter().filter_map(|p| self.ids.get(*p as usize).copied()).collect();
                self.e.hold(s, inodes.clone(), self.now);
                self.holds.insert(s, (self.now, inodes));
            }
            Event::Wait(ms) => self.now += Duration::from_millis(ms),
            Event::Snap(f) => {
                self.exec(MetaOp::SnapshotCreate { path: format!("/f{f}"), name: "s".into() });
            }
            Event::Unsnap(f) => {
                self.exec(MetaOp::SnapshotRemove { path: format!("/f{f}"), name: "s".into() });
            }
            Event::Restore(f) => {
                self.exec(MetaOp::SnapshotRestore { path: format!("/f{f}"), name: "s".into() });
            }
        }
    }

    fn held(&self) -> BTreeSet<InodeId> {
        (self.holds.values()).filter(|(t, _)| self.now - *t < HOLD).flat_map(|(_, i)| i.iter().copied()).collect()
    }

    /// Whether the model says `k` must be kept.
    fn must_keep(&self, k: ChunkKey, reserved: Duration) -> bool {
        let s = self.e.state();
        let referenced = s.view().inodes.get(&k.inode).is_some_and(|n| match &n.body {
            Body::File { chunks, .. } => chunks.first().is_some_and(|r| r.version == k.version),
            _ => false,
        });
        referenced
            || s.keeps(&k)
            || s.pending_gc().contains(&k.inode)
            || s.pending_chunks().contains(&k)
            || self.held().contains(&k.inode)
            || self.now - reserved < HOLD
            || self.now < HOLD
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn only_what_nothing_wants_is_an_orphan_and_its_id_is_retired(evs in events()) {
        let mut w = World { e: engine(), now: Duration::ZERO, stored: Vec::new(), ids: Vec::new(), holds: Default::default() };
        for ev in evs {
            w.step(ev);
        }
        let keys: Vec<ChunkKey> = w.stored.iter().map(|(k, _)| *k).collect();
        let Some(sweep) = w.e.sweep(&keys, w.now) else {
            prop_assert!(w.now < HOLD, "a sweep is refused only during the first hold period");
            return Ok(());
        };
        let orphans: BTreeSet<ChunkKey> = sweep.orphans.iter().copied().collect();
        for (k, reserved) in &w.stored {
            let keep = w.must_keep(*k, *reserved);
            prop_assert_eq!(orphans.contains(k), !keep, "chunk {} (reserved {:?} ago)", k, w.now - *reserved);
        }
        // Retiring is allowed in this state, and a dead writer's inode can no longer be committed.
        let op = MetaOp::Retire { ids: sweep.retire.clone() };
        w.e.execute(&op, Owner::default(), 6, w.now).unwrap();
        let dead: Vec<u64> = sweep.retire.iter().copied().filter(|i| !w.e.state().pending_gc().contains(&InodeId(*i))).collect();
        for id in &dead {
            let commit = MetaOp::CommitFile {
                path: "/late".into(),
                inode: InodeId(*id),
                size: 1,
                chunk_size: 4096,
                checksums: vec![1], homes: Vec::new(),
                attrs: ChunkAttrs::default(),
                mode: 0o644,
                overwrite: true,
            };
            let e = w.e.execute(&commit, Owner::default(), 7, w.now).unwrap_err();
            prop_assert!(e.kind == ErrorKind::Stale || e.kind == ErrorKind::InvalidArgument, "{:?}", e);
        }
    }
}

#[test]
fn a_killed_writers_chunks_are_orphans_once_its_lease_lapsed() {
    let mut w =
        World { e: engine(), now: Duration::ZERO, stored: Vec::new(), ids: Vec::new(), holds: Default::default() };
    w.now = secs(20);
    w.step(Event::Abandon);
    let id = w.ids[0];
    w.e.lease(1, vec![id], w.now);
    let k = [ChunkKey::hashed(id, 0, 1)];
    assert!(w.e.sweep(&k, secs(25)).unwrap().orphans.is_empty(), "reserved and leased");
    w.e.lease(1, vec![id], secs(28));
    assert!(w.e.sweep(&k, secs(37)).unwrap().orphans.is_empty(), "renewed 9 s ago");
    let s = w.e.sweep(&k, secs(38)).unwrap();
    assert_eq!((s.orphans, s.retire), (k.to_vec(), vec![id.0]), "the lease lapsed");
    assert!(w.e.sweep(&k, secs(5)).is_none() || secs(5) >= HOLD);
}
