//! Pages of memory regions in transactions: pages written in place after
//! the commit, views served by the images commits bring, conflicts by
//! page, restores; by example and against a model of snapshot isolation
//! in which the workers' bytes and the pending writes are explicit.

use crate::*;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::engine::transactions::{Changes, Commit};
use tierpool_meta::engine::Engine;
use tierpool_meta::{MetaOp, MetaReply, Owner, TxRegion, REGION_PAGE};
use tierpool_types::{ChunkAttrs, ChunkRef, ErrorKind, InodeId, Result};

/// Pages of the region the tests use; its last page is short.
const PAGES: u64 = 4;
const SIZE: u64 = PAGES * REGION_PAGE - 100;

fn page_len(p: u64) -> usize {
    (SIZE - p * REGION_PAGE).min(REGION_PAGE) as usize
}

fn page(p: u64, byte: u8) -> Bytes {
    Bytes::from(vec![byte; page_len(p)])
}

/// An engine with one region, and the bytes its workers hold.
struct Pool {
    e: Engine,
    now: Duration,
    wall: u64,
    region: InodeId,
    disk: Vec<Bytes>,
}

impl Pool {
    fn new() -> Pool {
        let mut e = engine();
        let inode = match e.execute(&MetaOp::AllocInodes { count: 1 }, Owner::default(), 1, secs(20)).unwrap().0 {
            MetaReply::Inodes { first, .. } => first,
            other => panic!("{other:?}"),
        };
        let op = MetaOp::CommitRegion {
            path: "/r".into(),
            inode,
            size: SIZE,
            chunk_size: 2 * REGION_PAGE,
            attrs: ChunkAttrs::default(),
            mode: 0o600,
        };
        e.execute(&op, Owner::default(), 2, secs(20)).unwrap();
        let disk = (0..PAGES).map(|p| page(p, 0)).collect();
        Pool { e, now: secs(20), wall: 2, region: inode, disk }
    }

    /// Another region of the same size at `path`.
    fn region_at(&mut self, path: &str) -> InodeId {
        let inode = match self.exec(&MetaOp::AllocInodes { count: 1 }).unwrap() {
            MetaReply::Inodes { first, .. } => first,
            other => panic!("{other:?}"),
        };
        let op = MetaOp::CommitRegion {
            path: path.into(),
            inode,
            size: SIZE,
            chunk_size: 2 * REGION_PAGE,
            attrs: ChunkAttrs::default(),
            mode: 0o600,
        };
        self.exec(&op).unwrap();
        inode
    }

    fn exec(&mut self, op: &MetaOp) -> Result<MetaReply> {
        self.wall += 1;
        self.e.execute(op, Owner::default(), self.wall, self.now).map(|(r, _)| r)
    }

    /// Writes the oldest pending commit's pages on the "workers" and says so.
    fn apply_one(&mut self) -> bool {
        let Some((id, regions)) = self.e.state().pending_pages().first_key_value().map(|(i, r)| (*i, r.clone())) else {
            return false;
        };
        for r in regions {
            for (p, bytes) in r.pages {
                self.disk[p as usize] = bytes;
            }
        }
        assert_eq!(self.exec(&MetaOp::RegionPagesWritten { id }).unwrap(), MetaReply::Done);
        true
    }

    /// Page `p` as transaction `tx` of `session` sees it (without its own
    /// writes): the workers' bytes, then what the coordinator says it held.
    fn view(&mut self, session: u64, tx: u64, p: u64) -> Result<Bytes> {
        let on_disk = self.disk[p as usize].clone();
        let then = self.e.tx_pages(session, tx, self.region, (p, 1), self.now)?;
        Ok(then.into_iter().find(|(i, _)| *i == p).map_or(on_disk, |(_, b)| b))
    }

    /// Commits `tx` of `session` writing `pages`, with their images in its view.
    fn commit(&mut self, session: u64, tx: u64, pages: &BTreeMap<u64, Bytes>) -> Result<Commit> {
        let mut before = Vec::new();
        for p in pages.keys() {
            before.push((*p, self.view(session, tx, *p)?));
        }
        let regions = vec![TxRegion { inode: self.region, pages: pages.clone().into_iter().collect() }];
        let changes = Changes {
            regions: if pages.is_empty() { Vec::new() } else { regions },
            before: vec![TxRegion { inode: self.region, pages: before }],
            ..Changes::default()
        };
        let c = self.e.tx_commit(session, tx, None, changes, self.now)?;
        if let Commit::Run(op) = &c {
            self.exec(op)?;
        }
        Ok(c)
    }
}

#[test]
fn committed_pages_are_pending_until_written_and_views_keep_what_pages_held() {
    let mut p = Pool::new();
    let reader = p.e.tx_begin(2, p.now);
    let writer = p.e.tx_begin(1, p.now);
    p.e.tx_write(1, writer, p.region, "/r", &[1, 3], p.now).unwrap();
    let writes = BTreeMap::from([(1, page(1, 7)), (3, page(3, 8))]);
    assert!(matches!(p.commit(1, writer, &writes).unwrap(), Commit::Run(_)));
    // Committed: pending in the state (and so in every snapshot of it).
    let pending = p.e.state().pending_pages().clone();
    assert_eq!(pending.len(), 1);
    let (id, regions) = pending.into_iter().next().unwrap();
    assert_eq!(regions, vec![TxRegion { inode: p.region, pages: writes.clone().into_iter().collect() }]);
    // Before and after the workers hold them, the reader sees the old bytes.
    assert_eq!(p.view(2, reader, 3).unwrap(), page(3, 0));
    assert!(p.apply_one());
    assert_eq!(p.disk[3], page(3, 8));
    assert_eq!(p.view(2, reader, 3).unwrap(), page(3, 0));
    assert_eq!(p.view(2, reader, 1).unwrap(), page(1, 0));
    assert_eq!(p.view(2, reader, 0).unwrap(), page(0, 0));
    assert!(p.e.state().pending_pages().is_empty());
    // A second "written" for the same commit is refused; nothing pending.
    assert_eq!(p.exec(&MetaOp::RegionPagesWritten { id }).unwrap_err().kind, ErrorKind::NotFound);
    // A transaction begun now sees the commit.
    let late = p.e.tx_begin(3, p.now);
    assert_eq!(p.view(3, late, 1).unwrap(), page(1, 7));
    // The reader, read-only, commits; with no transaction open, no image is kept.
    assert_eq!(p.commit(2, reader, &BTreeMap::new()).unwrap(), Commit::Nothing);
    p.e.tx_abort(3, late);
    let tx = p.e.tx_begin(1, p.now);
    assert!(p.e.tx_pages(1, tx, p.region, (0, PAGES), p.now).unwrap().is_empty());
}

#[test]
fn the_first_committer_of_a_page_wins_and_others_learn_it_early() {
    let mut p = Pool::new();
    let a = p.e.tx_begin(1, p.now);
    let b = p.e.tx_begin(2, p.now);
    let c = p.e.tx_begin(3, p.now);
    p.e.tx_write(2, b, p.region, "/r", &[2], p.now).unwrap();
    assert!(matches!(p.commit(1, a, &BTreeMap::from([(2, page(2, 1))])).unwrap(), Commit::Run(_)));
    // b wrote page 2: its next request fails, naming the page.
    let e = p.e.tx_pages(2, b, p.region, (0, 1), p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("page 2 was rewritten"), "{}", e.message);
    // c writes another page of the same chunk: no conflict.
    assert!(matches!(p.commit(3, c, &BTreeMap::from([(3, page(3, 2))])).unwrap(), Commit::Run(_)));
    // A transaction that writes page 2 now, having begun before a's commit, loses at once.
    let d = p.e.tx_begin(4, p.now);
    p.apply_one();
    p.apply_one();
    let late = p.e.tx_begin(5, p.now);
    assert!(matches!(p.commit(5, late, &BTreeMap::from([(2, page(2, 9))])).unwrap(), Commit::Run(_)));
    let e = p.e.tx_write(4, d, p.region, "/r", &[2], p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
}

#[test]
fn commits_of_pages_are_checked_whole_and_bounded() {
    let mut p = Pool::new();
    let region = p.region;
    let bad = |inode: InodeId, pages: Vec<(u64, Bytes)>| MetaOp::Transact {
        task: None,
        files: Vec::new(),
        ns: Vec::new(),
        regions: vec![TxRegion { inode, pages }],
    };
    let before = p.e.state().clone();
    for (pages, why) in [
        (vec![(PAGES, page(0, 1))], "page 4 is not"),
        (vec![(1, Bytes::from_static(b"short"))], "has 5 bytes, not 4096"),
        (vec![(3, page(0, 1))], "not 3996"),
        (vec![(1, page(1, 1)), (1, page(1, 2))], "not a next page"),
    ] {
        let e = p.exec(&bad(region, pages)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains(why), "{} lacks {why}", e.message);
    }
    assert_eq!(p.exec(&bad(InodeId::ROOT, vec![(0, page(0, 1))])).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(p.e.state(), &before, "a refused commit changes nothing");
    // At most 4 pages per transaction here: the same pages again are no more.
    let other = p.region_at("/s");
    let tx = p.e.tx_begin(1, p.now);
    p.e.tx_write(1, tx, region, "/r", &[0, 1, 2, 3], p.now).unwrap();
    p.e.tx_write(1, tx, region, "/r", &[1, 2], p.now).unwrap();
    let e = p.e.tx_write(1, tx, other, "/s", &[0], p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("--tx-max-pages"), "{}", e.message);
    assert_eq!(p.e.tx_pages(1, tx, region, (0, 1), p.now).unwrap_err().kind, ErrorKind::Conflict, "it ended");
    let tx = p.e.tx_begin(1, p.now);
    let pages: BTreeMap<u64, Bytes> = (0..PAGES).map(|i| (i, page(i, 1))).collect();
    assert!(matches!(p.commit(1, tx, &pages).unwrap(), Commit::Run(_)), "4 pages are allowed");
    // Pages out of the region are refused when asked for.
    let tx = p.e.tx_begin(1, p.now);
    assert_eq!(p.e.tx_pages(1, tx, region, (3, 2), p.now).unwrap_err().kind, ErrorKind::InvalidArgument);
}

#[test]
fn a_restore_or_a_removal_since_begin_fails_the_transaction() {
    let mut p = Pool::new();
    let tx = p.e.tx_begin(1, p.now);
    p.e.tx_write(1, tx, p.region, "/r", &[0], p.now).unwrap();
    let v = match p.exec(&MetaOp::AllocInodes { count: 1 }).unwrap() {
        MetaReply::Inodes { first, .. } => first.0,
        other => panic!("{other:?}"),
    };
    let len = |i: u64| (SIZE - i * 2 * REGION_PAGE).min(2 * REGION_PAGE);
    let chunks = (0..2).map(|i| ChunkRef { version: v, len: len(i), checksum: 0, home: None }).collect();
    let ckpt = MetaOp::Checkpoint { path: "/r".into(), name: "one".into(), inode: p.region, version: v, chunks };
    p.exec(&ckpt).unwrap();
    p.exec(&MetaOp::RegionRestore { path: "/r".into(), name: "one".into(), done: false }).unwrap();
    let e = p.e.tx_pages(1, tx, p.region, (0, 1), p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("restored to a checkpoint"), "{}", e.message);
    // A commit of pages while the restore is unfinished is refused by the state.
    let t2 = p.e.tx_begin(2, p.now);
    let e = p.commit(2, t2, &BTreeMap::from([(0, page(0, 3))])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Busy);
    p.exec(&MetaOp::RegionRestore { path: "/r".into(), name: "one".into(), done: true }).unwrap();
    // Removed since begin: the commit loses.
    let t3 = p.e.tx_begin(3, p.now);
    p.exec(&MetaOp::SnapshotRemove { path: "/r".into(), name: "one".into() }).unwrap();
    p.exec(&MetaOp::Remove { path: "/r".into(), recursive: false }).unwrap();
    let e = p.commit(3, t3, &BTreeMap::from([(1, page(1, 3))])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("removed"), "{}", e.message);
}

#[test]
fn pending_pages_hold_off_checkpoints_and_restores_and_before_images_must_match() {
    let mut p = Pool::new();
    let v = match p.exec(&MetaOp::AllocInodes { count: 2 }).unwrap() {
        MetaReply::Inodes { first, .. } => first.0,
        other => panic!("{other:?}"),
    };
    let len = |i: u64| (SIZE - i * 2 * REGION_PAGE).min(2 * REGION_PAGE);
    let ckpt = |name: &str, version: u64| MetaOp::Checkpoint {
        path: "/r".into(),
        name: name.into(),
        inode: InodeId(2),
        version,
        chunks: (0..2).map(|i| ChunkRef { version, len: len(i), checksum: 0, home: None }).collect(),
    };
    p.exec(&ckpt("one", v)).unwrap();
    let tx = p.e.tx_begin(1, p.now);
    assert!(matches!(p.commit(1, tx, &BTreeMap::from([(2, page(2, 5))])).unwrap(), Commit::Run(_)));
    // Pending: neither a checkpoint (it would miss them) nor a restore (they would land on it).
    for op in [ckpt("two", v + 1), MetaOp::RegionRestore { path: "/r".into(), name: "one".into(), done: false }] {
        let e = p.exec(&op).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Busy);
        assert!(e.message.contains("still being written"), "{}", e.message);
    }
    assert!(p.apply_one());
    p.exec(&ckpt("two", v + 1)).unwrap();
    // A transaction that begins during a restore does not read the region until it ends.
    p.exec(&MetaOp::RegionRestore { path: "/r".into(), name: "one".into(), done: false }).unwrap();
    let during = p.e.tx_begin(2, p.now);
    assert_eq!(p.e.tx_pages(2, during, p.region, (0, 1), p.now).unwrap_err().kind, ErrorKind::Busy);
    p.exec(&MetaOp::RegionRestore { path: "/r".into(), name: "one".into(), done: true }).unwrap();
    assert!(p.e.tx_pages(2, during, p.region, (0, 1), p.now).unwrap().is_empty());
    // What the pages held must be given for exactly the pages written.
    let region = p.region;
    for before in [vec![], vec![(0, page(0, 0))], vec![(1, Bytes::from_static(b"short"))]] {
        let tx = p.e.tx_begin(3, p.now);
        let changes = Changes {
            regions: vec![TxRegion { inode: region, pages: vec![(1, page(1, 9))] }],
            before: vec![TxRegion { inode: region, pages: before }],
            ..Changes::default()
        };
        let e = p.e.tx_commit(3, tx, None, changes, p.now).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("exactly the pages it writes"), "{}", e.message);
    }
}

// ---- against a model ----

#[derive(Clone, Debug)]
enum Step {
    Begin(u64),
    Read(u64, u64),
    Write(u64, u64, u8),
    Commit(u64),
    /// The coordinator writes the oldest pending commit's pages.
    Apply,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3u64).prop_map(Step::Begin),
        (0..3u64, 0..PAGES).prop_map(|(c, p)| Step::Read(c, p)),
        (0..3u64, 0..PAGES, 1..255u8).prop_map(|(c, p, b)| Step::Write(c, p, b)),
        (0..3u64).prop_map(Step::Commit),
        Just(Step::Apply),
    ]
}

/// A client's open transaction in the model.
struct Open {
    tx: u64,
    /// Commits before its begin.
    begin: usize,
    writes: BTreeMap<u64, Bytes>,
    /// Whether it looked the region up (where it waits for pages
    /// committed before its begin to be on the workers).
    looked: bool,
}

/// A transaction's first use of the region: its lookup, where the
/// coordinator writes pages committed before its begin if some are still
/// pending.
fn look(p: &mut Pool, o: &mut Open) {
    if !std::mem::replace(&mut o.looked, true) && p.e.tx_waits_for_pages(o.tx, p.region) {
        while p.apply_one() {}
        assert!(!p.e.tx_waits_for_pages(o.tx, p.region));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A transaction may begin while pages are pending; its first use of
    /// the region waits for those. Every read returns the pages as the
    /// commits before the reader's begin left them, and a commit (or any request of a transaction that
    /// wrote a page) fails exactly when a commit since its begin wrote one
    /// of the pages it writes; the workers end up holding the last commit.
    #[test]
    fn region_pages_are_snapshot_isolated(steps in proptest::collection::vec(step(), 1..60)) {
        let mut p = Pool::new();
        // The committed states, oldest first, and the pages each commit wrote.
        let mut states: Vec<Vec<Bytes>> = vec![p.disk.clone()];
        let mut wrote: Vec<Vec<u64>> = vec![Vec::new()];
        let mut open: BTreeMap<u64, Open> = BTreeMap::new();
        let lost = |o: &Open, wrote: &Vec<Vec<u64>>| {
            wrote[o.begin + 1..].iter().any(|w| w.iter().any(|pg| o.writes.contains_key(pg)))
        };
        for s in steps {
            match s {
                Step::Begin(c) => {
                    if let Some(o) = open.remove(&c) {
                        p.e.tx_abort(c + 1, o.tx);
                    }
                    let tx = p.e.tx_begin(c + 1, p.now);
                    open.insert(c, Open { tx, begin: states.len() - 1, writes: BTreeMap::new(), looked: false });
                }
                Step::Read(c, pg) => {
                    let Some(o) = open.get_mut(&c) else { continue };
                    look(&mut p, o);
                    let (tx, begin, should_fail) = (o.tx, o.begin, lost(o, &wrote));
                    match p.view(c + 1, tx, pg) {
                        Ok(got) => {
                            prop_assert!(!should_fail, "read by a transaction that lost");
                            prop_assert_eq!(&got, &states[begin][pg as usize]);
                        }
                        Err(e) => {
                            prop_assert!(should_fail, "{e}");
                            prop_assert_eq!(e.kind, ErrorKind::Conflict);
                            open.remove(&c);
                        }
                    }
                }
                Step::Write(c, pg, b) => {
                    let Some(o) = open.get_mut(&c) else { continue };
                    look(&mut p, o);
                    o.writes.insert(pg, page(pg, b));
                    let (tx, fail) = (o.tx, lost(o, &wrote));
                    match p.e.tx_write(c + 1, tx, p.region, "/r", &[pg], p.now) {
                        Ok(()) => prop_assert!(!fail),
                        Err(e) => {
                            prop_assert!(fail, "{e}");
                            prop_assert_eq!(e.kind, ErrorKind::Conflict);
                            open.remove(&c);
                        }
                    }
                }
                Step::Commit(c) => {
                    let Some(mut o) = open.remove(&c) else { continue };
                    look(&mut p, &mut o);
                    let fail = lost(&o, &wrote);
                    match p.commit(c + 1, o.tx, &o.writes) {
                        Ok(_) => {
                            prop_assert!(!fail, "a commit that should have lost");
                            if !o.writes.is_empty() {
                                let mut next = states.last().unwrap().clone();
                                for (pg, b) in &o.writes {
                                    next[*pg as usize] = b.clone();
                                }
                                states.push(next);
                                wrote.push(o.writes.keys().copied().collect());
                            }
                        }
                        Err(e) => {
                            prop_assert!(fail, "{e}");
                            prop_assert_eq!(e.kind, ErrorKind::Conflict);
                        }
                    }
                }
                Step::Apply => {
                    p.apply_one();
                }
            }
        }
        while p.apply_one() {}
        prop_assert_eq!(&p.disk, states.last().unwrap());
    }
}
