//! The coordinator's shell: the engine behind a lock, the log, the clock,
//! and one handler per request.
//!
//! Lock order: `inner`, then `stats`, then `pools`; none is held across an
//! await. Invariant: records enter the log in lsn order because they are
//! queued while `inner` is held, right after the op was applied; an op's
//! effects are carried out only once its record is durable.

use crate::feed::Feed;
use crate::log::LogWriter;
use crate::records::{encode_record, LogRecord};
use crate::sweep::Swept;
use crate::CoordinatorConfig;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tierpool_meta::engine::transactions::Changes;
use tierpool_meta::engine::transactions::Commit;
use tierpool_meta::engine::{Effect, Engine, Sweep};
use tierpool_meta::{Garbage, MetaOp, MetaReply, MetaState, Owner};
use tierpool_net::{Credentials, Handler, Pool, PoolConfig};
use tierpool_proto::{
    AttachedDir, ChangesAnswer, CoordRequest, CoordResponse, Layout, WorkerStats, MAX_BATCH, MAX_CHANGES_WAIT_MS,
    MAX_PAGES_ASKED,
};
use tierpool_proto::{Payload, Worker};
use tierpool_types::{ByteSize, ChunkKey, Error, ErrorKind, InodeId, Result, WorkerId};

tokio::task_local! {
    /// Set while a request that asked to be answered once written runs.
    static WRITTEN: ();
}

/// The request running asked to be answered once written.
fn answered_written() -> bool {
    WRITTEN.try_with(|_| ()).is_ok()
}

/// A batch of more than [`MAX_BATCH`] ops or paths is refused whole.
fn check_batch(n: usize) -> Result<()> {
    if n > MAX_BATCH {
        return Err(Error::invalid(format!("a batch of {n} items is more than the {MAX_BATCH} one request may carry")));
    }
    Ok(())
}

/// An op applied to the state, its record queued to the log.
struct Applied {
    reply: MetaReply,
    effects: Vec<Effect>,
    lsn: u64,
}

pub(crate) struct Inner {
    pub(crate) engine: Engine,
    pub(crate) lsn: u64,
    since_snapshot: u64,
    /// The lsn of the last op that may have changed the partition table:
    /// the version workers order tables by (at start, the recovered lsn).
    table_version: u64,
    /// What the latest ops changed, for clients that keep copies.
    pub(crate) feed: Feed,
}

pub struct Coordinator {
    pub(crate) cfg: CoordinatorConfig,
    pub(crate) me: Weak<Coordinator>,
    started: Instant,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) log: LogWriter,
    /// Each worker's last reported figures.
    pub(crate) stats: Mutex<HashMap<WorkerId, WorkerStats>>,
    pools: Mutex<HashMap<WorkerId, Arc<Pool<Worker>>>>,
    /// What the coordinator proves itself with to workers: the pool's secret.
    pub(crate) credentials: Credentials,
    /// Orphans deleted since this coordinator started.
    pub(crate) swept: Mutex<Swept>,
    /// Garbage not yet marked reclaimable on the workers, and the signal
    /// that wakes the task marking it (see `effects::mark_reclaimable`).
    pub(crate) reclaims: Mutex<Garbage>,
    pub(crate) reclaim_wake: tokio::sync::Notify,
    /// Wakes the task moving partitions (see `migrate::drive`).
    pub(crate) migrate_wake: tokio::sync::Notify,
    /// Effects waiting for the changes they rest on to be fsynced, in lsn
    /// order (see `carry_out`).
    deferred: Mutex<VecDeque<(u64, Vec<Effect>)>>,
    /// Wakes the `Changes` requests waiting for a change.
    feed_wake: tokio::sync::Notify,
    /// `Changes` requests waiting now.
    pub(crate) followers: std::sync::atomic::AtomicU64,
    /// Writes the region pages of committed transactions (see `pages`).
    pub(crate) pages: crate::pages::PageWriter,
    /// The boot id of this machine's kernel (see `CoordResponse::LogSynced`).
    pub(crate) machine: String,
    /// Whether this run answered a change before its fsync (see `written`).
    pub(crate) answered_unsynced: std::sync::atomic::AtomicBool,
}

/// Inode ids a recovered pool skips when its log was fsynced within a
/// period (see `skip_ids_a_crash_may_have_lost`): far more than a period
/// of at most 10 s can hand out.
const ID_GAP: u64 = 1 << 32;
/// Most files one `OwedFiles` answers with (small ones carry their bytes).
const MAX_OWED_FILES: u32 = 1024;
/// In `DIR/meta/`: the coordinator last ran answering changes before their
/// fsync (with a log fsynced within a period, or for `Written` requests).
pub(crate) const PERIODIC_MARKER: &str = "periodic-sync";

pub(crate) fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Coordinator {
    pub fn new(
        cfg: CoordinatorConfig,
        credentials: Credentials,
        state: MetaState,
        lsn: u64,
        log: LogWriter,
    ) -> Arc<Self> {
        let mut engine = Engine::new(state, cfg.engine());
        engine.set_check_writes(cfg.check_writes);
        engine.note_changes(true);
        // Named anew at each start: positions of an earlier run mean nothing.
        let feed = Feed::new(now_nanos() ^ (u64::from(std::process::id()) << 32), lsn + 1);
        Arc::new_cyclic(|me| Coordinator {
            cfg,
            me: me.clone(),
            started: Instant::now(),
            inner: Mutex::new(Inner { engine, lsn, since_snapshot: 0, table_version: lsn, feed }),
            log,
            stats: Mutex::new(HashMap::new()),
            pools: Mutex::new(HashMap::new()),
            credentials,
            swept: Mutex::new(Swept::default()),
            reclaims: Mutex::new(Garbage::default()),
            reclaim_wake: tokio::sync::Notify::new(),
            migrate_wake: tokio::sync::Notify::new(),
            deferred: Mutex::new(VecDeque::new()),
            feed_wake: tokio::sync::Notify::new(),
            followers: Default::default(),
            pages: Default::default(),
            machine: crate::written::machine(),
            answered_unsynced: Default::default(),
        })
    }

    /// Time since this coordinator started: the engine's clock.
    pub(crate) fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// Creates the pool on first start.
    pub async fn initialise(&self) -> Result<()> {
        let needed = !self.inner.lock().engine.state().is_initialised();
        let replicas = self.cfg.replicas.unwrap_or(crate::DEFAULT_REPLICAS);
        let spread = self.cfg.spread.unwrap_or_default();
        self.skip_ids_a_crash_may_have_lost(needed).await?;
        if needed {
            self.execute(MetaOp::Init { partitions: self.cfg.partitions }, Owner::default()).await?;
            if replicas != 1 || spread != tierpool_types::Spread::Host {
                self.execute(MetaOp::SetReplication { replicas, spread }, Owner::default()).await?;
            }
            tracing::info!(
                "created a new pool with {} partitions, keeping {replicas} copies of each chunk apart by {spread}",
                self.cfg.partitions
            );
            return Ok(());
        }
        let kept_spread = self.inner.lock().engine.state().spread();
        if let Some(s) = self.cfg.spread.filter(|s| *s != kept_spread) {
            return Err(Error::invalid(format!(
                "this pool spreads replicas by {kept_spread} (set when it was created): --spread {s} cannot change it"
            )));
        }
        let kept = self.inner.lock().engine.state().table().replicas();
        if let Some(r) = self.cfg.replicas.filter(|r| *r != kept) {
            return Err(Error::invalid(format!(
                "this pool keeps {kept} copies of each chunk (set when it was created): --replicas {r} cannot change it"
            )));
        }
        Ok(())
    }

    /// With a log fsynced within a period, or changes answered before
    /// their fsync (now, or the last time the coordinator ran:
    /// `meta/periodic-sync` says so), a crash of the machine may have taken
    /// back changes that handed out inode ids (directories and nodes made
    /// by name), which clients that outlived it may still use: the ids of a
    /// recovered pool start `ID_GAP` further on.
    async fn skip_ids_a_crash_may_have_lost(&self, new_pool: bool) -> Result<()> {
        let marker = self.cfg.dir.join("meta").join(PERIODIC_MARKER);
        let periodic = matches!(self.cfg.log_sync, crate::LogSync::Every(_));
        if !new_pool && (periodic || marker.exists()) {
            let applied =
                self.apply(&mut self.inner.lock(), MetaOp::AllocInodes { count: ID_GAP }, Owner::default())?;
            let lsn = applied.lsn;
            self.finish(applied).await?;
            self.log.sync_now(lsn).await?;
        }
        let io = |e: std::io::Error| Error::from(e).context(marker.display());
        match periodic {
            true if !marker.exists() => {
                std::fs::File::create(&marker).and_then(|f| f.sync_all()).map_err(io)?;
                std::fs::File::open(marker.parent().expect("in meta/")).and_then(|d| d.sync_all()).map_err(io)?;
            }
            false if marker.exists() => std::fs::remove_file(&marker).map_err(io)?,
            _ => {}
        }
        Ok(())
    }

    /// Applies `op` as `owner`, logs it, returns once the log record is
    /// durable, and then carries out its effects.
    pub async fn execute(&self, op: MetaOp, owner: Owner) -> Result<MetaReply> {
        let applied = self.apply(&mut self.inner.lock(), op, owner)?;
        self.finish(applied).await
    }

    /// [`execute`](Self::execute) of the op `make` builds from the engine
    /// under the same lock (nothing changes between the look and the op);
    /// `None` if it builds none.
    pub async fn execute_with(
        &self,
        make: impl FnOnce(&Engine) -> Option<MetaOp>,
        owner: Owner,
    ) -> Result<Option<MetaReply>> {
        let applied = {
            let mut g = self.inner.lock();
            let Some(op) = make(&g.engine) else { return Ok(None) };
            self.apply(&mut g, op, owner)?
        };
        self.finish(applied).await.map(Some)
    }

    /// Applies `op` under the lock and queues its log record (in lsn order,
    /// since the lock is held). Nothing may be acknowledged before `finish`.
    fn apply(&self, g: &mut Inner, op: MetaOp, owner: Owner) -> Result<Applied> {
        let time = now_nanos();
        let (mut reply, effects) = g.engine.execute(&op, owner, time, self.now())?;
        // A small file's bytes are not sent back to the writer that has them.
        if let (MetaOp::CommitInline { .. }, MetaReply::Info(info)) = (&op, &mut reply) {
            info.inline = None;
        }
        g.lsn += 1;
        let lsn = g.lsn;
        if effects.contains(&Effect::Placement) {
            g.table_version = lsn;
        }
        let changes = g.engine.take_changes();
        if !changes.is_empty() {
            g.feed.record(lsn, changes);
            self.feed_wake.notify_waiters();
        }
        let mut bytes = Vec::new();
        encode_record(&LogRecord { lsn, time, owner, op }, &mut bytes);
        match answered_written() {
            // Answered once written (`acked`): its fsync may come a little later.
            true => self.log.append_answered_written(bytes, lsn),
            false => self.log.append(bytes, lsn),
        }
        g.since_snapshot += 1;
        // Taken once the last one is written (each record asks again till then).
        if g.since_snapshot >= self.cfg.snapshot_every && self.log.snapshot(lsn, g.engine.state()) {
            g.since_snapshot = 0;
        }
        Ok(Applied { reply, effects, lsn })
    }

    /// Waits until what a request changed or saw up to `lsn` may be
    /// told: durable, or only written for a request that asked so
    /// (`CoordRequest::Written`).
    async fn acked(&self, lsn: u64) -> Result<()> {
        if answered_written() {
            self.log.wait_written(lsn).await
        } else {
            self.log.wait_durable(lsn).await
        }
    }

    /// Waits until an applied op is durable, then carries out its effects.
    async fn finish(&self, Applied { reply, effects, lsn }: Applied) -> Result<MetaReply> {
        self.acked(lsn).await?;
        self.carry_out(effects, lsn);
        Ok(reply)
    }

    /// The changes since `since` of feed `feed`, waiting up to `wait` for
    /// one when there is none yet.
    async fn changes(&self, feed: u64, since: Option<u64>, wait: Duration) -> ChangesAnswer {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Listening before looking: a change recorded in between wakes it.
            let woken = self.feed_wake.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            let a = self.inner.lock().feed.read(feed, since);
            if a.lost || !a.inodes.is_empty() || !a.entries.is_empty() || since.is_none() {
                return a;
            }
            let _waiting = Following::of(&self.followers);
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return a;
            }
        }
    }

    /// Runs a read-only query and waits until what it saw is durable.
    async fn query<T>(&self, f: impl FnOnce(&MetaState) -> Result<T>) -> Result<T> {
        let (r, lsn) = {
            let g = self.inner.lock();
            (f(g.engine.state()), g.lsn)
        };
        self.acked(lsn).await?;
        r
    }

    /// Judges part of a worker's inventory and retires the ids of the
    /// orphans found, in one step under the lock, so that no op can publish
    /// an id between its judgement and its retirement; returns once the
    /// retirement and the state judged are fsynced (only then may the
    /// orphans be deleted). `None` while the engine cannot judge yet.
    pub(crate) async fn judge_orphans(&self, keys: &[ChunkKey]) -> Result<Option<Sweep>> {
        let (sweep, applied, lsn) = {
            let mut g = self.inner.lock();
            let Some(sweep) = g.engine.sweep(keys, self.now()) else { return Ok(None) };
            let applied = if sweep.retire.is_empty() {
                None
            } else {
                Some(self.apply(&mut g, MetaOp::Retire { ids: sweep.retire.clone() }, Owner::default())?)
            };
            (sweep, applied, g.lsn)
        };
        if let Some(a) = applied {
            self.finish(a).await?;
        }
        self.log.wait_synced(lsn).await?;
        Ok(Some(sweep))
    }

    /// Lets time act: reports workers gone silent, starts due garbage collection.
    pub fn tick(&self) {
        let (effects, lsn) = {
            let mut g = self.inner.lock();
            (g.engine.tick(self.now()), g.lsn)
        };
        self.carry_out(effects, lsn);
    }

    /// Has the engine act on `f`'s result (a failure report and the like).
    pub(crate) fn with_engine<T>(&self, f: impl FnOnce(&mut Engine) -> T) -> T {
        f(&mut self.inner.lock().engine)
    }

    /// Applies `op` and logs it without waiting for its record to be
    /// durable (its effects wait, as ever): for `RegionPagesWritten`, which
    /// a crash may take back at no cost (the pages are written again,
    /// harmlessly: any later commit of them comes later in the log).
    pub(crate) fn execute_unawaited(&self, op: MetaOp) -> Result<()> {
        let Applied { effects, lsn, .. } = self.apply(&mut self.inner.lock(), op, Owner::default())?;
        self.carry_out(effects, lsn);
        Ok(())
    }

    /// Starts `effects` once the changes they rest on (up to `lsn`) are
    /// fsynced: they delete chunks and move partitions, which a change a
    /// crash of the machine could still take back must not do.
    fn carry_out(&self, effects: Vec<Effect>, lsn: u64) {
        if effects.is_empty() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        let mut deferred = self.deferred.lock();
        if deferred.is_empty() && self.log.synced() >= lsn {
            for e in effects {
                crate::effects::start(&me, e);
            }
            return;
        }
        // In lsn order, after those deferred before them.
        deferred.push_back((lsn, effects));
        if deferred.len() > 1 {
            return; // the task started for the first one takes these too
        }
        drop(deferred);
        tokio::spawn(async move {
            loop {
                let Some(lsn) = me.deferred.lock().front().map(|(lsn, _)| *lsn) else { return };
                // Within the log's own time: a removal answered once written
                // does not cost an fsync of its own for its collection.
                if me.log.wait_synced_later(lsn).await.is_err() {
                    return;
                }
                let mut deferred = me.deferred.lock();
                while deferred.front().is_some_and(|(l, _)| *l <= me.log.synced()) {
                    let (_, effects) = deferred.pop_front().expect("looked at");
                    for e in effects {
                        crate::effects::start(&me, e);
                    }
                }
                if deferred.is_empty() {
                    return;
                }
            }
        });
    }

    /// fsyncs of the metadata log so far (group commit makes this far fewer than changes).
    pub fn log_syncs(&self) -> u64 {
        self.log.syncs()
    }

    /// The last lsn logged, and the last one fsynced.
    pub fn log_lsns(&self) -> (u64, u64) {
        (self.inner.lock().lsn, self.log.synced())
    }

    /// A copy of the current state (for tests and diagnostics).
    pub fn state(&self) -> MetaState {
        self.inner.lock().engine.state().clone()
    }

    pub fn pending_chunks(&self) -> Vec<ChunkKey> {
        self.inner.lock().engine.state().pending_chunks().iter().copied().collect()
    }

    /// A connection pool to worker `id`, if it is registered.
    pub(crate) fn worker_pool(&self, id: WorkerId) -> Option<Arc<Pool<Worker>>> {
        let addr = self.inner.lock().engine.state().workers().get(&id)?.addr.clone();
        let mut pools = self.pools.lock();
        let pool = |addr: String| Arc::new(Pool::new(addr, PoolConfig::with(self.credentials.clone())));
        let p = pools.entry(id).or_insert_with(|| pool(addr.clone()));
        if p.addr() != addr {
            *p = pool(addr);
        }
        Some(p.clone())
    }

    /// The partition table, its version, and the lsn to wait for before
    /// anyone may see it.
    pub(crate) fn table(&self) -> (u64, tierpool_placement::PartitionTable, u64) {
        let g = self.inner.lock();
        (g.table_version, g.engine.state().table().clone(), g.lsn)
    }

    /// Waits until everything up to `lsn` is fsynced (see [`LogSync`](crate::log::LogSync)).
    pub(crate) async fn synced(&self, lsn: u64) -> Result<()> {
        self.log.wait_synced(lsn).await
    }

    /// The address worker `id` registered with.
    pub(crate) fn worker_addr(&self, id: WorkerId) -> Option<String> {
        Some(self.inner.lock().engine.state().workers().get(&id)?.addr.clone())
    }

    pub(crate) fn is_alive(&self, id: WorkerId) -> bool {
        let now = self.now();
        self.inner.lock().engine.is_alive(id, now)
    }

    /// The worker owning `key`'s partition now.
    pub(crate) fn owner_of(&self, key: ChunkKey) -> Option<WorkerId> {
        self.inner.lock().engine.state().table().locate(key)
    }

    /// The workers alive now.
    pub(crate) fn live_workers(&self) -> Vec<WorkerId> {
        let now = self.now();
        let g = self.inner.lock();
        g.engine.state().workers().keys().filter(|w| g.engine.is_alive(**w, now)).copied().collect()
    }

    pub(crate) fn count_orphans(&self, s: Swept) {
        let mut t = self.swept.lock();
        t.chunks += s.chunks;
        t.bytes += s.bytes;
    }

    /// Every registered worker.
    pub(crate) fn worker_ids(&self) -> Vec<WorkerId> {
        self.inner.lock().engine.state().workers().keys().copied().collect()
    }

    // ---- one handler per request ----

    async fn meta(&self, op: MetaOp, owner: Owner) -> Result<CoordResponse> {
        self.check_from_outside(&op)?;
        // Ids handed out for the caller to use (inode ids, a worker's id)
        // must never be handed out again, not even after a crash of the
        // machine takes the last changes back: they wait for the fsync.
        let hands_out_ids = matches!(op, MetaOp::AllocInodes { .. } | MetaOp::RegisterWorker { .. });
        let applied = self.apply(&mut self.inner.lock(), op, owner)?;
        let lsn = applied.lsn;
        let reply = self.finish(applied).await?;
        if hands_out_ids {
            self.log.sync_now(lsn).await?;
        }
        Ok(CoordResponse::Meta(reply))
    }

    /// `meta` of a namespace change, and the inodes `stat` as it left them
    /// (read under the same lock, so no other op comes between).
    async fn meta_stat(&self, op: MetaOp, owner: Owner, stat: Vec<InodeId>) -> Result<CoordResponse> {
        check_batch(stat.len())?;
        if matches!(op, MetaOp::AllocInodes { .. } | MetaOp::RegisterWorker { .. }) {
            return Err(Error::invalid("MetaStat is for changes of the namespace; ask for ids with Meta"));
        }
        self.check_from_outside(&op)?;
        let (applied, stats) = {
            let mut g = self.inner.lock();
            let applied = self.apply(&mut g, op, owner)?;
            let stats = stat.iter().map(|id| g.engine.state().stat_inode(*id, false)).collect();
            (applied, stats)
        };
        let reply = self.finish(applied).await?;
        Ok(CoordResponse::MetaStat { reply, stats })
    }

    /// Marks a region as being restored, unless another session has it open
    /// (its cache would keep serving the bytes being replaced).
    async fn restore_region(&self, session: u64, path: String, name: String, owner: Owner) -> Result<CoordResponse> {
        let now = self.now();
        let applied = {
            let mut g = self.inner.lock();
            let id = g.engine.state().stat(&path)?.id;
            match g.engine.used_elsewhere(session, id, now) {
                Some(false) => {}
                Some(true) => {
                    return Err(Error::new(
                        ErrorKind::Busy,
                        format!("{path}: the region is open in another client; close it there before restoring it"),
                    ))
                }
                // Clients retry this (it changes nothing), so they wait it out.
                None => {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!(
                            "{path}: the coordinator started moments ago and does not know yet which clients have \
                             the region open; try again"
                        ),
                    ))
                }
            }
            self.apply(&mut g, MetaOp::RegionRestore { path, name, done: false }, owner)?
        };
        Ok(CoordResponse::Meta(self.finish(applied).await?))
    }

    /// Commits a transaction: the engine checks it against what committed
    /// since it began and the op runs under the same lock, so no commit
    /// comes between the check and the op.
    async fn tx_commit(
        &self,
        session: u64,
        tx: u64,
        task: Option<String>,
        changes: Changes,
        owner: Owner,
    ) -> Result<CoordResponse> {
        let now = self.now();
        let pages = !changes.regions.is_empty();
        let (applied, already, lsn, mine) = {
            let mut g = self.inner.lock();
            match g.engine.tx_commit(session, tx, task, changes, now)? {
                Commit::Run(op) => {
                    let applied = self.apply(&mut g, op, owner)?;
                    // Its pages, if it has some, are the newest pending.
                    let mine = g.engine.state().pending_pages().last_key_value().map(|(id, _)| *id);
                    (Some(applied), false, 0, mine)
                }
                Commit::Nothing => (None, false, g.lsn, None),
                // The other attempt's commit may still be on its way to disk.
                Commit::AlreadyCommitted => (None, true, g.lsn, None),
            }
        };
        let ran = applied.is_some();
        match applied {
            Some(a) => drop(self.finish(a).await?),
            None => self.acked(lsn).await?,
        }
        if let Some(mine) = mine.filter(|_| ran && pages) {
            // Committed: its region pages go on the workers before it is
            // said so, unless they cannot be written soon (a worker down):
            // then they stay pending, and it is said committed all the same.
            if let Some(writer) = self.spawn_page_writer() {
                let _ = tokio::time::timeout(crate::pages::COMMIT_WAITS_FOR_PAGES, writer).await;
            }
            if self.inner.lock().engine.state().pending_pages().contains_key(&mine) {
                tracing::warn!(
                    "transaction {tx} committed; its region pages are not on the workers yet and stay pending"
                );
            }
        }
        Ok(CoordResponse::TxCommitted { already })
    }

    /// Each op checked and applied on its own, in order; one wait until the
    /// last one applied is durable answers them all.
    async fn meta_many(&self, ops: Vec<MetaOp>, owner: Owner) -> Result<CoordResponse> {
        check_batch(ops.len())?;
        let outcomes = ops
            .into_iter()
            .map(|op| self.check_from_outside(&op).and_then(|()| self.apply(&mut self.inner.lock(), op, owner)))
            .collect();
        Ok(CoordResponse::MetaMany(self.finish_many(outcomes).await?))
    }

    /// The replies of ops applied (or refused) in order, once the last one
    /// applied is durable (one wait for all), their effects carried out.
    async fn finish_many(&self, outcomes: Vec<Result<Applied>>) -> Result<Vec<Result<MetaReply>>> {
        if let Some(last) = outcomes.iter().filter_map(|a| a.as_ref().ok()).map(|a| a.lsn).max() {
            self.acked(last).await?;
        }
        let replies = outcomes.into_iter().map(|outcome| {
            outcome.map(|Applied { reply, effects, lsn }| {
                self.carry_out(effects, lsn);
                reply
            })
        });
        Ok(replies.collect())
    }

    /// `meta_many` with every op applied, and the inodes `stat` read, under
    /// one hold of the lock: no other op comes between.
    async fn meta_many_stat(&self, ops: Vec<MetaOp>, owner: Owner, stat: Vec<InodeId>) -> Result<CoordResponse> {
        check_batch(ops.len())?;
        check_batch(stat.len())?;
        if ops.iter().any(|op| matches!(op, MetaOp::AllocInodes { .. } | MetaOp::RegisterWorker { .. })) {
            return Err(Error::invalid("MetaManyStat is for changes of the namespace; ask for ids with Meta"));
        }
        // Checked before the lock is taken (some checks read the state under it).
        let checked: Vec<(Result<()>, MetaOp)> = ops.into_iter().map(|op| (self.check_from_outside(&op), op)).collect();
        let (outcomes, stats) = {
            let mut g = self.inner.lock();
            let outcomes: Vec<Result<Applied>> =
                checked.into_iter().map(|(check, op)| check.and_then(|()| self.apply(&mut g, op, owner))).collect();
            (outcomes, stat.iter().map(|id| g.engine.state().stat_inode(*id, false)).collect())
        };
        Ok(CoordResponse::MetaManyStat { replies: self.finish_many(outcomes).await?, stats })
    }

    /// Whether `len` bytes of `what` may be kept inline: the state takes
    /// any small file; the room for them is this coordinator's to give.
    fn inline_room(&self, what: &str, len: u64) -> Result<()> {
        let full = |why: String| Err(Error::new(ErrorKind::PoolFull, format!("{what}: {why}")));
        if len > self.cfg.inline_max {
            return full(format!(
                "{len} bytes are more than this coordinator keeps inline (--inline-max {})",
                self.cfg.inline_max
            ));
        }
        let (_, held) = self.inner.lock().engine.state().inline_usage();
        if held + len > self.cfg.inline_total {
            return full(format!(
                "the room for small files kept inline is full (--inline-total {})",
                self.cfg.inline_total
            ));
        }
        Ok(())
    }

    /// Refuses ops only the coordinator itself may run, removals that
    /// would lose data a worker still serves, and drains the other workers
    /// cannot hold.
    fn check_from_outside(&self, op: &MetaOp) -> Result<()> {
        let own = |name: &str| Err(Error::invalid(format!("{name} is run by the coordinator itself, not asked for")));
        match op {
            MetaOp::BeginMoves { .. } => own("BeginMoves"),
            MetaOp::FinishMoves { .. } => own("FinishMoves"),
            MetaOp::AbortMoves { .. } => own("AbortMoves"),
            // Of a known worker, `at_once` says it kept every chunk (a clean stop).
            MetaOp::RegisterWorker { at_once: true, id, .. }
                if !id.is_some_and(|id| self.inner.lock().engine.state().workers().contains_key(&id)) =>
            {
                own("a join that takes partitions at once")
            }
            MetaOp::SetSpeed { .. } => own("SetSpeed (the coordinator measures workers' bandwidth)"),
            MetaOp::CommitInline { path, data, .. } => self.inline_room(path, data.len() as u64),
            MetaOp::UpdateInline { inode, data, .. } => self.inline_room(&format!("inode {inode}"), data.len() as u64),
            MetaOp::SetReplication { .. } => own("SetReplication (a pool's --replicas is set when it is created)"),
            MetaOp::RegionRestore { done: false, .. } => {
                Err(Error::invalid("a region's restore starts with RestoreRegion, which checks who has it open"))
            }
            MetaOp::WorkerDown { .. } | MetaOp::WorkerUp { .. } => own("a worker's standing"),
            MetaOp::Transact { .. } => {
                Err(Error::invalid("a transaction commits with TxCommit, which checks it against what committed since"))
            }
            MetaOp::RegionPagesWritten { .. } => own("RegionPagesWritten (it writes committed pages itself)"),
            MetaOp::DrainWorker { id } => {
                let now = self.now();
                let g = self.inner.lock();
                let s = g.engine.state();
                let stats = self.stats.lock();
                let Some(drained) = stats.get(id) else { return Ok(()) };
                let others: Vec<&WorkerStats> = (s.workers().keys())
                    .filter(|w| *w != id && !s.draining().contains(w) && g.engine.is_alive(**w, now))
                    .filter_map(|w| stats.get(w))
                    .collect();
                drain_fits(*id, drained, &others)
            }
            MetaOp::RemoveWorker { id } => {
                let g = self.inner.lock();
                let owned = g.engine.state().table().shares().get(id).copied().unwrap_or(0);
                if owned > 0 && g.engine.is_alive(*id, self.now()) {
                    return Err(Error::invalid(format!(
                        "worker {id} is alive and owns {owned} partitions: drain it first (tierpool worker drain {}), \
                         or stop it if what only it holds may be lost",
                        id.0
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    async fn heartbeat(&self, id: WorkerId, stats: WorkerStats) -> Result<CoordResponse> {
        let now = self.now();
        let (known, effects) = {
            let mut g = self.inner.lock();
            let (known, effects) = g.engine.heartbeat(id, now);
            if let (true, Some((bytes, nanos))) = (known, stats.transfer) {
                g.engine.transfers(id, now, bytes, nanos);
            }
            (known, effects)
        };
        if known {
            self.stats.lock().insert(id, stats);
        }
        let lsn = self.inner.lock().lsn;
        self.carry_out(effects, lsn);
        let table = self.inner.lock().table_version;
        Ok(CoordResponse::HeartbeatAck { known, table })
    }

    fn hold(&self, session: u64, inodes: Vec<InodeId>) -> Result<CoordResponse> {
        self.inner.lock().engine.hold(session, inodes, self.now());
        Ok(CoordResponse::Done)
    }

    async fn layout(&self) -> Result<CoordResponse> {
        let (layout, lsn) = {
            let g = self.inner.lock();
            let s = g.engine.state();
            let layout = Layout {
                table: s.table().clone(),
                workers: s.workers().values().cloned().collect(),
                version: g.table_version,
                placed: s.placed(),
                inline_max: self.cfg.inline_max,
            };
            (layout, g.lsn)
        };
        // Workers drop the copies a table moves away from them: only a
        // table no crash can take back.
        self.log.sync_now(lsn).await?;
        Ok(CoordResponse::Layout(layout))
    }

    async fn read_dir(&self, id: InodeId) -> Result<CoordResponse> {
        let (parent, entries) = self.query(|s| Ok((s.parent_of(id)?, s.read_dir(id)?))).await?;
        Ok(CoordResponse::Names { parent, entries })
    }

    async fn dispatch(&self, req: CoordRequest) -> Result<CoordResponse> {
        match req {
            CoordRequest::Ping => Ok(CoordResponse::Pong),
            CoordRequest::Meta { op, owner } => self.meta(op, owner).await,
            CoordRequest::Written { req } => {
                let req: CoordRequest = tierpool_proto::decode(&req)?;
                if matches!(req, CoordRequest::Written { .. }) {
                    return Err(Error::invalid("a Written request carries another request, not a Written one"));
                }
                self.note_answers_before_fsync()?;
                WRITTEN.scope((), Box::pin(self.dispatch(req))).await
            }
            CoordRequest::SyncLog => {
                let lsn = self.inner.lock().lsn;
                self.log.sync_now(lsn).await?;
                Ok(CoordResponse::LogSynced { machine: self.machine.clone() })
            }
            CoordRequest::MetaMany { ops, owner } => self.meta_many(ops, owner).await,
            CoordRequest::MetaStat { op, owner, stat } => self.meta_stat(op, owner, stat).await,
            CoordRequest::MetaManyStat { ops, owner, stat } => self.meta_many_stat(ops, owner, stat).await,
            CoordRequest::StatMany { paths } => {
                check_batch(paths.len())?;
                let infos = self.query(|s| Ok(paths.iter().map(|p| s.stat(p)).collect())).await?;
                Ok(CoordResponse::Infos(infos))
            }
            CoordRequest::Stat { path } => Ok(CoordResponse::Info(self.query(|s| s.stat(&path)).await?)),
            CoordRequest::List { path } => Ok(CoordResponse::Entries(self.query(|s| s.list(&path)).await?)),
            CoordRequest::Layout => self.layout().await,
            CoordRequest::Status => {
                self.refresh_stats().await;
                Ok(CoordResponse::Status(self.status()))
            }
            CoordRequest::Usage { fresh, attachments } => self.usage(fresh, attachments).await,
            CoordRequest::Owed => Ok(self.owed()),
            CoordRequest::OwedFiles { path, after, limit } => {
                let limit = limit.clamp(1, MAX_OWED_FILES) as usize;
                let (files, more) = self.query(|s| s.owed_under(&path, after, limit)).await?;
                Ok(CoordResponse::OwedFiles { files, more })
            }
            CoordRequest::Ancestry { dir } => Ok(CoordResponse::Ancestry(self.query(|s| s.ancestry(dir)).await?)),
            CoordRequest::Heartbeat { id, stats } => self.heartbeat(id, stats).await,
            CoordRequest::Lookup { parent, name } => {
                Ok(CoordResponse::Info(self.query(|s| s.lookup_at(parent, &name)).await?))
            }
            CoordRequest::StatInode { id, chunks } => {
                Ok(CoordResponse::Info(self.query(|s| s.stat_inode(id, chunks)).await?))
            }
            CoordRequest::ReadDir { id } => self.read_dir(id).await,
            CoordRequest::StatInodes { ids } => {
                check_batch(ids.len())?;
                let infos = self.query(|s| Ok(ids.iter().map(|id| s.stat_inode(*id, false)).collect())).await?;
                Ok(CoordResponse::Infos(infos))
            }
            CoordRequest::Hold { session, inodes } => self.hold(session, inodes),
            CoordRequest::Lease { session, inodes } => {
                self.inner.lock().engine.lease(session, inodes, self.now());
                Ok(CoordResponse::Done)
            }
            CoordRequest::Fsck { path } => crate::replication::fsck(self, &path).await,
            CoordRequest::Snapshots { path } => {
                Ok(CoordResponse::Snapshots(self.query(|s| s.snapshots(path.as_deref())).await?))
            }
            CoordRequest::RestoreRegion { session, path, name, owner } => {
                self.restore_region(session, path, name, owner).await
            }
            CoordRequest::TxBegin { session } => {
                Ok(CoordResponse::TxBegun { tx: self.inner.lock().engine.tx_begin(session, self.now()) })
            }
            CoordRequest::TxStat { session, tx, path } => {
                let now = self.now();
                let (info, lsn) = {
                    let mut g = self.inner.lock();
                    (g.engine.tx_stat(session, tx, &path, now)?, g.lsn)
                };
                // What it read must be durable before anyone sees it.
                self.acked(lsn).await?;
                if info.kind == tierpool_meta::InodeKind::Region {
                    // Its workers must hold what commits before its begin wrote there.
                    self.wait_for_pages(tx, info.id, &path).await?;
                }
                Ok(CoordResponse::Info(info))
            }
            CoordRequest::TxPages { session, tx, inode, path, first, count, write } => {
                if count > MAX_PAGES_ASKED {
                    return Err(Error::invalid(format!(
                        "{count} pages asked at once; at most {MAX_PAGES_ASKED} are answered"
                    )));
                }
                let now = self.now();
                let mut g = self.inner.lock();
                // The range is checked (by the read) before any page is taken as written.
                let then = g.engine.tx_pages(session, tx, inode, (first, count), now)?;
                if write {
                    let pages: Vec<u64> = (first..first + count).collect();
                    g.engine.tx_write(session, tx, inode, &path, &pages, now)?;
                }
                Ok(CoordResponse::Pages(then))
            }
            CoordRequest::TxWrite { session, tx, inode, path, chunks } => {
                self.inner.lock().engine.tx_write(session, tx, inode, &path, &chunks, self.now())?;
                Ok(CoordResponse::Done)
            }
            CoordRequest::TxCommit { session, tx, task, files, ns, regions, before, owner } => {
                self.tx_commit(session, tx, task, Changes { files, ns, regions, before }, owner).await
            }
            CoordRequest::TxAbort { session, tx } => {
                self.inner.lock().engine.tx_abort(session, tx);
                Ok(CoordResponse::Done)
            }
            CoordRequest::Changes { feed, since, wait_ms } => Ok(CoordResponse::Changes(
                self.changes(feed, since, Duration::from_millis(wait_ms.min(MAX_CHANGES_WAIT_MS).into())).await,
            )),
            CoordRequest::TxRenew { session, txs } => {
                self.inner.lock().engine.tx_renew(session, &txs, self.now())?;
                Ok(CoordResponse::Done)
            }
            CoordRequest::Attachments => {
                let dirs = self.query(|s| Ok(s.attached_dirs())).await?;
                let dirs = dirs.into_iter().map(|(path, inode, attachment)| AttachedDir { path, inode, attachment });
                Ok(CoordResponse::Attachments(dirs.collect()))
            }
        }
    }
}

impl Handler for Coordinator {
    type Service = tierpool_proto::Coordinator;

    async fn handle(&self, req: CoordRequest, _payload: Bytes) -> (Result<CoordResponse>, Payload) {
        (self.dispatch(req).await, Payload::empty())
    }
}

/// Whether the live bytes of `drained` fit in what the `others` (alive, not
/// draining) have free, by their last reported figures.
fn drain_fits(id: WorkerId, drained: &WorkerStats, others: &[&WorkerStats]) -> Result<()> {
    let live = |t: &tierpool_types::TierStats| (t.mem_used + t.disk_used).saturating_sub(t.reclaimable_bytes);
    let need = live(&drained.tiers);
    let free: u64 =
        others.iter().map(|o| (o.tiers.mem_capacity + o.tiers.disk_capacity).saturating_sub(live(&o.tiers))).sum();
    if need > free {
        return Err(Error::new(
            ErrorKind::PoolFull,
            format!(
                "worker {id} holds {} that the other workers cannot take ({} free among them): \
                 add a worker or free space before draining it",
                ByteSize(need),
                ByteSize(free)
            ),
        ));
    }
    Ok(())
}

/// A `Changes` request counted among the followers while it waits.
struct Following<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> Following<'a> {
    fn of(n: &'a std::sync::atomic::AtomicU64) -> Following<'a> {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Following(n)
    }
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod drain_tests {
    use super::*;

    fn stats(cap: u64, used: u64, reclaimable: u64) -> WorkerStats {
        let mut w = WorkerStats::default();
        w.tiers.mem_capacity = cap / 2;
        w.tiers.disk_capacity = cap - cap / 2;
        w.tiers.disk_used = used;
        w.tiers.reclaimable_bytes = reclaimable;
        w
    }

    #[test]
    fn a_drain_needs_room_for_the_live_bytes_among_the_others() {
        let w = WorkerId(2);
        let (a, b) = (stats(100 << 20, 60 << 20, 0), stats(100 << 20, 90 << 20, 40 << 20));
        // 90 MiB free among the others (40 + 50, garbage counted free).
        assert!(drain_fits(w, &stats(100 << 20, 90 << 20, 0), &[&a, &b]).is_ok());
        assert!(drain_fits(w, &stats(100 << 20, 95 << 20, 10 << 20), &[&a, &b]).is_ok());
        let e = drain_fits(w, &stats(100 << 20, 91 << 20, 0), &[&a, &b]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PoolFull);
        assert_eq!(
            e.message,
            "worker w2 holds 91MiB that the other workers cannot take (90MiB free among them): \
             add a worker or free space before draining it"
        );
        assert!(drain_fits(w, &stats(1, 1, 0), &[]).is_err(), "no one to take it");
    }
}
