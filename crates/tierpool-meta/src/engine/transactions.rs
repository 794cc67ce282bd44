//! Transactions under snapshot isolation, as pure code: which transactions
//! are open, what the pool looked like when each began, and whether a
//! commit lost to an earlier one.
//!
//! A transaction reads the pool as it was when it began (its *view*) and
//! keeps its writes to itself (the client holds them, then stores them as
//! fresh chunk versions no one reads) until it commits, in one op
//! (`MetaOp::Transact`). The first committer wins: a commit fails with a
//! conflict if, since the transaction began, another commit changed the
//! size of a file it writes or a chunk of it that it writes, or an entry of
//! the namespace it changes or an inode it removes or replaces (see
//! `entries`). A transaction
//! that registered its writes as it went ([`Transactions::write`]) learns
//! of such a change at its next request, before doing more work.
//! Read-only transactions never fail.
//!
//! Views cost nothing while no transaction is open. While one is, every op
//! is counted (`seq`) and the state notes each inode it changes as it was
//! before (see `state/before.rs`); the note goes to `past` under the op's
//! number. A transaction that began at `b` sees an inode as the first image
//! noted after `b`, or live if none was. Images no open transaction can
//! see are dropped when transactions end.
//!
//! Open transactions live only in the coordinator's memory: a coordinator
//! that restarts has none, and every transaction open in it fails (nothing
//! of it was visible, so nothing is lost). A transaction not heard from
//! for the hold period is abandoned and forgotten.
//!
//! Invariants (tested against a model in `tests/engine/transactions.rs`):
//! - a view reads every file as it was after the last op before its begin;
//! - a commit whose files changed (size, or a chunk it writes) or whose
//!   entries changed after its begin fails; one whose did not is let through;
//! - `past` is empty when no transaction is open, and holds per inode
//!   images in increasing op order, each newer than some open begin.

use crate::state::{FileShape, Image};
use crate::{InodeInfo, MetaOp, MetaState, TxFile, TxNs};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tierpool_types::{Error, ErrorKind, InodeId, Result};

/// Most files one transaction writes, unless configured otherwise.
pub const MAX_TX_FILES: usize = 1024;

#[derive(Debug)]
pub struct Transactions {
    /// Ops executed since the engine started.
    seq: u64,
    next_id: u64,
    open: BTreeMap<u64, Tx>,
    /// Per inode: (number of the op that changed it, what it was before).
    past: BTreeMap<InodeId, Vec<(u64, Image)>>,
    /// Whether commits are checked for write-write conflicts (only a test
    /// of the history checker turns this off).
    check_writes: bool,
    hold: Duration,
    /// Most files one transaction writes.
    max_files: usize,
}

#[derive(Debug)]
struct Tx {
    session: u64,
    /// `seq` when it began.
    begin: u64,
    /// When it began.
    began: Duration,
    /// When it was last heard from.
    seen: Duration,
    /// Files it said it writes: their path (for errors) and chunks.
    writes: BTreeMap<InodeId, (String, BTreeSet<u64>)>,
}

/// What a commit comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Run and log this op: its success is the commit.
    Run(MetaOp),
    /// A read-only transaction without a task: nothing to record.
    Nothing,
    /// Another transaction of the same task committed already.
    AlreadyCommitted,
}

impl Transactions {
    pub fn new(hold: Duration, max_files: usize) -> Transactions {
        let (open, past) = (BTreeMap::new(), BTreeMap::new());
        Transactions { seq: 0, next_id: 1, open, past, check_writes: true, hold, max_files: max_files.max(1) }
    }

    /// Turns the write-write check off (a test proving the history checker
    /// notices lost updates) or on.
    pub fn set_check_writes(&mut self, on: bool) {
        self.check_writes = on;
    }

    /// An op ran: `changed` are the inodes it changed as they were before.
    pub fn after_op(&mut self, changed: BTreeMap<InodeId, Image>) {
        self.seq += 1;
        if self.open.is_empty() {
            return;
        }
        // An inode noted since the newest transaction began is seen by
        // every open one as that note or an older one: later notes are
        // never looked at.
        let newest = self.open.values().map(|t| t.begin).max().unwrap_or(0);
        for (id, image) in changed {
            let images = self.past.entry(id).or_default();
            if images.last().is_none_or(|(s, _)| *s <= newest) {
                images.push((self.seq, image));
            }
        }
    }

    /// Opens a transaction for client `session`; the state must watch changes.
    pub fn begin(&mut self, session: u64, now: Duration) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let tx = Tx { session, begin: self.seq, began: now, seen: now, writes: BTreeMap::new() };
        self.open.insert(id, tx);
        id
    }

    /// Whether any transaction is open (the state must then watch changes).
    pub fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// How many transactions are open.
    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// When the oldest open transaction began: garbage made since may be
    /// in its view and must stay.
    pub fn oldest(&self) -> Option<Duration> {
        self.open.values().map(|t| t.began).min()
    }

    /// Inode `id` as transaction `tx` sees it: `None` if as it is live.
    fn image(&self, begin: u64, id: InodeId) -> Option<&Image> {
        self.past.get(&id)?.iter().find(|(s, _)| *s > begin).map(|(_, img)| img)
    }

    /// The inode at `path` as transaction `tx` of `session` sees it (a
    /// file's chunks and bytes included).
    pub fn stat(&mut self, state: &MetaState, session: u64, tx: u64, path: &str, now: Duration) -> Result<InodeInfo> {
        let begin = self.heard(state, session, tx, now)?.begin;
        let info = state.stat_in(path, &|id| self.image(begin, id))?;
        if info.origin.is_some() {
            // Its chunks below are read from the under-store as it is now.
            return Err(Error::invalid(format!("{path}: files beneath an attachment are not read in transactions")));
        }
        Ok(info)
    }

    /// Transaction `tx` writes chunks `chunks` of the file `inode` (at
    /// `path`): fails, ending it, if a commit changed them already.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        state: &MetaState,
        session: u64,
        tx: u64,
        inode: InodeId,
        path: &str,
        chunks: &[u64],
        now: Duration,
    ) -> Result<()> {
        let begin = self.heard(state, session, tx, now)?.begin;
        if self.file_then(state, begin, inode).is_none() {
            return Err(Error::invalid(format!("{path}: inode {inode} is not a file this transaction sees")));
        }
        let t = self.open.get_mut(&tx).expect("heard from above");
        let max = self.max_files;
        if !t.writes.contains_key(&inode) && t.writes.len() >= max {
            let e = format!("transaction {tx}: writes more than {max} files (the coordinator's --tx-max-files)");
            return Err(Error::invalid(e));
        }
        let entry = t.writes.entry(inode).or_insert_with(|| (path.to_owned(), BTreeSet::new()));
        entry.1.extend(chunks.iter().copied());
        if let Err(e) = self.check(state, tx) {
            self.end(tx);
            return Err(e);
        }
        Ok(())
    }

    /// Renews transactions `txs` of `session`; fails naming the first
    /// that is not open (any more) for it.
    pub fn renew(&mut self, session: u64, txs: &[u64], now: Duration) -> Result<()> {
        let mut gone = None;
        for id in txs {
            match self.open.get_mut(id).filter(|t| t.session == session) {
                Some(t) => t.seen = now,
                None => gone = gone.or(Some(*id)),
            }
        }
        gone.map_or(Ok(()), |id| Err(not_open(id)))
    }

    /// Ends transaction `tx` of `session` without a commit (nothing of it was visible).
    pub fn abort(&mut self, session: u64, tx: u64) {
        if self.open.get(&tx).is_some_and(|t| t.session == session) {
            self.end(tx);
        }
    }

    /// Transactions not heard from for the hold period: forgotten.
    pub fn expire(&mut self, now: Duration) -> Vec<u64> {
        let hold = self.hold;
        let gone: Vec<u64> =
            self.open.iter().filter(|(_, t)| now.saturating_sub(t.seen) > hold).map(|(id, _)| *id).collect();
        for id in &gone {
            self.end(*id);
        }
        gone
    }

    /// Ends transaction `tx` and says what its commit is: the op to run,
    /// or why it cannot commit. `changes` are its writes (each an update
    /// of a file it sees) and its namespace steps, `task` its task id.
    pub fn commit(
        &mut self,
        state: &MetaState,
        session: u64,
        tx: u64,
        task: Option<String>,
        changes: (Vec<TxFile>, Vec<TxNs>),
        now: Duration,
    ) -> Result<Commit> {
        // Another attempt at the task committed: that, not a conflict with
        // it (nor this one's end), is the answer.
        if task.as_deref().is_some_and(|t| state.task_committed(t)) {
            self.abort(session, tx);
            return Ok(Commit::AlreadyCommitted);
        }
        let Some(t) = self.open.get_mut(&tx).filter(|t| t.session == session) else { return Err(not_open(tx)) };
        t.seen = now;
        let begin = t.begin;
        let outcome = self.prepare(state, tx, begin, task, changes);
        self.end(tx);
        outcome
    }

    fn prepare(
        &mut self,
        state: &MetaState,
        tx: u64,
        begin: u64,
        task: Option<String>,
        (files, ns): (Vec<TxFile>, Vec<TxNs>),
    ) -> Result<Commit> {
        if let Some(t) = &task {
            crate::check_task(t)?;
            if state.task_committed(t) {
                return Ok(Commit::AlreadyCommitted);
            }
        }
        if files.len() + ns.len() > self.max_files {
            return Err(Error::invalid(format!(
                "transaction {tx}: writes or changes the entries of more than {} files (the coordinator's \
                 --tx-max-files)",
                self.max_files
            )));
        }
        for f in &files {
            if self.file_then(state, begin, f.inode).is_none() {
                return Err(Error::invalid(format!("inode {}: not a file transaction {tx} sees", f.inode)));
            }
            let t = self.open.get_mut(&tx).expect("heard from above");
            let entry = t.writes.entry(f.inode).or_insert_with(|| (format!("inode {}", f.inode), BTreeSet::new()));
            entry.1.extend(f.chunks.iter().map(|(i, _)| *i));
        }
        self.check(state, tx)?;
        self.check_entries(state, tx, begin, &ns)?;
        if files.is_empty() && ns.is_empty() && task.is_none() {
            return Ok(Commit::Nothing);
        }
        Ok(Commit::Run(MetaOp::Transact { task, files, ns }))
    }

    /// Fails if a commit changed an entry that the steps `ns` of
    /// transaction `tx` (begun at `begin`) change, since it began.
    fn check_entries(&self, state: &MetaState, tx: u64, begin: u64, ns: &[TxNs]) -> Result<()> {
        if !self.check_writes {
            return Ok(());
        }
        let then = |id: InodeId| self.image(begin, id);
        match super::entries::first_changed(state, ns, &then)? {
            None => Ok(()),
            Some((comps, why)) => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{}: {why} by a transaction that committed after transaction {tx} began; it is aborted \
                     (first committer wins)",
                    crate::path::display(&comps)
                ),
            )),
        }
    }

    /// Fails if a commit changed what transaction `tx` writes since it began.
    fn check(&self, state: &MetaState, tx: u64) -> Result<()> {
        if !self.check_writes {
            return Ok(());
        }
        let t = &self.open[&tx];
        for (inode, (path, chunks)) in &t.writes {
            let then = self.file_then(state, t.begin, *inode);
            let now = state.image(*inode).file();
            if let Some(why) = changed(then.as_ref(), now.as_ref(), chunks) {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{path}: {why} by a transaction that committed after transaction {tx} began; \
                         it is aborted (first committer wins)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The file `inode` as a transaction that began at `begin` sees it.
    fn file_then(&self, state: &MetaState, begin: u64, inode: InodeId) -> Option<FileShape> {
        match self.image(begin, inode) {
            Some(img) => img.file(),
            None => state.image(inode).file(),
        }
    }

    /// Transaction `tx` of `session`, open and heard from now; if a commit
    /// changed what it writes, it fails (and ends).
    fn heard(&mut self, state: &MetaState, session: u64, tx: u64, now: Duration) -> Result<&Tx> {
        let Some(t) = self.open.get_mut(&tx).filter(|t| t.session == session) else { return Err(not_open(tx)) };
        t.seen = now;
        if let Err(e) = self.check(state, tx) {
            self.end(tx);
            return Err(e);
        }
        Ok(&self.open[&tx])
    }

    fn end(&mut self, tx: u64) {
        if self.open.remove(&tx).is_none() {
            return;
        }
        match self.open.values().map(|t| t.begin).min() {
            None => self.past.clear(),
            Some(oldest) => {
                self.past.retain(|_, images| {
                    images.retain(|(s, _)| *s > oldest);
                    !images.is_empty()
                });
            }
        }
    }
}

/// Why a file a transaction writes is not as it saw it: `then` as its view
/// has it, `now` live.
fn changed(then: Option<&FileShape>, now: Option<&FileShape>, chunks: &BTreeSet<u64>) -> Option<String> {
    let (Some(then), Some(now)) = (then, now) else { return Some("the file was removed or replaced".into()) };
    if then.size != now.size {
        return Some(format!("its size changed from {} to {} bytes", then.size, now.size));
    }
    let i = chunks.iter().find(|i| then.chunks.get(**i as usize) != now.chunks.get(**i as usize))?;
    Some(format!("chunk {i} was rewritten"))
}

/// The error of a request naming a transaction that is not open.
pub fn not_open(tx: u64) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "transaction {tx} is not open: it ended, was abandoned for longer than the hold period, or the \
             coordinator restarted; nothing of it is visible"
        ),
    )
}
