//! Connection state shared by all calls of one client: the coordinator pool,
//! the cached layout, worker pools, and a batch of reserved inode ids.
//!
//! Every pool's connections prove the pool's secret, found once by
//! [`Client::connect`] (see [`ClientConfig::secret_file`]).
//!
//! Lock order: `layout`, then `workers`, then `ids`; none is held across an await.

use crate::batch::{Commits, Stats, COALESCED_MAX};
use crate::coalesce::Lane;
use crate::worker_lanes::WorkerLink;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_meta::{DirEntry, InodeInfo, MetaOp, MetaReply, Owner};
use tierpool_net::{ChunkBuffers, Connection, Credentials, Pool, PoolConfig, Secret};
use tierpool_proto::{
    CoordRequest, CoordResponse, Coordinator, Layout, OwedStatus, PoolStatus, PoolUsage, Worker, WorkerRequest,
};
use tierpool_types::{Error, ErrorKind, InodeId, Priority, Result, WorkerId, DEFAULT_CHUNK_SIZE};

/// How a client reaches its pool.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Coordinator address, `host:port`.
    pub coordinator: String,
    /// Chunks in flight per transfer.
    pub window: usize,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// `(uid, gid)` owning the files, directories and regions this client
    /// creates by path; by default the process's effective ids.
    pub owner: (u32, u32),
    /// The pool's secret, if the caller holds it already; it comes before
    /// `secret_file`.
    pub secret: Option<Secret>,
    /// The file holding the pool's secret. Unset (and no `secret`), the
    /// client uses the file `tierpool up` recorded for the coordinator's
    /// address in `~/.tierpool/pools/`, else `$TIERPOOL_SECRET_FILE`, else
    /// none (and the pool refuses it, saying so). See `tierpool_net::auth::find_secret`.
    pub secret_file: Option<PathBuf>,
    /// This client's host and rack, to read the nearest replica first
    /// (workers' `--host` and `--rack` labels); by default
    /// `$TIERPOOL_HOST` or the machine's hostname, and `$TIERPOOL_RACK`
    /// (empty: none).
    pub host: String,
    pub rack: String,
    /// Whether its metadata requests are answered once the coordinator has
    /// written them to its log (they survive the coordinator's process
    /// dying, not a crash of its machine) rather than fsynced: as a local
    /// file system keeps changes in memory until an `fsync`, which then
    /// calls [`Client::sync_log`]. For the mount; off by default.
    pub written: bool,
    /// Stats and new files' commits this client lets travel alone at once;
    /// calls made while that many are in flight go to the coordinator
    /// together, as one `StatMany` or `MetaMany`, when one comes back (see
    /// `coalesce.rs`). Small chunk reads and writes to each worker
    /// likewise, as one `GetChunks` or `PutChunks` (`worker_lanes.rs`).
    /// 0: every call alone. By default `$TIERPOOL_COALESCE`, else
    /// [`DEFAULT_COALESCE`].
    pub coalesce: usize,
}

/// Stats, new files' commits and small chunk reads and writes (to each
/// worker) in flight alone before calls are batched.
pub const DEFAULT_COALESCE: usize = 4;

/// `$TIERPOOL_COALESCE`, else [`DEFAULT_COALESCE`] (said so if it is not a number).
fn coalesce_from_env() -> usize {
    match std::env::var("TIERPOOL_COALESCE") {
        Err(_) => DEFAULT_COALESCE,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!("TIERPOOL_COALESCE={v:?} is not a number of requests; using {DEFAULT_COALESCE}");
            DEFAULT_COALESCE
        }),
    }
}

/// Calls of a client that shared a request with others, so far, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Coalesced {
    /// `stat`s (small gets among them) sent in a `StatMany`.
    pub stats: u64,
    /// New files' commits sent in a `MetaMany`.
    pub commits: u64,
    /// Files read from the workers many to a request (`get_many`'s
    /// `GetChunks`).
    pub reads: u64,
    /// Files whose chunk was stored on the workers many to a request
    /// (`put_many`'s `PutChunks`).
    pub writes: u64,
    /// Small chunk reads handed to a worker with others, in a `GetChunks`
    /// (see `ClientConfig::coalesce`; those it did not serve were then
    /// asked for alone).
    pub chunk_reads: u64,
    /// Small chunk writes handed to a worker with others, in a
    /// `PutChunks` (those it did not store were then sent alone).
    pub chunk_writes: u64,
}

/// This machine's hostname (empty if unknown).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

impl ClientConfig {
    pub fn new(coordinator: impl Into<String>) -> Self {
        ClientConfig {
            coordinator: coordinator.into(),
            window: 8,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(60),
            // SAFETY: plain getters without preconditions.
            owner: unsafe { (libc::geteuid(), libc::getegid()) },
            secret: None,
            secret_file: None,
            host: std::env::var("TIERPOOL_HOST").unwrap_or_else(|_| hostname()),
            rack: std::env::var("TIERPOOL_RACK").unwrap_or_default(),
            written: false,
            coalesce: coalesce_from_env(),
        }
    }

    /// What this client proves itself with (see `secret_file`).
    pub fn credentials(&self) -> Result<Credentials> {
        match &self.secret {
            Some(s) => Ok(s.clone().into()),
            None => tierpool_net::auth::find_secret(self.secret_file.as_deref(), &self.coordinator),
        }
    }

    /// Connections to one server: at most `max_open` at once (calls
    /// beyond wait their turn), `max_idle` of them kept between calls.
    fn pool_config(&self, credentials: &Credentials, max_open: usize, max_idle: usize) -> PoolConfig {
        PoolConfig {
            buffers: None,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            max_idle,
            max_open,
            credentials: credentials.clone(),
            local: tierpool_net::local::enabled(),
        }
    }
}

/// Connections to one worker, shared by every call to it.
pub(crate) type WorkerPool = Arc<Pool<Worker>>;

pub(crate) struct Inner {
    pub(crate) cfg: ClientConfig,
    credentials: Credentials,
    coord: Pool<Coordinator>,
    layout: Mutex<Option<Arc<Layout>>>,
    /// Each worker's connections, and the lanes its small chunk reads and
    /// writes share (`worker_lanes.rs`).
    workers: Mutex<HashMap<(WorkerId, String), WorkerLink>>,
    ids: Mutex<IdBatch>,
    /// This client's session at the coordinator (its holds).
    pub(crate) session: u64,
    pub(crate) leases: crate::lease::Leases,
    /// Workers a call failed to reach lately, and when: read from last.
    pub(crate) suspects: Mutex<HashMap<WorkerId, Instant>>,
    /// How each directory's new files are written (copies, placement), as last seen.
    pub(crate) dir_placing: crate::dir_placing::DirPlacing,
    /// Concurrent `stat`s, batched beyond `cfg.coalesce` in flight.
    stats: Arc<Lane<String, InodeInfo>>,
    /// Concurrent commits of new files, batched likewise.
    pub(crate) commits: Arc<Lane<MetaOp, MetaReply>>,
    /// Files read many to a request from the workers, so far.
    pub(crate) read_many: std::sync::atomic::AtomicU64,
    /// Files whose chunk was stored many to a request, so far.
    pub(crate) write_many: std::sync::atomic::AtomicU64,
    /// Where whole chunks read from workers arrive, and whole chunks
    /// written are copied, kept for the next ones: a fresh buffer costs a
    /// page fault per page.
    chunk_buffers: Arc<ChunkBuffers>,
}

/// A handle to a pool. Cheap to clone; clones share connections and caches.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

const ID_BATCH: u64 = 256;

/// Connections a client holds to each worker at most: its calls beyond
/// wait for one to come free (a batch of many small files would otherwise
/// open, and close again, one per call). Kept between calls as well, so a
/// steady load reuses them all. Calls to the coordinator are not held
/// back (lease renewals and change polls must not wait behind others;
/// the lanes of `coalesce.rs` bound the bulk of them), and 32 of its
/// connections are kept.
pub(crate) const WORKER_CONNECTIONS: usize = 64;
const COORD_IDLE: usize = 32;

/// Reserved inode ids not used yet (`next..end`), and when they were reserved.
struct IdBatch {
    next: u64,
    end: u64,
    reserved: Instant,
}

/// How long a batch of reserved ids is used. The coordinator never takes
/// the chunks of an id reserved less than its hold period ago (4 s at
/// least) for orphans; a writer's lease reaches it with the next renewal
/// (within [`crate::lease::RENEW`], 2 s). A batch used for at most 1 s
/// keeps every new writer covered until its lease arrives, whenever its
/// batch was reserved.
const ID_FRESH_FOR: Duration = Duration::from_secs(1);

/// How long calls wait for a coordinator that cannot be reached (one
/// restarting replays its log) before they fail.
const COORDINATOR_PATIENCE: Duration = Duration::from_secs(20);
/// How long a chunk request follows a moving partition before giving up.
pub(crate) const MOVE_PATIENCE: Duration = Duration::from_secs(30);

impl Client {
    /// Finds the pool's secret, connects, and checks that the coordinator
    /// answers. A pool that refuses the secret (or its absence) is an
    /// `Unauthenticated` error naming the coordinator.
    pub async fn connect(cfg: ClientConfig) -> Result<Client> {
        let credentials = cfg.credentials()?;
        let coord = Pool::new(
            cfg.coordinator.clone(),
            cfg.pool_config(&credentials, tierpool_net::DEFAULT_MAX_OPEN, COORD_IDLE),
        );
        let coalesce = cfg.coalesce;
        // As many as one transfer has in flight.
        let chunk_buffers = ChunkBuffers::new(DEFAULT_CHUNK_SIZE as usize, cfg.window.max(1));
        let c = Client {
            inner: Arc::new(Inner {
                cfg,
                credentials,
                coord,
                layout: Mutex::new(None),
                workers: Mutex::new(HashMap::new()),
                ids: Mutex::new(IdBatch { next: 0, end: 0, reserved: Instant::now() }),
                session: crate::lease::new_session(),
                leases: Default::default(),
                suspects: Default::default(),
                dir_placing: Default::default(),
                stats: Arc::new(Lane::new(coalesce, COALESCED_MAX)),
                commits: Arc::new(Lane::new(coalesce, COALESCED_MAX)),
                read_many: Default::default(),
                write_many: Default::default(),
                chunk_buffers,
            }),
        };
        // Once: a coordinator that is not there is said at once.
        match c.inner.coord.call(&CoordRequest::Ping, &[], true).await.map(|r| r.0) {
            Ok(CoordResponse::Pong) => Ok(c),
            Ok(other) => Err(unexpected(other)),
            Err(e) if e.kind == ErrorKind::InvalidArgument && e.message.starts_with("this is a worker") => {
                Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("{} is a tierpool worker, not the coordinator", c.inner.cfg.coordinator),
                ))
            }
            Err(e) if e.kind == ErrorKind::Unavailable => Err(Error::new(
                ErrorKind::Unavailable,
                format!("cannot reach the coordinator at {}: {}", c.inner.cfg.coordinator, e.message),
            )),
            Err(e) => Err(e),
        }
    }

    /// Opens a connection of its own to the coordinator, pings it and closes
    /// it: what a new connection costs (its handshake included), measured
    /// by `tierpool bench --connections`.
    pub async fn ping_fresh(&self) -> Result<()> {
        let cfg = &self.inner.cfg;
        let fresh: Pool<Coordinator> =
            Pool::new(cfg.coordinator.clone(), cfg.pool_config(&self.inner.credentials, 1, 0));
        match fresh.call(&CoordRequest::Ping, &[], false).await?.0 {
            CoordResponse::Pong => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub fn coordinator_addr(&self) -> &str {
        &self.inner.cfg.coordinator
    }

    /// Asks the coordinator. A coordinator that cannot be reached (one
    /// restarting) is asked again for up to `COORDINATOR_PATIENCE` when
    /// that is safe: the request is idempotent, or it was never sent.
    pub(crate) async fn coord(&self, req: CoordRequest) -> Result<CoordResponse> {
        let idempotent = !matches!(
            req,
            CoordRequest::Meta { .. }
                | CoordRequest::MetaMany { .. }
                | CoordRequest::MetaStat { .. }
                | CoordRequest::MetaManyStat { .. }
                | CoordRequest::TxBegin { .. }
                | CoordRequest::TxCommit { .. }
        );
        let req = match req {
            CoordRequest::Written { .. } | CoordRequest::SyncLog => req,
            req if self.inner.cfg.written => CoordRequest::Written { req: tierpool_proto::encode(&req).into() },
            req => req,
        };
        let since = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            match self.inner.coord.call(&req, &[], idempotent).await {
                Err(e)
                    if (idempotent && e.kind == ErrorKind::Unavailable || Connection::never_sent(&e))
                        && since.elapsed() + pause < COORDINATOR_PATIENCE =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                r => return Ok(r?.0),
            }
        }
    }

    /// Returns once every change the coordinator acknowledged so far is
    /// fsynced to its log (what a client with `written` set calls for an
    /// `fsync`), with the boot id of the coordinator's machine: changes
    /// answered once written under another boot may be lost.
    pub async fn sync_log(&self) -> Result<String> {
        match self.coord(CoordRequest::SyncLog).await? {
            CoordResponse::LogSynced { machine } => Ok(machine),
            other => Err(unexpected(other)),
        }
    }

    /// Who the inodes this client creates belong to (`cfg.owner`).
    pub(crate) fn owner(&self) -> Owner {
        let (uid, gid) = self.inner.cfg.owner;
        Owner { uid, gid }
    }

    /// Runs a metadata op as this client's owner (`cfg.owner`).
    pub(crate) async fn meta(&self, op: MetaOp) -> Result<MetaReply> {
        let (uid, gid) = self.inner.cfg.owner;
        self.meta_as(op, Owner { uid, gid }).await
    }

    /// Runs a metadata op as `owner`: the inodes it creates are theirs.
    pub(crate) async fn meta_as(&self, op: MetaOp, owner: Owner) -> Result<MetaReply> {
        match self.coord(CoordRequest::Meta { op, owner }).await? {
            CoordResponse::Meta(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// The inode at `path`, with a file's chunk list (and inline bytes).
    pub async fn stat(&self, path: &str) -> Result<InodeInfo> {
        self.inner.stats.call(path.to_string(), Stats(self.clone())).await
    }

    /// The runtime this client was connected on: what outlives a call (a
    /// renewal loop, chunks fetched ahead, a region's tasks) runs there,
    /// whichever runtime the call that started it ran on (a thread may
    /// run calls on a runtime of its own, which runs only while it waits).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        self.inner.commits.runtime()
    }

    /// Calls of this client that were sent in a request with others
    /// (`ClientConfig::coalesce`, `get_many`, `put_many`), so far.
    pub fn coalesced(&self) -> Coalesced {
        let (chunk_reads, chunk_writes) = (self.inner.workers.lock().values())
            .map(WorkerLink::shared)
            .fold((0, 0), |(r, w), (lr, lw)| (r + lr, w + lw));
        Coalesced {
            stats: self.inner.stats.shared(),
            commits: self.inner.commits.shared(),
            reads: self.inner.read_many.load(std::sync::atomic::Ordering::Relaxed),
            writes: self.inner.write_many.load(std::sync::atomic::Ordering::Relaxed),
            chunk_reads,
            chunk_writes,
        }
    }

    /// A new file's commit (`MetaOp::CommitInline`, `CommitFile`) as this
    /// client's owner; concurrent ones share requests.
    pub(crate) async fn commit(&self, op: MetaOp) -> Result<MetaReply> {
        self.inner.commits.call(op, Commits(self.clone())).await
    }

    /// Entries of a directory, or the file itself.
    pub async fn list(&self, path: &str) -> Result<Vec<DirEntry>> {
        match self.coord(CoordRequest::List { path: path.into() }).await? {
            CoordResponse::Entries(e) => Ok(e),
            other => Err(unexpected(other)),
        }
    }

    /// Makes a directory (beneath an attachment that writes through, below first).
    pub async fn mkdir(&self, path: &str, parents: bool) -> Result<()> {
        if let Some((store, key)) = self.through_key(path).await? {
            store.mkdir(&key).await.map_err(|e| e.context(path))?;
        }
        self.meta(MetaOp::Mkdir { path: path.into(), parents, mode: 0o755 }).await.map(|_| ())
    }

    /// Removes a file or directory; returns how many inodes went away.
    /// Beneath an attachment that writes through, the object (or tree)
    /// below goes first.
    pub async fn remove(&self, path: &str, recursive: bool) -> Result<u64> {
        let below = self.through_key(path).await?;
        let (mut tree, mut empty_dir) = (false, false);
        if let Some((store, key)) = &below {
            let info = self.stat(path).await?;
            tree = info.kind == tierpool_meta::InodeKind::Dir;
            // Without `recursive` only an empty directory goes.
            empty_dir = tree && !recursive;
            if empty_dir && info.size > 0 {
                return Err(Error::new(ErrorKind::DirectoryNotEmpty, format!("{path}: directory not empty")));
            }
            crate::under::delete_below(store, key, recursive).await.map_err(|e| e.context(path))?;
        }
        let removed = match self.meta(MetaOp::Remove { path: path.into(), recursive }).await? {
            MetaReply::Removed { inodes, .. } => inodes,
            other => return Err(unexpected_meta(other)),
        };
        // An empty directory's removal has nothing a write-back could have put back.
        if let (Some((store, key)), false) = (&below, empty_dir) {
            crate::under::delete_after_removal(store, key, tree, self.stat(path).await.map(|_| ())).await;
        }
        Ok(removed)
    }

    /// Atomic rename; replaces a file (or empty directory) at `to`.
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let all = self.attachments().await?;
        let (at_from, at_to) = (crate::under::through_key_in(&all, from)?, crate::under::through_key_in(&all, to)?);
        if let (Some((store, key)), Some((_, to_key))) = (at_from, at_to) {
            // Only within one attachment (the pool refuses other moves).
            let inode = |p| crate::under::attached_in(&all, p).map(|a| a.map(|(a, _)| a.inode));
            if inode(from)? == inode(to)? && from != to {
                let info = self.stat(from).await?;
                match store.rename(&key, &to_key).await {
                    Ok(()) => {}
                    // A file written in the pool and not below yet: its key follows the rename.
                    Err(e) if e.kind == ErrorKind::NotFound && info.origin.as_ref().is_some_and(|o| o.dirty) => {}
                    Err(e) => return Err(e.context(from)),
                }
            }
        }
        self.meta(MetaOp::Rename { from: from.into(), to: to.into() }).await.map(|_| ())
    }

    /// Sets priority and/or pinning of a file or of every file under a directory.
    pub async fn set_attrs(&self, path: &str, priority: Option<Priority>, pinned: Option<bool>) -> Result<u64> {
        match self.meta(MetaOp::SetAttrs { path: path.into(), priority, pinned }).await? {
            MetaReply::Attrs { changed } => Ok(changed.len() as u64),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Sets the permission bits and/or the modification time (nanoseconds
    /// since the epoch) of one file or directory; returns what `stat` shows after.
    pub async fn set_meta(&self, path: &str, mode: Option<u32>, mtime: Option<u64>) -> Result<InodeInfo> {
        match self.meta(MetaOp::SetMeta { path: path.into(), mode, mtime }).await? {
            MetaReply::Info(i) => Ok(i),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Starts emptying worker `id`: its partitions move to the others, a
    /// few at a time, while it serves them; it takes none.
    pub async fn drain_worker(&self, id: WorkerId) -> Result<()> {
        self.meta(MetaOp::DrainWorker { id }).await.map(|_| ())
    }

    /// Removes worker `id` from the pool (one that is dead, or drained): its
    /// partitions go to the others at once. Returns the partitions it
    /// owned and the paths of the files and regions that had chunks only on
    /// it (lost).
    pub async fn remove_worker(&self, id: WorkerId) -> Result<(Vec<u32>, Vec<String>)> {
        match self.meta(MetaOp::RemoveWorker { id }).await? {
            MetaReply::WorkerRemoved { partitions, lost } => Ok((partitions, lost)),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Sets the pool moving partitions toward the share each worker's
    /// weight asks for (capacity, times measured bandwidth for a slow one).
    pub async fn rebalance(&self) -> Result<()> {
        self.meta(MetaOp::Rebalance).await.map(|_| ())
    }

    /// Everything the pool reports of itself; some figures walk the whole
    /// namespace, under the coordinator's lock: for people, not for loops.
    pub async fn status(&self) -> Result<PoolStatus> {
        match self.coord(CoordRequest::Status).await? {
            CoordResponse::Status(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// The workers' capacity and use and the inode count, with the
    /// attached under-stores' figures if `attachments`; with `fresh`, the
    /// workers' figures as of now rather than of their last heartbeat
    /// (see `CoordRequest::Usage`). For what asks every few seconds.
    pub async fn usage(&self, fresh: bool, attachments: bool) -> Result<PoolUsage> {
        match self.coord(CoordRequest::Usage { fresh, attachments }).await? {
            CoordResponse::Usage(u) => Ok(u),
            other => Err(unexpected(other)),
        }
    }

    /// Every attached under-store with what its files owe it (a walk of
    /// those files only, where [`usage`](Self::usage) walks every file attached).
    pub async fn owed(&self) -> Result<Vec<OwedStatus>> {
        match self.coord(CoordRequest::Owed).await? {
            CoordResponse::Owed(o) => Ok(o),
            other => Err(unexpected(other)),
        }
    }

    /// The files at `path` or beneath it with changes not below their
    /// under-store, each with a path naming it, sorted by path: found among
    /// the files that owe, a page at a time, not by a walk of every file.
    pub async fn owed_files(&self, path: &str) -> Result<Vec<(String, InodeInfo)>> {
        let (mut out, mut after) = (Vec::new(), None);
        loop {
            let req = CoordRequest::OwedFiles { path: path.to_string(), after, limit: 1024 };
            match self.coord(req).await? {
                CoordResponse::OwedFiles { files, more } => {
                    after = files.last().map(|(_, i)| i.id);
                    out.extend(files);
                    if !more || after.is_none() {
                        break;
                    }
                }
                other => return Err(unexpected(other)),
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The cached layout, fetched on first use.
    pub async fn layout(&self) -> Result<Arc<Layout>> {
        if let Some(l) = self.inner.layout.lock().clone() {
            return Ok(l);
        }
        self.refresh_layout().await
    }

    pub async fn refresh_layout(&self) -> Result<Arc<Layout>> {
        match self.coord(CoordRequest::Layout).await? {
            CoordResponse::Layout(l) => {
                let l = Arc::new(l);
                *self.inner.layout.lock() = Some(l.clone());
                Ok(l)
            }
            other => Err(unexpected(other)),
        }
    }

    /// The buffers this client keeps for whole chunks read and written.
    pub fn chunk_buffers(&self) -> tierpool_types::BufferStats {
        self.inner.chunk_buffers.stats()
    }

    /// `bytes` copied into one of the buffers this client keeps for whole
    /// chunks (given back once the last copy of the result goes); `None`
    /// unless they are one.
    pub(crate) fn kept_chunk(&self, bytes: &[u8]) -> Option<Bytes> {
        self.inner.chunk_buffers.copy(bytes)
    }

    pub(crate) fn worker_pool(&self, id: WorkerId, addr: &str) -> WorkerPool {
        self.worker_link(id, addr).pool
    }

    pub(crate) fn worker_link(&self, id: WorkerId, addr: &str) -> WorkerLink {
        let mut w = self.inner.workers.lock();
        w.entry((id, addr.to_string()))
            .or_insert_with(|| {
                let cfg = self.inner.cfg.pool_config(&self.inner.credentials, WORKER_CONNECTIONS, WORKER_CONNECTIONS);
                let cfg = PoolConfig { buffers: Some(self.inner.chunk_buffers.clone()), ..cfg };
                let pool = Arc::new(Pool::new(addr.to_string(), cfg));
                WorkerLink::new(pool, self.runtime(), self.inner.cfg.coalesce)
            })
            .clone()
    }

    /// A fresh inode id, from a batch reserved at the coordinator.
    pub(crate) async fn alloc_inode(&self) -> Result<InodeId> {
        {
            let mut ids = self.inner.ids.lock();
            if ids.next < ids.end && ids.reserved.elapsed() < ID_FRESH_FOR {
                ids.next += 1;
                return Ok(InodeId(ids.next - 1));
            }
        }
        let asked = Instant::now();
        match self.meta(MetaOp::AllocInodes { count: ID_BATCH }).await? {
            MetaReply::Inodes { first, count } => {
                let mut ids = self.inner.ids.lock();
                *ids = IdBatch { next: first.0 + 1, end: first.0 + count, reserved: asked };
                Ok(first)
            }
            other => Err(unexpected_meta(other)),
        }
    }

    /// Deletes every chunk of `inode` from every worker, best effort
    /// (used to clean up after a failed write).
    pub(crate) async fn discard_inode(&self, inode: InodeId) {
        let Ok(layout) = self.layout().await else { return };
        let req = WorkerRequest::DeleteInodes { inodes: vec![inode] };
        for w in &layout.workers {
            let _ = self.worker_pool(w.id, &w.addr).call(&req, &[], true).await;
        }
    }
}

pub(crate) fn unexpected(r: impl std::fmt::Debug) -> Error {
    Error::new(ErrorKind::Protocol, format!("unexpected response {r:?}"))
}

pub(crate) fn unexpected_meta(r: MetaReply) -> Error {
    Error::new(ErrorKind::Protocol, format!("unexpected metadata reply {r:?}"))
}
