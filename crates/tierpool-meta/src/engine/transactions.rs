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
//! see are dropped when transactions end. Beneath an attached
//! under-store, ops that load chunks from below or write a file below from
//! exactly its chunks (`LoadChunks`, `Persisted`) file no image: a view
//! sees them as done, which gives the same bytes, and keeps what was
//! loaded. Letting go of the pool's copies (`Unload`) is filed, so a view
//! keeps reading them. A chunk moving below or from below with the same
//! object is no conflict (see `rewritten`). A view reads a chunk that is
//! below from the object its image records, by its tag (see the client):
//! once that object was replaced below, such a read is `Stale`.
//!
//! Pages of memory regions are not versioned: a commit's pages are
//! written over the region's chunks in place once it is durable (see
//! `state/transact.rs`). So each commit of pages brings what those pages
//! held before, as the committing transaction read them in its own view
//! (which is what they held just before the commit, since no commit
//! since its begin wrote them: it would have lost otherwise). While other
//! transactions are open, that image is kept in `page_past` under the
//! op's number, as inode images are in `past`: a view reads a page as the
//! first image kept after its begin, or as the workers hold it. The same
//! notes decide conflicts by page: a transaction loses if a commit wrote a
//! page it writes since it began. A restore of a region (its chunks
//! copied back in place) since a transaction began fails every use of the
//! region by that transaction. Writes to a region outside transactions
//! (its mapped memory, flushed in place) are not seen by any of this.
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
//!   images in increasing op order, each newer than some open begin;
//!   `page_past` and `restored` likewise, per region page and per region;
//! - a view reads every page of a region written only in transactions as
//!   it was after the last commit before its begin; a commit that writes a
//!   page a commit since its begin wrote fails.

use crate::state::{FileShape, Image};
use crate::{InodeInfo, MetaOp, MetaState, TxFile, TxNs, TxRegion};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tierpool_types::{ChunkRef, Error, ErrorKind, InodeId, Result};

/// Most files one transaction writes, unless configured otherwise.
pub const MAX_TX_FILES: usize = 1024;
/// Most region pages one transaction writes, unless configured otherwise
/// (16 MiB: they travel in the commit's log record).
pub const MAX_TX_PAGES: usize = 4096;

#[derive(Debug)]
pub struct Transactions {
    /// Ops executed since the engine started.
    seq: u64,
    next_id: u64,
    open: BTreeMap<u64, Tx>,
    /// Per inode: (number of the op that changed it, what it was before),
    /// each newer than the oldest open begin (what `end` relies on).
    past: BTreeMap<InodeId, Vec<(u64, Image)>>,
    /// Whether commits are checked for write-write conflicts (only a test
    /// of the history checker turns this off).
    check_writes: bool,
    hold: Duration,
    /// Most files one transaction writes.
    max_files: usize,
    /// Most region pages one transaction writes.
    max_pages: usize,
    /// Per region page: (number of an op that committed it, what it held
    /// before, if the committer said).
    page_past: BTreeMap<(InodeId, u64), Vec<PageImage>>,
    /// Per region: the number of the last op that began a restore of it.
    restored: BTreeMap<InodeId, u64>,
    /// What the pages of the commit about to run held before it, by page.
    committing: BTreeMap<(InodeId, u64), Bytes>,
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
    /// Regions it said it writes: their path (for errors) and pages.
    pages: BTreeMap<InodeId, (String, BTreeSet<u64>)>,
    /// The newest id of the region pages pending when it began: pages
    /// committed before it must be on the workers before it reads there.
    pending_upto: Option<u64>,
}

/// The number of an op that committed a region page, and what the page
/// held before it (if the committer said).
type PageImage = (u64, Option<Bytes>);

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
    pub fn new(hold: Duration, max_files: usize, max_pages: usize) -> Transactions {
        let (open, past) = (BTreeMap::new(), BTreeMap::new());
        Transactions {
            seq: 0,
            next_id: 1,
            open,
            past,
            check_writes: true,
            hold,
            max_files: max_files.max(1),
            max_pages: max_pages.max(1),
            page_past: BTreeMap::new(),
            restored: BTreeMap::new(),
            committing: BTreeMap::new(),
        }
    }

    /// Turns the write-write check off (a test proving the history checker
    /// notices lost updates) or on.
    pub fn set_check_writes(&mut self, on: bool) {
        self.check_writes = on;
    }

    /// An op failed: what the commit about to run brought is forgotten.
    pub fn op_failed(&mut self) {
        self.committing.clear();
    }

    /// An op ran: `changed` are the inodes it changed as they were before;
    /// `restoring` the region whose restore it began, if it did. Returns
    /// the inodes of `changed` that now have an image every open
    /// transaction sees, which later notes would add nothing to until
    /// another transaction begins.
    pub fn after_op(
        &mut self,
        op: &MetaOp,
        changed: BTreeMap<InodeId, Image>,
        restoring: Option<InodeId>,
    ) -> Vec<InodeId> {
        self.seq += 1;
        let mut before = std::mem::take(&mut self.committing);
        if self.open.is_empty() {
            return Vec::new();
        }
        if let Some(id) = restoring {
            self.restored.insert(id, self.seq);
        }
        if let MetaOp::Transact { regions, .. } = op {
            for r in regions {
                for (index, _) in &r.pages {
                    let image = before.remove(&(r.inode, *index));
                    self.page_past.entry((r.inode, *index)).or_default().push((self.seq, image));
                }
            }
        }
        if matches!(op, MetaOp::LoadChunks { .. } | MetaOp::Persisted { .. }) {
            // The bytes of the file do not change, only where they are (a
            // chunk loaded from below, the object below rewritten from
            // exactly these chunks): every view may see it as it is now,
            // and the pool then keeps for it what it loaded.
            return Vec::new();
        }
        // An inode noted since the newest transaction began is seen by
        // every open one as that note or an older one: later notes are
        // never looked at.
        let newest = self.open.values().map(|t| t.begin).max().unwrap_or(0);
        let mut enough = Vec::with_capacity(changed.len());
        for (id, image) in changed {
            let images = self.past.entry(id).or_default();
            if images.last().is_none_or(|(s, _)| *s <= newest) {
                images.push((self.seq, image));
            }
            enough.push(id);
        }
        enough
    }

    /// Opens a transaction for client `session`; the state must watch changes.
    pub fn begin(&mut self, state: &MetaState, session: u64, now: Duration) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let pending_upto = state.pending_pages().last_key_value().map(|(id, _)| *id);
        let (writes, pages) = (BTreeMap::new(), BTreeMap::new());
        let tx = Tx { session, begin: self.seq, began: now, seen: now, writes, pages, pending_upto };
        self.open.insert(id, tx);
        id
    }

    /// Whether region `inode` has pages that a commit before transaction
    /// `tx` began wrote and that are not on the workers yet: until they
    /// are, the transaction cannot read the region there. (Ids of pending
    /// pages may be reused once none is pending, which can only make this
    /// say yes for a while when no is right.)
    pub fn waits_for_pages(&self, state: &MetaState, tx: u64, inode: InodeId) -> bool {
        let Some(upto) = self.open.get(&tx).and_then(|t| t.pending_upto) else { return false };
        state.pending_pages().range(..=upto).any(|(_, rs)| rs.iter().any(|r| r.inode == inode))
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
        if let Some(name) = info.restoring.as_deref().filter(|_| info.kind == crate::InodeKind::Region) {
            return Err(restoring(path, name));
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
        if self.region_then(state, begin, inode).is_some() {
            return self.write_pages(state, tx, inode, path, chunks);
        }
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

    /// Transaction `tx` writes `pages` of the region `inode` (at `path`).
    fn write_pages(&mut self, state: &MetaState, tx: u64, inode: InodeId, path: &str, pages: &[u64]) -> Result<()> {
        let t = self.open.get_mut(&tx).expect("heard from above");
        let entry = t.pages.entry(inode).or_insert_with(|| (path.to_owned(), BTreeSet::new()));
        entry.1.extend(pages.iter().copied());
        let total: usize = t.pages.values().map(|(_, p)| p.len()).sum();
        if total > self.max_pages {
            self.end(tx);
            return Err(too_many_pages(tx, self.max_pages));
        }
        if let Err(e) = self.check(state, tx) {
            self.end(tx);
            return Err(e);
        }
        Ok(())
    }

    /// What pages `first..first + count` of the region `inode` held when
    /// transaction `tx` of `session` began, for those a commit wrote since
    /// (the others read as the workers hold them). `Conflict` if the region
    /// was restored since, or a page's earlier bytes are not known.
    #[allow(clippy::too_many_arguments)]
    pub fn pages_then(
        &mut self,
        state: &MetaState,
        session: u64,
        tx: u64,
        inode: InodeId,
        (first, count): (u64, u64),
        now: Duration,
    ) -> Result<Vec<(u64, Bytes)>> {
        let begin = self.heard(state, session, tx, now)?.begin;
        let Some(size) = self.region_then(state, begin, inode) else {
            return Err(Error::invalid(format!("inode {inode} is not a region transaction {tx} sees")));
        };
        let pages = size.div_ceil(crate::REGION_PAGE);
        if first >= pages || count > pages - first {
            return Err(Error::invalid(format!("inode {inode}: pages {first}+{count} are not all in the region")));
        }
        if self.restored.get(&inode).is_some_and(|s| *s > begin) {
            return Err(restored(tx, &format!("inode {inode}")));
        }
        if let Some((path, name)) = state.restoring_region(inode) {
            return Err(restoring(path, name));
        }
        let mut out = Vec::new();
        for (&(_, index), images) in self.page_past.range((inode, first)..(inode, first + count)) {
            match images.iter().find(|(s, _)| *s > begin) {
                None => {}
                Some((_, Some(bytes))) => out.push((index, bytes.clone())),
                Some((_, None)) => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "inode {inode}: page {index} was rewritten after transaction {tx} began, and what it \
                             held is not known; it is aborted"
                        ),
                    ))
                }
            }
        }
        Ok(out)
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
        changes: Changes,
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
        Changes { files, ns, regions, before }: Changes,
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
        for r in &regions {
            if self.region_then(state, begin, r.inode).is_none() {
                return Err(Error::invalid(format!("inode {}: not a region transaction {tx} sees", r.inode)));
            }
            let t = self.open.get_mut(&tx).expect("heard from above");
            let entry = t.pages.entry(r.inode).or_insert_with(|| (format!("inode {}", r.inode), BTreeSet::new()));
            entry.1.extend(r.pages.iter().map(|(i, _)| *i));
        }
        let t = &self.open[&tx];
        if t.pages.values().map(|(_, p)| p.len()).sum::<usize>() > self.max_pages {
            return Err(too_many_pages(tx, self.max_pages));
        }
        let before = check_before(tx, &regions, before)?;
        self.check(state, tx)?;
        self.check_entries(state, tx, begin, &ns)?;
        if files.is_empty() && ns.is_empty() && regions.is_empty() && task.is_none() {
            return Ok(Commit::Nothing);
        }
        self.committing = before;
        Ok(Commit::Run(MetaOp::Transact { task, files, ns, regions }))
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
        for (inode, (path, pages)) in &t.pages {
            if state.image(*inode).region_size().is_none() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{path}: the region was removed after transaction {tx} began; it is aborted"),
                ));
            }
            if self.restored.get(inode).is_some_and(|s| *s > t.begin) {
                return Err(restored(tx, path));
            }
            let rewritten = pages
                .iter()
                .find(|p| self.page_past.get(&(*inode, **p)).and_then(|v| v.last()).is_some_and(|(s, _)| *s > t.begin));
            if let Some(p) = rewritten {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{path}: page {p} was rewritten by a transaction that committed after transaction {tx} \
                         began; it is aborted (first committer wins)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The size of region `inode` as a transaction that began at `begin`
    /// sees it, if it sees a region there.
    fn region_then(&self, state: &MetaState, begin: u64, inode: InodeId) -> Option<u64> {
        match self.image(begin, inode) {
            Some(img) => img.region_size(),
            None => state.image(inode).region_size(),
        }
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
        let oldest = |open: &BTreeMap<u64, Tx>| open.values().map(|t| t.begin).min();
        let was = oldest(&self.open);
        if self.open.remove(&tx).is_none() {
            return;
        }
        let now = oldest(&self.open);
        if now == was {
            // Every image kept is newer than the oldest begin, which stays:
            // none can go (a pass over them all would find nothing).
            return;
        }
        match now {
            None => {
                self.past.clear();
                self.page_past.clear();
                self.restored.clear();
            }
            Some(oldest) => {
                self.past.retain(|_, images| {
                    images.retain(|(s, _)| *s > oldest);
                    !images.is_empty()
                });
                self.page_past.retain(|_, images| {
                    images.retain(|(s, _)| *s > oldest);
                    !images.is_empty()
                });
                self.restored.retain(|_, s| *s > oldest);
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
    let i = chunks.iter().find(|i| rewritten(then, now, **i as usize))?;
    Some(format!("chunk {i} was rewritten"))
}

/// Whether chunk `i` of a file may hold other bytes `now` than `then`.
/// Beneath an attachment, a chunk that is below holds the bytes of the
/// object the file's tag names. A chunk may go below (let go of) or come
/// from below (loaded) with the same bytes: then the file is clean on that
/// side and the object the same. Anything else written there makes the
/// file dirty until it is written below, which gives the object a new tag.
fn rewritten(then: &FileShape, now: &FileShape, i: usize) -> bool {
    let (was, is) = (then.chunks.get(i), now.chunks.get(i));
    let below = |r: Option<&ChunkRef>| r.is_some_and(|r| r.is_below());
    fn tag(f: &FileShape) -> Option<&str> {
        f.below.as_ref().map(|(etag, _)| etag.as_str())
    }
    let clean = |f: &FileShape| f.below.as_ref().is_some_and(|(_, dirty)| !dirty);
    match (below(was), below(is)) {
        (false, false) => was != is,
        (true, true) => tag(then) != tag(now),
        (false, true) => !(clean(then) && tag(then) == tag(now)),
        (true, false) => !(clean(now) && tag(then) == tag(now)),
    }
}

/// What a transaction commits: its writes of files, its namespace steps,
/// the region pages it wrote, and what those pages held in its view.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub files: Vec<TxFile>,
    pub ns: Vec<TxNs>,
    pub regions: Vec<TxRegion>,
    pub before: Vec<TxRegion>,
}

/// `before` must hold exactly the pages of `regions`, each as long: its
/// pages, by page.
fn check_before(tx: u64, regions: &[TxRegion], before: Vec<TxRegion>) -> Result<BTreeMap<(InodeId, u64), Bytes>> {
    let given: usize = before.iter().map(|r| r.pages.len()).sum();
    let by_page: BTreeMap<(InodeId, u64), Bytes> =
        before.into_iter().flat_map(|r| r.pages.into_iter().map(move |(p, b)| ((r.inode, p), b))).collect();
    let written = regions.iter().flat_map(|r| r.pages.iter().map(move |(p, b)| ((r.inode, *p), b.len())));
    let matches = given == by_page.len()
        && written.clone().count() == by_page.len()
        && written.into_iter().all(|(k, len)| by_page.get(&k).is_some_and(|b| b.len() == len));
    if !matches {
        return Err(Error::invalid(format!(
            "transaction {tx}: what its region pages held before must be given for exactly the pages it writes"
        )));
    }
    Ok(by_page)
}

fn too_many_pages(tx: u64, max: usize) -> Error {
    Error::invalid(format!("transaction {tx}: writes more than {max} region pages (the coordinator's --tx-max-pages)"))
}

/// A region's pages are not read in transactions while a restore of it is unfinished.
fn restoring(path: &str, name: &str) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!("{path}: its restore to checkpoint {name} has not finished; its pages are not read meanwhile"),
    )
}

fn restored(tx: u64, what: &str) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("{what}: the region was restored to a checkpoint after transaction {tx} began; it is aborted"),
    )
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
