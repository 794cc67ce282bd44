//! Transactions over files, under snapshot isolation (the rules are the
//! coordinator's, see `tierpool_meta::engine::transactions`).
//!
//! A [`Transaction`] reads files as the pool was when it began: each file
//! it touches is looked up in that view once, and its chunks are read at
//! the versions the view names (they are kept for as long as it is open).
//! Its writes stay in this client, a chunk at a time, until it commits:
//! the chunks it changed are stored as fresh versions no one reads, then
//! one `TxCommit` publishes all of them, in every file, or none. Before
//! the first write of a chunk the coordinator hears of it, so a
//! transaction that already lost to a commit learns of it there, before
//! doing more work; at commit, the first committer wins.
//!
//! It may also make directories and files, remove and move entries
//! (`namespace`): those steps are kept in order and run at commit, after
//! the writes, in the same op. And it reads and writes pages of memory
//! regions (`region`), committed in the same op too.
//!
//! Files beneath an attached under-store take part too. A chunk that is
//! below in the view is read from the object the view names, by its tag
//! (`Stale` once that object was replaced below). After the commit, each
//! file written or made there is written below, or kept for the
//! write-back, as its write mode says (as a close would): the store
//! cannot take part in the commit itself.
//!
//! A transaction is renewed at the coordinator every [`RENEW`] while it
//! lives; dropping it without a commit aborts it.

mod namespace;
mod region;

use crate::batch::IN_FLIGHT;
use crate::client::{unexpected, Client};
use crate::lease::{WriteLease, RENEW};
use crate::placing::Placing;
use crate::under::attached_in;
use bytes::Bytes;
use futures::StreamExt;
use namespace::{shown, Found};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tierpool_meta::overlay::{trace, Traced};
use tierpool_meta::{normalize, InodeInfo, InodeKind, TxFile, TxNs};
use tierpool_net::{Background, Connection, Step};
use tierpool_proto::{CoordRequest, CoordResponse};
use tierpool_types::{ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Result};

/// How a commit went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    /// This transaction's writes are visible to all.
    Now,
    /// Another transaction of the same task id committed before: this
    /// one's writes were dropped.
    Already,
}

/// One open transaction (see the module's documentation).
pub struct Transaction {
    client: Client,
    id: u64,
    /// Files touched, by inode (paths naming one file share its state).
    files: BTreeMap<InodeId, TxFileState>,
    /// The file each path of the view touched names.
    paths: BTreeMap<String, InodeId>,
    /// Its changes of the namespace, in order.
    steps: Vec<TxNs>,
    /// Regions touched, by inode, and the region each path of the view names.
    regions: BTreeMap<InodeId, region::TxRegionState>,
    region_paths: BTreeMap<String, InodeId>,
    open: bool,
    /// Set when a renewal hears that the coordinator no longer has it
    /// open (abandoned, or the coordinator restarted): what its view names
    /// may be gone, so it reads no more.
    lost: Arc<AtomicBool>,
    _renewal: Background,
}

/// A file as this transaction sees it.
struct TxFileState {
    /// The path it was first reached by (named in its errors).
    path: String,
    /// As the view has it.
    view: InodeInfo,
    /// Its size with this transaction's writes.
    size: u64,
    /// Chunks this transaction changed: their whole share of the file.
    pages: BTreeMap<u64, Vec<u8>>,
    /// The smallest size it was cut to, if it was.
    cut: Option<u64>,
    /// Of a file this transaction made: the lease on its reserved id.
    made: Option<WriteLease>,
}

impl TxFileState {
    fn changed(&self) -> bool {
        !self.pages.is_empty() || self.size != self.view.size || self.cut.is_some()
    }
}

impl Client {
    /// Begins a transaction reading the pool as it is now.
    pub async fn begin(&self) -> Result<Transaction> {
        let session = self.inner.session;
        let id = match self.coord(CoordRequest::TxBegin { session }).await? {
            CoordResponse::TxBegun { tx } => tx,
            other => return Err(unexpected(other)),
        };
        let (c, lost) = (self.clone(), Arc::new(AtomicBool::new(false)));
        let flag = lost.clone();
        let renewal = Background::every_on(self.runtime(), "transaction", RENEW, move || {
            let (c, flag) = (c.clone(), flag.clone());
            async move {
                match c.coord(CoordRequest::TxRenew { session, txs: vec![id] }).await {
                    Err(e) if e.kind == ErrorKind::Conflict => {
                        flag.store(true, Ordering::Release);
                        Ok(Step::Stop)
                    }
                    r => r.map(|_| Step::Continue),
                }
            }
        });
        Ok(Transaction {
            client: self.clone(),
            id,
            files: BTreeMap::new(),
            paths: BTreeMap::new(),
            steps: Vec::new(),
            regions: BTreeMap::new(),
            region_paths: BTreeMap::new(),
            open: true,
            lost,
            _renewal: renewal,
        })
    }
}

impl Transaction {
    /// The transaction's id at the coordinator.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether it is still open (not committed, aborted, or lost a conflict).
    pub fn is_open(&self) -> bool {
        self.open && !self.lost.load(Ordering::Acquire)
    }

    fn ensure_open(&self) -> Result<()> {
        if !self.open {
            return Err(Error::new(ErrorKind::Conflict, format!("transaction {} has ended", self.id)));
        }
        if self.lost.load(Ordering::Acquire) {
            return Err(lost(self.id));
        }
        Ok(())
    }

    fn session(&self) -> u64 {
        self.client.inner.session
    }

    /// The file at `path` as this transaction sees it (a file of the view
    /// is looked up once); with `make`, a free path becomes a new file.
    async fn file(&mut self, path: &str, make: bool) -> Result<InodeId> {
        self.ensure_open()?;
        let comps = normalize(path)?;
        if let Traced::Before(q) = trace(&self.steps, &comps)? {
            if let Some(id) = self.paths.get(&shown(&q)) {
                return Ok(*id);
            }
        }
        let view = match self.find(&comps).await? {
            Found::NewFile(id) => return Ok(id),
            Found::Missing(ErrorKind::NotFound) if make => return self.create(&comps).await,
            Found::Missing(kind) => {
                return Err(Error::new(kind, format!("{}: no such file in this transaction", shown(&comps))))
            }
            Found::NewDir => {
                return Err(Error::new(ErrorKind::IsADirectory, format!("{}: is a directory", shown(&comps))))
            }
            Found::Viewed(i) => *i,
        };
        let key = shown(&comps);
        if view.kind == InodeKind::Region {
            return Err(Error::invalid(format!("{key}: is a region: read and write its pages as a region's")));
        }
        if view.kind != InodeKind::File {
            let what = if view.kind == InodeKind::Dir { ErrorKind::IsADirectory } else { ErrorKind::InvalidArgument };
            return Err(Error::new(what, format!("{key}: transactions read and write files and regions only")));
        }
        let id = view.id;
        let size = view.size;
        self.files.entry(id).or_insert_with(|| TxFileState {
            path: key,
            view,
            size,
            pages: BTreeMap::new(),
            cut: None,
            made: None,
        });
        if let Traced::Before(q) = trace(&self.steps, &comps)? {
            self.paths.insert(shown(&q), id);
        }
        Ok(id)
    }

    /// A request of this transaction; one that fails with a conflict ends it.
    async fn call(&mut self, req: CoordRequest) -> Result<CoordResponse> {
        let r = self.client.coord(req).await;
        if matches!(&r, Err(e) if e.kind == ErrorKind::Conflict) {
            self.open = false;
        }
        r
    }

    /// The size of the file at `path`, as this transaction sees it.
    pub async fn size(&mut self, path: &str) -> Result<u64> {
        let id = self.file(path, false).await?;
        Ok(self.files[&id].size)
    }

    /// Up to `len` bytes of the file at `path` from `offset`, as this
    /// transaction sees them (its own writes included).
    pub async fn read(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let id = self.file(path, false).await?;
        let f = &self.files[&id];
        let end = offset.saturating_add(len).min(f.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let cs = f.view.chunk_size;
        let mut out = Vec::with_capacity((end - offset) as usize);
        for i in offset / cs..=(end - 1) / cs {
            let chunk = match f.pages.get(&i) {
                Some(p) => p.clone(),
                None => base(&self.client, f, i).await?,
            };
            let from = (offset.max(i * cs) - i * cs) as usize;
            let to = ((end - i * cs) as usize).min(cs as usize);
            out.extend_from_slice(&chunk[from.min(chunk.len())..to.min(chunk.len())]);
            // What lies past a chunk's stored bytes, within the file, is zeros.
            out.resize(out.len() + to.saturating_sub(chunk.len().max(from)), 0);
        }
        // Abandoned meanwhile: what it read may not be its snapshot's.
        self.ensure_open()?;
        Ok(out)
    }

    /// The whole file at `path`, as this transaction sees it.
    pub async fn read_all(&mut self, path: &str) -> Result<Vec<u8>> {
        self.read(path, 0, u64::MAX).await
    }

    /// Writes `data` at `offset` of the file at `path`, growing it if it
    /// ends past its end; a free path (in a directory) becomes a new file.
    pub async fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset.checked_add(data.len() as u64).ok_or_else(|| Error::invalid("write past 2^64 bytes"))?;
        let id = self.file(path, true).await?;
        if data.is_empty() {
            return Ok(());
        }
        let cs = self.files[&id].view.chunk_size;
        let chunks = offset / cs..=(end - 1) / cs;
        let new: Vec<u64> = chunks.clone().filter(|i| !self.files[&id].pages.contains_key(i)).collect();
        self.claim(id, &new).await?;
        // Everything read before anything changes, so a failed read leaves no half write.
        let mut bases = BTreeMap::new();
        let size = self.files[&id].size.max(end);
        for i in &new {
            // A chunk this write covers whole needs nothing of what it held.
            let whole = offset <= i * cs && end >= ((i + 1) * cs).min(size);
            let held = if whole { Vec::new() } else { base(&self.client, &self.files[&id], *i).await? };
            bases.insert(*i, held);
        }
        let f = self.files.get_mut(&id).expect("looked up above");
        f.pages.extend(bases);
        f.size = f.size.max(end);
        for i in chunks {
            let page = f.pages.get_mut(&i).expect("every chunk written has a page");
            page.resize(((f.size - i * cs).min(cs) as usize).max(page.len()), 0);
            let (from, to) = (offset.max(i * cs), end.min((i + 1) * cs));
            let src = &data[(from - offset) as usize..(to - offset) as usize];
            page[(from - i * cs) as usize..(to - i * cs) as usize].copy_from_slice(src);
        }
        // Pages this write left short of their share are now inside the file.
        for (i, page) in f.pages.iter_mut() {
            page.resize((f.size.saturating_sub(i * cs)).min(cs) as usize, 0);
        }
        Ok(())
    }

    /// Appends `data` to the file at `path` (a new file if the path is free).
    pub async fn append(&mut self, path: &str, data: &[u8]) -> Result<()> {
        let id = self.file(path, true).await?;
        let size = self.files[&id].size;
        self.write(path, size, data).await
    }

    /// Cuts or extends the file at `path` to `size` bytes.
    pub async fn truncate(&mut self, path: &str, size: u64) -> Result<()> {
        let id = self.file(path, false).await?;
        let f = &self.files[&id];
        let cs = f.view.chunk_size;
        if size >= f.size {
            self.files.get_mut(&id).expect("looked up above").size = size;
            return Ok(());
        }
        // A cut through a chunk rewrites it.
        let through = (!size.is_multiple_of(cs)).then_some(size / cs).filter(|i| !f.pages.contains_key(i));
        self.claim(id, &through.into_iter().collect::<Vec<_>>()).await?;
        let page = match through {
            Some(i) => Some((i, base(&self.client, &self.files[&id], i).await?)),
            None => None,
        };
        let f = self.files.get_mut(&id).expect("looked up above");
        f.pages.extend(page);
        f.pages.retain(|i, _| i * cs < size);
        for (i, page) in f.pages.iter_mut() {
            page.resize(((size - i * cs).min(cs)) as usize, 0);
        }
        f.size = size;
        f.cut = Some(f.cut.map_or(size, |c| c.min(size)));
        Ok(())
    }

    /// Tells the coordinator that this transaction writes chunks `chunks`
    /// of file `id` (failing if a commit changed them already).
    async fn claim(&mut self, id: InodeId, chunks: &[u64]) -> Result<()> {
        if self.files[&id].made.is_some() {
            // No one else can write a file this transaction made.
            return Ok(());
        }
        let path = self.files[&id].path.clone();
        let req =
            CoordRequest::TxWrite { session: self.session(), tx: self.id, inode: id, path, chunks: chunks.to_vec() };
        match self.call(req).await? {
            CoordResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Commits: every write becomes visible at once, or none does
    /// (`Conflict` if a transaction that committed after this one began
    /// changed what it wrote). With `task`, of the transactions carrying
    /// the same task id only one commits; the others get
    /// [`Committed::Already`] and change nothing. An error other than the
    /// coordinator's answer (`Unavailable`: it could not be reached while
    /// the commit was on its way) leaves the outcome unknown: the chunks
    /// stored are then left for the orphan sweep, which deletes them only
    /// if the commit did not happen. Files written beneath an attached
    /// under-store are then written below as their write mode says: an
    /// error there says that the transaction committed.
    pub async fn commit(mut self, task: Option<&str>) -> Result<Committed> {
        self.ensure_open()?;
        let (mut stored, mut sent) = (Vec::new(), false);
        let r = self.store_and_commit(task, &mut stored, &mut sent).await;
        self.open = false;
        let answered = |e: &Error| {
            matches!(
                e.kind,
                ErrorKind::Conflict
                    | ErrorKind::InvalidArgument
                    | ErrorKind::Stale
                    | ErrorKind::NotFound
                    | ErrorKind::AlreadyExists
                    | ErrorKind::ReadOnly
                    | ErrorKind::IsADirectory
                    | ErrorKind::NotADirectory
                    | ErrorKind::DirectoryNotEmpty
                    | ErrorKind::Busy
            )
        };
        let published = match &r {
            Ok(Committed::Now) => true,
            Ok(Committed::Already) => false,
            Err(e) => sent && !answered(e),
        };
        if !published {
            self.client.discard_versions(stored).await;
        }
        if !sent {
            // The coordinator never heard of the commit: the transaction ends there now.
            let req = CoordRequest::TxAbort { session: self.session(), tx: self.id };
            let _ = self.client.coord(req).await;
        }
        match r {
            Ok(Committed::Now) => self.persist_below().await.map(|_| Committed::Now),
            r => r,
        }
    }

    async fn store_and_commit(
        &mut self,
        task: Option<&str>,
        stored: &mut Vec<ChunkKey>,
        sent: &mut bool,
    ) -> Result<Committed> {
        let mut leases: Vec<WriteLease> = Vec::new();
        let mut jobs = Vec::new();
        for f in self.files.values().filter(|f| f.changed() || f.made.is_some()) {
            leases.push(self.client.lease(f.view.id));
            for (i, page) in &f.pages {
                let version = self.client.fresh_version().await?;
                let data = Bytes::copy_from_slice(page);
                jobs.push((f.path.clone(), f.view.id, *i, version, data, f.view.attrs, Placing::of(&f.view)));
            }
        }
        // Every changed chunk stored at once, a window of them in flight.
        let client = &self.client;
        let results: Vec<(InodeId, u64, Result<ChunkRef>)> = futures::stream::iter(jobs)
            .map(|(path, inode, i, version, data, attrs, placing)| async move {
                let r = client.put_version(inode, i, version, data, attrs, placing).await;
                (inode, i, r.map_err(|e| e.context(&path)))
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut refs: BTreeMap<InodeId, Vec<(u64, ChunkRef)>> = BTreeMap::new();
        let mut failed = None;
        for (inode, i, r) in results {
            match r {
                Ok(r) => {
                    stored.push(r.key(inode, i));
                    refs.entry(inode).or_default().push((i, r));
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let ns = self.steps_to_commit(&mut refs);
        let mut files = Vec::new();
        for f in self.files.values().filter(|f| f.changed() && f.made.is_none()) {
            let mut chunks = refs.remove(&f.view.id).unwrap_or_default();
            chunks.sort_by_key(|(i, _)| *i);
            let truncate = f.cut.or((f.size < f.view.size).then_some(f.size));
            files.push(TxFile { inode: f.view.id, size: f.size, truncate, chunks });
        }
        let (regions, before) = self.regions_to_commit();
        let owner = self.client.owner();
        let (session, task) = (self.session(), task.map(str::to_owned));
        let req = CoordRequest::TxCommit { session, tx: self.id, task, files, ns, regions, before, owner };
        *sent = true;
        let r = self.client.coord(req).await;
        drop(leases);
        match r {
            Ok(CoordResponse::TxCommitted { already: false }) => Ok(Committed::Now),
            Ok(CoordResponse::TxCommitted { already: true }) => Ok(Committed::Already),
            Ok(other) => Err(unexpected(other)),
            // Not sent after all (the client knows it never left): nothing happened.
            Err(e) if Connection::never_sent(&e) => {
                *sent = false;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// After the commit: each file it wrote or made beneath an attached
    /// under-store is written below (or kept on its workers' disks for the
    /// write-back) as its write mode says, as a close would. The store
    /// takes no part in the commit, so a failure here leaves the commit
    /// done and the file in the pool with changes not below.
    async fn persist_below(&self) -> Result<()> {
        let mut written: Vec<&TxFileState> =
            self.files.values().filter(|f| f.changed() && f.view.origin.is_some()).collect();
        let made: Vec<&TxFileState> = self.files.values().filter(|f| f.made.is_some()).collect();
        if !made.is_empty() {
            match self.client.attachments().await {
                Ok(all) => {
                    written.extend(made.into_iter().filter(|f| matches!(attached_in(&all, &f.path), Ok(Some(_)))))
                }
                // Cannot be told: each is looked at (one without an under-store is left as it is).
                Err(_) => written.extend(made),
            }
        }
        let written: Vec<(String, InodeId)> = written.into_iter().map(|f| (f.path.clone(), f.view.id)).collect();
        let client = &self.client;
        let results: Vec<Result<()>> = futures::stream::iter(written)
            .map(|(path, id)| async move {
                let info = match client.stat_inode(id, true).await {
                    // Removed since (by this transaction, or after it): nothing to write.
                    Err(e) if e.kind == ErrorKind::NotFound => return Ok(()),
                    other => other.map_err(|e| e.context(&path))?,
                };
                client.persist(&path, info, false).await.map(|_| ())
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let failed: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        match failed.first() {
            None => Ok(()),
            Some(e) => Err(Error::new(
                e.kind,
                format!(
                    "transaction {} committed, but {} file(s) are not in their under-store yet (first: {}); \
                     `tierpool sync` writes them (do not run the transaction again)",
                    self.id,
                    failed.len(),
                    e.message
                ),
            )),
        }
    }

    /// Ends the transaction without committing: nothing of it was visible.
    pub async fn abort(mut self) -> Result<()> {
        if !std::mem::replace(&mut self.open, false) {
            return Ok(());
        }
        match self.client.coord(CoordRequest::TxAbort { session: self.session(), tx: self.id }).await? {
            CoordResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        // Best effort: the coordinator forgets it after its hold period anyway.
        let (client, session, tx) = (self.client.clone(), self.session(), self.id);
        client.runtime().clone().spawn(async move {
            let _ = client.coord(CoordRequest::TxAbort { session, tx }).await;
        });
    }
}

/// Chunk `i` of the file as its view has it, cut to the transaction's size.
async fn base(client: &Client, f: &TxFileState, i: u64) -> Result<Vec<u8>> {
    let cs = f.view.chunk_size;
    if i as usize >= f.view.chunks.len() || f.cut.is_some_and(|c| c <= i * cs) {
        return Ok(Vec::new());
    }
    let mut data = if f.view.chunks[i as usize].is_below() {
        // Below in its view: read from the object the view names, by its
        // tag (not loaded: the file may have changed since).
        let e = |e: Error| e.context(format!("{} as this transaction sees it", f.path));
        client.below_bytes(&f.view, i).await.map_err(e)?.to_vec()
    } else {
        client.read_chunk(&f.path, &f.view, i).await?.to_vec()
    };
    if let Some(c) = f.cut {
        data.truncate((c - i * cs).min(cs) as usize);
    }
    Ok(data)
}

/// The error of a transaction the coordinator no longer has open.
fn lost(tx: u64) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "transaction {tx} is not open at the coordinator any more (abandoned for longer than its hold period, \
             or the coordinator restarted): it is aborted"
        ),
    )
}
