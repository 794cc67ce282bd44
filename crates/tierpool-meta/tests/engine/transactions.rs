//! Transactions: views of the past, first committer wins, task ids, and
//! the garbage open transactions keep; checked by example and against a
//! model of snapshot isolation.

use crate::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::engine::transactions::{Changes, Commit};
use tierpool_meta::engine::{Effect, Engine};
use tierpool_meta::{MetaOp, MetaReply, Owner, TxFile, TxNs};
use tierpool_types::{ChunkAttrs, ChunkRef, ErrorKind, InodeId};

pub(crate) const CS: u64 = 4096;

pub(crate) struct Pool {
    pub(crate) e: Engine,
    pub(crate) now: Duration,
    wall: u64,
}

impl Pool {
    pub(crate) fn new() -> Pool {
        Pool { e: engine(), now: secs(20), wall: 1 }
    }

    pub(crate) fn exec(&mut self, op: MetaOp) -> tierpool_types::Result<(MetaReply, Vec<Effect>)> {
        self.wall += 1;
        self.e.execute(&op, Owner::default(), self.wall, self.now)
    }

    pub(crate) fn fresh(&mut self) -> u64 {
        match self.exec(MetaOp::AllocInodes { count: 1 }).unwrap().0 {
            MetaReply::Inodes { first, .. } => first.0,
            other => panic!("{other:?}"),
        }
    }

    /// A file of `chunks` chunks of `CS` bytes, each its own version.
    pub(crate) fn file(&mut self, path: &str, chunks: u64) -> InodeId {
        let inode = InodeId(self.fresh());
        let op = MetaOp::CommitFile {
            path: path.into(),
            inode,
            size: chunks * CS,
            chunk_size: CS,
            checksums: vec![1; chunks as usize],
            homes: Vec::new(),
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: false,
        };
        self.exec(op).unwrap();
        inode
    }

    pub(crate) fn chunk(&mut self) -> ChunkRef {
        ChunkRef { version: self.fresh(), len: CS, checksum: 9, home: None }
    }

    /// Rewrites chunks `idx` of `inode` outside any transaction.
    pub(crate) fn rewrite(&mut self, inode: InodeId, idx: &[u64]) -> Vec<u64> {
        let chunks: Vec<(u64, ChunkRef)> = idx.iter().map(|i| (*i, self.chunk())).collect();
        let size = self.size(inode);
        let versions = chunks.iter().map(|(_, r)| r.version).collect();
        self.exec(MetaOp::UpdateFile { inode, size, truncate: None, chunks }).unwrap();
        versions
    }

    pub(crate) fn size(&self, inode: InodeId) -> u64 {
        self.e.state().stat_inode(inode, false).unwrap().size
    }

    pub(crate) fn versions(&self, path: &str) -> Vec<u64> {
        self.e.state().stat(path).unwrap().chunks.iter().map(|r| r.version).collect()
    }

    pub(crate) fn seen(&mut self, tx: u64, path: &str) -> tierpool_types::Result<Vec<u64>> {
        let info = self.e.tx_stat(1, tx, path, self.now)?;
        Ok(info.chunks.iter().map(|r| r.version).collect())
    }

    /// Commits `tx` writing chunks `idx` of `inode` (size kept).
    pub(crate) fn commit(
        &mut self,
        tx: u64,
        task: Option<&str>,
        writes: &[(InodeId, Vec<u64>)],
    ) -> tierpool_types::Result<Commit> {
        let mut files = Vec::new();
        for (inode, idx) in writes {
            let chunks = idx.iter().map(|i| (*i, self.chunk())).collect();
            let size = self.e.state().stat_inode(*inode, false).map_or(0, |i| i.size);
            files.push(TxFile { inode: *inode, size, truncate: None, chunks });
        }
        let c = self.e.tx_commit(1, tx, task.map(str::to_owned), Changes { files, ..Changes::default() }, self.now)?;
        if let Commit::Run(op) = &c {
            self.exec(op.clone())?;
        }
        Ok(c)
    }
}

impl Pool {
    /// Commits `tx` with namespace steps `ns` and no writes; runs the op.
    pub(crate) fn commit_steps(&mut self, tx: u64, ns: Vec<TxNs>) -> tierpool_types::Result<Commit> {
        let c = self.e.tx_commit(1, tx, None, Changes { ns, ..Changes::default() }, self.now)?;
        if let Commit::Run(op) = &c {
            self.exec(op.clone())?;
        }
        Ok(c)
    }

    pub(crate) fn mkdir(&mut self, path: &str) {
        self.exec(MetaOp::Mkdir { path: path.into(), parents: false, mode: 0o755 }).unwrap();
    }
}

fn mkdir(path: &str) -> TxNs {
    TxNs::Mkdir { path: path.into(), mode: 0o755 }
}

fn mv(from: &str, to: &str) -> TxNs {
    TxNs::Rename { from: from.into(), to: to.into() }
}

fn rm(path: &str) -> TxNs {
    TxNs::Remove { path: path.into(), recursive: true }
}

#[test]
fn namespace_steps_conflict_with_earlier_commits_of_the_same_entries() {
    let mut p = Pool::new();
    p.mkdir("/d");
    p.file("/d/f", 1);
    p.file("/g", 1);
    let conflict = |r: tierpool_types::Result<Commit>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
        e.message
    };
    // A path made meanwhile by another.
    let tx = p.e.tx_begin(1, p.now);
    p.mkdir("/x");
    let e = conflict(p.commit_steps(tx, vec![mkdir("/x")]));
    assert!(e.starts_with("/x: was made, removed or replaced by a transaction that committed after"), "{e}");
    // A path moved meanwhile, reached through this transaction's own move.
    let tx = p.e.tx_begin(1, p.now);
    p.exec(MetaOp::Rename { from: "/d/f".into(), to: "/d/f2".into() }).unwrap();
    let e = conflict(p.commit_steps(tx, vec![mv("/d", "/e"), rm("/e/f")]));
    assert!(e.starts_with("/d/f: was made, removed or replaced"), "{e}");
    // A tree changed beneath one it removes.
    let tx = p.e.tx_begin(1, p.now);
    p.file("/d/new", 1);
    let e = conflict(p.commit_steps(tx, vec![rm("/d")]));
    assert!(e.starts_with("/d: was changed (or something beneath it) by"), "{e}");
    assert!(p.e.state().stat("/d/new").is_ok(), "nothing of a refused commit applies");
    // Changes elsewhere, and a file's contents, are no conflict for steps.
    let tx = p.e.tx_begin(1, p.now);
    let g = p.e.state().stat("/g").unwrap().id;
    p.rewrite(g, &[0]);
    p.mkdir("/y");
    assert!(matches!(p.commit_steps(tx, vec![mv("/g", "/d/g"), mkdir("/z")]).unwrap(), Commit::Run(_)));
    assert_eq!(p.e.state().stat("/d/g").unwrap().id, g);
    assert!(p.e.state().stat("/z").is_ok() && p.e.state().stat("/g").is_err());
}

#[test]
fn steps_that_drop_or_misplace_another_commit_s_changes_conflict() {
    let mut p = Pool::new();
    p.mkdir("/d");
    let f = p.file("/d/f", 1);
    p.mkdir("/src");
    let x = p.file("/src/x", 1);
    let g = p.file("/g", 1);
    p.file("/h", 1);
    p.mkdir("/out");
    let conflict = |r: tierpool_types::Result<Commit>| r.unwrap_err();
    // Removing a tree in which another commit rewrote a file.
    let tx = p.e.tx_begin(1, p.now);
    p.rewrite(f, &[0]);
    let e = conflict(p.commit_steps(tx, vec![rm("/d")]));
    assert!(e.message.starts_with("/d: was changed (or something beneath it)"), "{e}");
    // Removing a tree into which this transaction moved one another commit changed.
    let tx = p.e.tx_begin(1, p.now);
    p.rewrite(x, &[0]);
    let e = conflict(p.commit_steps(tx, vec![mv("/src", "/d/src"), rm("/d")]));
    assert!(e.message.starts_with("/src: was changed (or something beneath it)"), "{e}");
    // Replacing a file another commit rewrote.
    let tx = p.e.tx_begin(1, p.now);
    p.rewrite(g, &[0]);
    let e = conflict(p.commit_steps(tx, vec![mv("/h", "/g")]));
    assert!(e.message.starts_with("/g: was changed by"), "{e}");
    // Making an entry in a directory another commit replaced.
    let tx = p.e.tx_begin(1, p.now);
    p.exec(MetaOp::Rename { from: "/out".into(), to: "/old".into() }).unwrap();
    p.mkdir("/out");
    let e = conflict(p.commit_steps(tx, vec![mkdir("/out/_SUCCESS")]));
    assert!(e.message.starts_with("/out: was made, removed or replaced"), "{e}");
    assert_eq!(e.kind, ErrorKind::Conflict);
}

#[test]
fn a_failing_step_fails_the_whole_commit() {
    let mut p = Pool::new();
    let a = p.file("/a", 1);
    let va = p.versions("/a");
    let tx = p.e.tx_begin(1, p.now);
    let files = vec![TxFile { inode: a, size: CS, truncate: None, chunks: vec![(0, p.chunk())] }];
    let steps = vec![mkdir("/m"), rm("/nothing")];
    let Commit::Run(op) =
        p.e.tx_commit(1, tx, None, Changes { files, ns: steps, ..Changes::default() }, p.now).unwrap()
    else {
        panic!("an op to run")
    };
    let e = p.exec(op).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::NotFound, "step 2 of the transaction: /nothing: no such file or directory")
    );
    assert_eq!(p.versions("/a"), va);
    assert!(p.e.state().stat("/m").is_err());
}

#[test]
fn a_transaction_reads_files_as_they_were_when_it_began() {
    let mut p = Pool::new();
    let a = p.file("/a", 2);
    p.file("/b", 1);
    let before = p.versions("/a");
    let tx = p.e.tx_begin(1, p.now);
    p.rewrite(a, &[1]);
    p.exec(MetaOp::Rename { from: "/a".into(), to: "/moved".into() }).unwrap();
    p.exec(MetaOp::Remove { path: "/b".into(), recursive: false }).unwrap();
    assert_eq!(p.seen(tx, "/a").unwrap(), before, "rewritten and renamed since: the view has it as it was");
    assert_eq!(p.seen(tx, "/b").unwrap().len(), 1, "removed since: the view still has it");
    assert_eq!(p.seen(tx, "/moved").unwrap_err().kind, ErrorKind::NotFound, "not there when it began");
    let later = p.e.tx_begin(1, p.now);
    assert_eq!(p.seen(later, "/moved").unwrap(), p.versions("/moved"));
    assert_eq!(p.seen(later, "/b").unwrap_err().kind, ErrorKind::NotFound);
}

#[test]
fn the_first_committer_wins_and_the_loser_changes_nothing() {
    let mut p = Pool::new();
    let a = p.file("/a", 3);
    let (t1, t2, t3) = (p.e.tx_begin(1, p.now), p.e.tx_begin(1, p.now), p.e.tx_begin(1, p.now));
    assert!(matches!(p.commit(t1, None, &[(a, vec![0, 1])]).unwrap(), Commit::Run(_)));
    let after_t1 = p.versions("/a");
    let e = p.commit(t2, None, &[(a, vec![1])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(
        e.message,
        "inode 2: chunk 1 was rewritten by a transaction that committed after transaction 2 began; \
         it is aborted (first committer wins)"
    );
    assert_eq!(p.versions("/a"), after_t1, "nothing of the loser is visible");
    // Another chunk of the same file, its size unchanged: no conflict.
    assert!(matches!(p.commit(t3, None, &[(a, vec![2])]).unwrap(), Commit::Run(_)));
    assert_eq!(p.versions("/a")[..2], after_t1[..2]);
    // An ended transaction is not open any more.
    let e = p.commit(t2, None, &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.starts_with("transaction 2 is not open"), "{}", e.message);
}

#[test]
fn a_write_registered_early_learns_of_a_conflict_at_the_next_request() {
    let mut p = Pool::new();
    let a = p.file("/a", 2);
    let tx = p.e.tx_begin(1, p.now);
    p.e.tx_write(1, tx, a, "/a", &[0], p.now).unwrap();
    p.rewrite(a, &[1]);
    p.seen(tx, "/a").unwrap();
    p.rewrite(a, &[0]);
    let e = p.seen(tx, "/a").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert_eq!(p.e.open_transactions(), 0, "it ended there");
    // Writing a chunk someone changed since is refused at once.
    let tx = p.e.tx_begin(1, p.now);
    p.rewrite(a, &[1]);
    let e = p.e.tx_write(1, tx, a, "/a", &[1], p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
}

#[test]
fn a_change_of_size_conflicts_with_any_writer_of_the_file() {
    let mut p = Pool::new();
    let a = p.file("/a", 2);
    let tx = p.e.tx_begin(1, p.now);
    let c = p.chunk();
    p.exec(MetaOp::UpdateFile { inode: a, size: 3 * CS, truncate: None, chunks: vec![(2, c)] }).unwrap();
    let e = p.commit(tx, None, &[(a, vec![0])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("its size changed from 8192 to 12288 bytes"), "{}", e.message);
    // Removed since: a conflict too.
    let tx = p.e.tx_begin(1, p.now);
    p.exec(MetaOp::Remove { path: "/a".into(), recursive: false }).unwrap();
    let e = p.commit(tx, None, &[(a, vec![0])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("the file was removed or replaced"), "{}", e.message);
}

#[test]
fn read_only_transactions_never_conflict() {
    let mut p = Pool::new();
    let a = p.file("/a", 1);
    let tx = p.e.tx_begin(1, p.now);
    p.seen(tx, "/a").unwrap();
    p.rewrite(a, &[0]);
    assert_eq!(p.commit(tx, None, &[]).unwrap(), Commit::Nothing);
}

#[test]
fn of_the_transactions_of_one_task_exactly_one_commits() {
    let mut p = Pool::new();
    let a = p.file("/a", 2);
    let (t1, t2) = (p.e.tx_begin(1, p.now), p.e.tx_begin(1, p.now));
    assert!(matches!(p.commit(t1, Some("map-7"), &[(a, vec![0])]).unwrap(), Commit::Run(_)));
    let v = p.versions("/a");
    // The backup attempt wrote the same chunk: it learns the task is done, not of a conflict.
    assert_eq!(p.commit(t2, Some("map-7"), &[(a, vec![0])]).unwrap(), Commit::AlreadyCommitted);
    assert_eq!(p.versions("/a"), v);
    assert!(p.e.state().task_committed("map-7"));
    // A task id is 1 to 256 bytes.
    let t3 = p.e.tx_begin(1, p.now);
    let e = p.commit(t3, Some(""), &[]).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::InvalidArgument, "a task id is 1 to 256 bytes, not 0"));
    // The op itself refuses a task run twice (a log replayed, a check skipped).
    let op = MetaOp::Transact { task: Some("map-7".into()), files: Vec::new(), ns: Vec::new(), regions: Vec::new() };
    let e = p.exec(op).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    assert_eq!(e.message, "task map-7: a transaction of this task committed already");
}

#[test]
fn a_commit_is_all_or_nothing_across_files() {
    let mut p = Pool::new();
    let (a, b) = (p.file("/a", 1), p.file("/b", 1));
    let (va, vb) = (p.versions("/a"), p.versions("/b"));
    let tx = p.e.tx_begin(1, p.now);
    // The second file's update is invalid (chunk past the end): neither applies.
    let files = vec![
        TxFile { inode: a, size: CS, truncate: None, chunks: vec![(0, p.chunk())] },
        TxFile { inode: b, size: CS, truncate: None, chunks: vec![(5, p.chunk())] },
    ];
    let Commit::Run(op) = p.e.tx_commit(1, tx, None, Changes { files, ..Changes::default() }, p.now).unwrap() else {
        panic!("an op to run")
    };
    let e = p.exec(op).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    assert_eq!((p.versions("/a"), p.versions("/b")), (va, vb));
    // The same file twice in one commit is refused.
    let op = MetaOp::Transact {
        task: None,
        files: vec![
            TxFile { inode: a, size: CS, truncate: None, chunks: vec![] },
            TxFile { inode: a, size: CS, truncate: None, chunks: vec![] },
        ],
        regions: Vec::new(),
        ns: Vec::new(),
    };
    assert_eq!(p.exec(op).unwrap_err().kind, ErrorKind::InvalidArgument);
}

#[test]
fn garbage_waits_while_a_transaction_that_may_see_it_is_open() {
    let mut p = Pool::new();
    let a = p.file("/a", 1);
    let tx = p.e.tx_begin(1, p.now);
    let (_, effects) = {
        let c = p.chunk();
        p.exec(MetaOp::UpdateFile { inode: a, size: CS, truncate: None, chunks: vec![(0, c)] }).unwrap()
    };
    assert!(!effects.iter().any(|e| matches!(e, Effect::Reclaim(_))), "not handed back while it may be read");
    for s in 0..4 {
        p.now = secs(20 + s * 2);
        p.e.tx_renew(1, &[tx], p.now).unwrap();
        let effects = p.e.tick(p.now);
        assert!(!effects.iter().any(|e| matches!(e, Effect::Collect(_))), "kept for the transaction: {effects:?}");
    }
    p.e.tx_abort(1, tx);
    p.now += GRACE;
    let effects = p.e.tick(p.now);
    assert!(effects.iter().any(|e| matches!(e, Effect::Collect(_))), "collected once it ended: {effects:?}");
}

#[test]
fn a_transaction_not_heard_from_for_the_hold_period_is_forgotten() {
    let mut p = Pool::new();
    let a = p.file("/a", 1);
    let tx = p.e.tx_begin(1, p.now);
    p.now += HOLD / 2;
    p.e.tx_renew(1, &[tx], p.now).unwrap();
    p.now += HOLD / 2 + secs(1);
    p.e.tick(p.now);
    assert_eq!(p.e.open_transactions(), 1, "renewed half way");
    assert_eq!(p.e.tx_renew(2, &[tx], p.now + HOLD).unwrap_err().kind, ErrorKind::Conflict);
    p.now += HOLD + secs(1);
    p.e.tick(p.now);
    assert_eq!(p.e.open_transactions(), 0, "another session's renewal does not count");
    let e = p.commit(tx, None, &[(a, vec![0])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
}

// ---- against a model of snapshot isolation ----

#[derive(Clone, Debug)]
enum Step {
    /// Client `c` begins a transaction (ending any it had, aborted).
    Begin(usize),
    /// Client `c` reads file `f` in its transaction.
    Read(usize, usize),
    /// Client `c` will write chunk `i` of file `f`; with `early`, telling the coordinator now.
    Write(usize, usize, u64, bool),
    /// Client `c` commits.
    Commit(usize),
    /// A writer outside any transaction rewrites chunk `i` of file `f`.
    Plain(usize, u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let (c, f, i) = (0usize..3, 0usize..2, 0u64..3);
    prop::collection::vec(
        prop_oneof![
            2 => c.clone().prop_map(Step::Begin),
            3 => (c.clone(), f.clone()).prop_map(|(c, f)| Step::Read(c, f)),
            3 => (c.clone(), f.clone(), i.clone(), any::<bool>()).prop_map(|(c, f, i, e)| Step::Write(c, f, i, e)),
            2 => c.prop_map(Step::Commit),
            1 => (f, i).prop_map(|(f, i)| Step::Plain(f, i)),
        ],
        1..60,
    )
}

/// The oracle: every committed state of the files (chunk versions), and
/// which (file, chunk) each commit wrote.
struct Model {
    states: Vec<Vec<Vec<u64>>>,
    wrote: Vec<Vec<(usize, u64)>>,
}

struct Open {
    tx: u64,
    /// Index into `states` of the state it began on.
    begin: usize,
    writes: Vec<(usize, u64)>,
    /// The writes the coordinator was told of before the commit.
    claimed: Vec<(usize, u64)>,
    dead: bool,
}

impl Model {
    /// Whether a transaction that began on state `begin` and writes `w` may commit.
    fn may_commit(&self, begin: usize, w: &[(usize, u64)]) -> bool {
        self.wrote[begin + 1..].iter().all(|c| c.iter().all(|x| !w.contains(x)))
    }

    fn commit(&mut self, p: &Pool, w: Vec<(usize, u64)>) {
        self.states.push((0..2).map(|f| p.versions(&format!("/f{f}"))).collect());
        self.wrote.push(w);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn transactions_behave_as_snapshot_isolation_says(steps in steps()) {
        let mut p = Pool::new();
        let files: Vec<InodeId> = (0..2).map(|f| p.file(&format!("/f{f}"), 3)).collect();
        let mut m = Model { states: Vec::new(), wrote: Vec::new() };
        m.commit(&p, Vec::new());
        let mut open: BTreeMap<usize, Open> = BTreeMap::new();
        for s in steps {
            match s {
                Step::Begin(c) => {
                    if let Some(o) = open.remove(&c) {
                        p.e.tx_abort(1, o.tx);
                    }
                    let tx = p.e.tx_begin(1, p.now);
                    open.insert(c, Open { tx, begin: m.states.len() - 1, writes: Vec::new(), claimed: Vec::new(), dead: false });
                }
                Step::Read(c, f) => {
                    let Some(o) = open.get_mut(&c) else { continue };
                    let r = p.seen(o.tx, &format!("/f{f}"));
                    if o.dead {
                        prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Conflict);
                        open.remove(&c);
                        continue;
                    }
                    // A transaction that registered a write someone else committed since learns of it here.
                    let lost = !m.may_commit(o.begin, &o.claimed);
                    if lost {
                        prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Conflict);
                        open.remove(&c);
                    } else {
                        prop_assert_eq!(r.unwrap(), m.states[o.begin][f].clone(), "reads its snapshot");
                    }
                }
                Step::Write(c, f, i, early) => {
                    let Some(o) = open.get_mut(&c) else { continue };
                    if o.writes.contains(&(f, i)) {
                        continue;
                    }
                    if early && !o.dead {
                        let r = p.e.tx_write(1, o.tx, files[f], &format!("/f{f}"), &[i], p.now);
                        o.claimed.push((f, i));
                        if m.may_commit(o.begin, &o.claimed) {
                            prop_assert!(r.is_ok(), "{r:?}");
                        } else {
                            prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Conflict);
                            o.dead = true;
                        }
                    }
                    o.writes.push((f, i));
                }
                Step::Commit(c) => {
                    let Some(o) = open.remove(&c) else { continue };
                    let mut by_file: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
                    for (f, i) in &o.writes {
                        by_file.entry(*f).or_default().push(*i);
                    }
                    let writes: Vec<(InodeId, Vec<u64>)> = by_file.into_iter().map(|(f, mut i)| {
                        i.sort();
                        (files[f], i)
                    }).collect();
                    let r = p.commit(o.tx, None, &writes);
                    if !o.dead && m.may_commit(o.begin, &o.writes) {
                        prop_assert!(r.is_ok(), "{r:?}");
                        if !o.writes.is_empty() {
                            m.commit(&p, o.writes);
                        }
                    } else {
                        prop_assert_eq!(r.unwrap_err().kind, ErrorKind::Conflict);
                    }
                }
                Step::Plain(f, i) => {
                    p.rewrite(files[f], &[i]);
                    m.commit(&p, vec![(f, i)]);
                }
            }
            p.now += Duration::from_millis(10);
        }
    }
}

#[test]
fn a_directory_seen_as_it_was_names_children_gone_since() {
    let mut p = Pool::new();
    p.exec(MetaOp::Mkdir { path: "/d/s".into(), parents: true, mode: 0o755 }).unwrap();
    p.file("/d/f", 1);
    let tx = p.e.tx_begin(1, p.now);
    p.exec(MetaOp::Remove { path: "/d".into(), recursive: true }).unwrap();
    let d = p.e.tx_stat(1, tx, "/d", p.now).unwrap();
    assert_eq!(d.size, 2, "both entries, as when it began");
    assert_eq!(p.seen(tx, "/d/f").unwrap().len(), 1);
}

#[test]
fn only_the_session_that_began_a_transaction_uses_it() {
    let mut p = Pool::new();
    let a = p.file("/a", 1);
    let tx = p.e.tx_begin(1, p.now);
    assert_eq!(p.e.tx_stat(2, tx, "/a", p.now).unwrap_err().kind, ErrorKind::Conflict);
    assert_eq!(p.e.tx_write(2, tx, a, "/a", &[0], p.now).unwrap_err().kind, ErrorKind::Conflict);
    assert_eq!(p.e.tx_commit(2, tx, None, Changes::default(), p.now).unwrap_err().kind, ErrorKind::Conflict);
    p.e.tx_abort(2, tx);
    assert_eq!(p.e.open_transactions(), 1, "another session cannot end it either");
    p.seen(tx, "/a").unwrap();
}

#[test]
fn a_transaction_writes_at_most_the_configured_number_of_files() {
    let mut p = Pool::new();
    let files: Vec<InodeId> = (0..4).map(|i| p.file(&format!("/f{i}"), 1)).collect();
    let tx = p.e.tx_begin(1, p.now);
    for (i, f) in files[..3].iter().enumerate() {
        p.e.tx_write(1, tx, *f, &format!("/f{i}"), &[0], p.now).unwrap();
    }
    let e = p.e.tx_write(1, tx, files[3], "/f3", &[0], p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert_eq!(e.message, format!("transaction {tx}: writes more than 3 files (the coordinator's --tx-max-files)"));
    let writes: Vec<(InodeId, Vec<u64>)> = files.iter().map(|f| (*f, vec![0])).collect();
    let tx = p.e.tx_begin(1, p.now);
    assert_eq!(p.commit(tx, None, &writes).unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(p.e.open_transactions(), 1, "the first one is still open: a refused write ends nothing");
}
