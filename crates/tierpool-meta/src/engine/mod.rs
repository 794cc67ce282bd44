//! The coordinator's decisions, as pure code: the durable metadata state
//! plus what the coordinator knows only while it runs (which workers are
//! alive, which inodes clients hold open, when garbage is due, which
//! workers have the current eviction attributes).
//!
//! The shell (the coordinator process) reads the clock and passes `now`
//! (time since it started) in; the engine answers with the effects the
//! shell must carry out (pushes to workers, deletions) and is told how they
//! went. It does no I/O and reads no clock, so every rule here is tested
//! as plain code (`tests/engine/`).
//!
//! Rules that hold across restarts of the coordinator (whose volatile part
//! starts empty):
//! - every worker gets the complete eviction attributes of the pool when
//!   the engine first hears from it and again after any push to it failed,
//!   so a lost push is made good at the worker's next heartbeat;
//! - garbage waits a full grace period after the engine starts, while
//!   clients renew their holds (see [`gc`]).

mod entries;
pub mod gc;
pub mod leases;
pub mod liveness;
pub mod moves;
pub mod orphans;
pub mod speeds;
pub mod transactions;

use crate::{Garbage, MetaOp, MetaReply, MetaState, Owner, Timestamp};
use gc::{Batch, GcSchedule};
use leases::Leases;
use liveness::{Liveness, Standing};
use moves::{Move, Mover, Progress};
use orphans::{Reservations, Verdict};
use std::collections::BTreeSet;
use std::time::Duration;
use tierpool_types::{ChunkAttrs, ChunkKey, InodeId, Result, WorkerId};
use transactions::{Commit, Transactions};

/// Timing of the coordinator's policies.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// A worker without a sign of life for this long is reported dead.
    pub dead_after: Duration,
    /// Garbage waits this long, so readers that resolved an old file finish.
    pub gc_grace: Duration,
    /// A hold not renewed for this long lapses.
    pub hold_period: Duration,
    /// Most items deleted in one round.
    pub gc_batch: usize,
    /// Most partitions moving at once.
    pub max_moving: usize,
    /// Percent points a worker's measured bandwidth must be off the fastest
    /// worker's (and off the speed logged for it) before its share is
    /// weighed again; 0: shares by capacity only.
    pub speed_threshold: u8,
    /// How long a deviation must last, and the window bandwidth is measured over.
    pub speed_window: Duration,
    /// Most files one transaction may write.
    pub tx_max_files: usize,
    /// Most region pages one transaction may write.
    pub tx_max_pages: usize,
}

/// What the shell must do for the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send these attribute changes to each of `workers`; report a failure
    /// with [`Engine::push_failed`]. With `replace`, `changes` is the
    /// complete set of non-default attributes and every other inode goes
    /// back to the default.
    PushAttrs { workers: Vec<WorkerId>, changes: Vec<(InodeId, ChunkAttrs)>, replace: bool },
    /// Delete the batch's chunks from every registered worker, then log
    /// [`Engine::collected`]'s ops; report with [`Engine::batch_failed`] if
    /// any worker could not be reached.
    Collect(Batch),
    /// A worker's standing changed (to be logged and shown).
    Standing(Standing),
    /// Garbage just made that no hold protects: the workers may drop it
    /// whenever they need room (it is deleted for good by a later
    /// `Collect`). Best effort: a lost mark only delays the space. (Write
    /// leases do not protect garbage: a writer's inode is garbage only once
    /// committed and then removed or replaced.)
    Reclaim(Garbage),
    /// The partition table or its goal changed: give every worker the
    /// table (once the change is durable) and see whether partitions are
    /// to move ([`Engine::next_moves`]).
    Placement,
}

pub struct Engine {
    state: MetaState,
    cfg: EngineConfig,
    liveness: Liveness,
    /// Open files clients hold: their chunks outlive their names.
    leases: Leases,
    /// Inodes clients are writing: not orphans while leased.
    writers: Leases,
    gc: GcSchedule,
    /// Workers that have the complete attributes (since their last sync).
    synced: BTreeSet<WorkerId>,
    /// Ids reserved lately: their writers may not have renewed a hold yet.
    reservations: Reservations,
    mover: Mover,
    speeds: speeds::SpeedWatch,
    txs: Transactions,
}

/// The orphans found in part of a worker's inventory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Chunks to delete from the worker.
    pub orphans: Vec<ChunkKey>,
    /// Ids to retire (with `MetaOp::Retire`) before they are deleted.
    pub retire: Vec<u64>,
}

impl Engine {
    /// An engine over a recovered state; nothing volatile is known yet.
    pub fn new(mut state: MetaState, cfg: EngineConfig) -> Engine {
        // What replay queued was garbage long ago: collection will see to it
        // (its first tick takes everything pending).
        state.take_garbage();
        state.take_pended();
        let reservations = Reservations::new(cfg.hold_period, state.next_inode().0, Duration::ZERO);
        Engine {
            reservations,
            liveness: Liveness::new(cfg.dead_after),
            leases: Leases::new(cfg.hold_period),
            writers: Leases::new(cfg.hold_period),
            gc: GcSchedule::new(cfg.gc_grace, cfg.gc_batch),
            synced: BTreeSet::new(),
            mover: Mover::new(cfg.max_moving),
            speeds: speeds::SpeedWatch::new(cfg.speed_threshold, cfg.speed_window),
            txs: Transactions::new(cfg.hold_period, cfg.tx_max_files, cfg.tx_max_pages),
            state,
            cfg,
        }
    }

    pub fn state(&self) -> &MetaState {
        &self.state
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Executes `op` as `owner` at wall-clock time `wall`; on success the
    /// op must be logged (before its reply is sent) and the effects carried
    /// out. On error nothing changed.
    pub fn execute(
        &mut self,
        op: &MetaOp,
        owner: Owner,
        wall: Timestamp,
        now: Duration,
    ) -> Result<(MetaReply, Vec<Effect>)> {
        // A restore about to begin: transactions that began before it no
        // longer see the region's pages as they were.
        let restoring = match op {
            MetaOp::RegionRestore { path, done: false, .. } if self.txs.any_open() => {
                self.state.stat(path).ok().map(|i| i.id)
            }
            _ => None,
        };
        let reply = match self.state.execute_as(op, owner, wall) {
            Ok(r) => r,
            Err(e) => {
                self.state.take_before();
                self.state.take_changes();
                self.txs.op_failed();
                return Err(e);
            }
        };
        let enough = self.txs.after_op(op, self.state.take_before(), restoring);
        self.state.noted_enough(enough);
        let mut effects = Vec::new();
        if op.changes_placement() {
            effects.push(Effect::Placement);
            if let MetaOp::BeginMoves { moves } = op {
                let ps: Vec<u32> = moves.iter().map(|(p, _)| *p).collect();
                self.mover.started(&ps, now);
            }
        }
        let mut garbage = self.state.take_garbage();
        if !garbage.is_empty() {
            // A removed file held open keeps its chunks; a replaced version
            // does not (a reader that finds it gone reads the current one).
            garbage.inodes.retain(|i| !self.leases.holds(*i, now));
            // Open transactions may see it: it waits for collection.
            if !garbage.is_empty() && !self.txs.any_open() {
                effects.push(Effect::Reclaim(garbage));
            }
        }
        match &reply {
            MetaReply::Attrs { changed } if !changed.is_empty() => {
                let workers = self.live_synced(now);
                if !workers.is_empty() {
                    effects.push(Effect::PushAttrs { workers, changes: changed.clone(), replace: false });
                }
            }
            MetaReply::Worker { id } => effects.extend(self.signs_of_life(*id, now)),
            MetaReply::Inodes { first, count } => self.reservations.reserved(first.0, *count, now),
            _ => {}
        }
        Ok((reply, effects))
    }

    /// A heartbeat of worker `id`: `false` if the pool does not know it
    /// (it must register again).
    pub fn heartbeat(&mut self, id: WorkerId, now: Duration) -> (bool, Vec<Effect>) {
        if !self.state.workers().contains_key(&id) {
            return (false, Vec::new());
        }
        (true, self.signs_of_life(id, now))
    }

    fn signs_of_life(&mut self, id: WorkerId, now: Duration) -> Vec<Effect> {
        let mut effects: Vec<Effect> = self.liveness.seen(id, now).map(Effect::Standing).into_iter().collect();
        if self.synced.insert(id) {
            effects.push(Effect::PushAttrs { workers: vec![id], changes: self.state.data_attrs(), replace: true });
        }
        effects
    }

    /// A push of attributes to `worker` failed: it gets everything again at
    /// its next sign of life.
    pub fn push_failed(&mut self, worker: WorkerId) {
        self.synced.remove(&worker);
    }

    /// Client `session` holds exactly `inodes` open from `now`.
    pub fn hold(&mut self, session: u64, inodes: Vec<InodeId>, now: Duration) {
        self.leases.hold(session, inodes, now);
    }

    /// Client `session` is writing exactly `inodes` from `now`.
    pub fn lease(&mut self, session: u64, inodes: Vec<InodeId>, now: Duration) {
        self.writers.hold(session, inodes, now);
    }

    pub fn is_alive(&self, id: WorkerId, now: Duration) -> bool {
        self.liveness.is_alive(id, now)
    }

    /// The workers a change is pushed to: the live, synced ones. A synced
    /// worker that is not alive misses the change, so it is no longer
    /// synced (it gets everything at its next sign of life); pushes to
    /// unsynced workers would be superseded by that full sync anyway.
    fn live_synced(&mut self, now: Duration) -> Vec<WorkerId> {
        let (live, silent): (Vec<WorkerId>, Vec<WorkerId>) =
            self.synced.iter().copied().partition(|w| self.liveness.is_alive(*w, now));
        for w in silent {
            self.synced.remove(&w);
        }
        live
    }

    /// What time brings: workers reported dead, garbage due for deletion.
    pub fn tick(&mut self, now: Duration) -> Vec<Effect> {
        let mut effects: Vec<Effect> = self.liveness.changes(now).into_iter().map(Effect::Standing).collect();
        for s in &effects {
            if let Effect::Standing(Standing::Down(id)) = s {
                // A dead worker may restart empty-handed: sync it when it is back.
                self.synced.remove(id);
            }
        }
        self.txs.expire(now);
        self.state.watch(self.txs.any_open());
        let held = self.leases.held(now);
        let keep = self.txs.oldest();
        let news = self.state.take_pended();
        if let Some(b) = self.gc.due(news, self.state.pending_gc(), self.state.pending_chunks(), &held, keep, now) {
            effects.push(Effect::Collect(b));
        }
        effects
    }

    /// Batch `batch` was deleted from every worker: the ops that record it,
    /// to execute and log like any other. The batch is over.
    pub fn collected(&mut self, batch: &Batch) -> Vec<MetaOp> {
        self.gc.finished(batch.id);
        let mut ops = Vec::new();
        if !batch.inodes.is_empty() {
            ops.push(MetaOp::GcDone { inodes: batch.inodes.clone() });
        }
        if !batch.keys.is_empty() {
            ops.push(MetaOp::GcChunksDone { keys: batch.keys.clone() });
        }
        ops
    }

    /// Batch `batch` could not be deleted everywhere: its items are due again.
    pub fn batch_failed(&mut self, batch: &Batch) {
        self.gc.finished(batch.id);
    }

    /// Judges chunks a worker stores (see [`orphans`]): which are orphans,
    /// and which ids to retire before deleting them. `None` during the
    /// first hold period after the engine started: clients have not
    /// renewed their holds yet, so nothing can be judged. The caller must
    /// log the `Retire` before it deletes anything, with no other op
    /// executed in between.
    pub fn sweep(&mut self, keys: &[ChunkKey], now: Duration) -> Option<Sweep> {
        if now < self.cfg.hold_period {
            return None;
        }
        let mut held = self.leases.held(now);
        held.extend(self.writers.held(now));
        let reservations = &mut self.reservations;
        let mut recent = |id: u64| reservations.is_recent(id, now);
        let mut sweep = Sweep::default();
        let mut retire = BTreeSet::new();
        for k in keys {
            if let Verdict::Orphan { retire: r } = orphans::judge(&self.state, &held, &mut recent, *k) {
                sweep.orphans.push(*k);
                retire.extend(r);
            }
        }
        sweep.retire = retire.into_iter().collect();
        Some(sweep)
    }

    /// Whether a client session other than `session` has `inode` open or
    /// is writing it at `now`: `None` during the first hold period after
    /// the engine started, when clients may not have renewed their holds.
    pub fn used_elsewhere(&mut self, session: u64, inode: InodeId, now: Duration) -> Option<bool> {
        if now < self.cfg.hold_period {
            return None;
        }
        Some(self.leases.held_elsewhere(session, inode, now) || self.writers.held_elsewhere(session, inode, now))
    }

    /// Client sessions holding open files or writing now.
    pub fn held_sessions(&mut self, now: Duration) -> usize {
        self.leases.held(now);
        self.writers.held(now);
        self.leases.sessions() + self.writers.sessions()
    }

    /// The moves to start now (see [`moves`]): log `BeginMoves` of them all.
    pub fn next_moves(&mut self, now: Duration) -> Vec<Move> {
        let liveness = &self.liveness;
        self.mover.next(&self.state, |w| liveness.is_alive(w, now), now)
    }

    /// The copy of move `m` is complete (`bytes` copied): log `FinishMoves`.
    pub fn move_copied(&mut self, m: &Move, bytes: u64) {
        self.mover.copied(m, bytes);
    }

    /// The partitions of move `m` that are still moving to `m.to`: those
    /// its `FinishMoves` may name (the others were given up meanwhile, by
    /// a drain or a removal, and may be moving elsewhere now). Build the
    /// op and apply it under one lock.
    pub fn finishable(&self, m: &Move) -> Vec<u32> {
        let moving = self.state.table().moving();
        m.partitions.iter().copied().filter(|p| moving.get(p) == Some(&m.to)).collect()
    }

    /// The copy of move `m` failed: log `AbortMoves`.
    pub fn move_failed(&mut self, m: &Move, now: Duration) {
        self.mover.failed(m, now);
    }

    /// Moves a coordinator that stopped left under way: log `AbortMoves`.
    pub fn interrupted_moves(&self) -> Vec<u32> {
        self.mover.interrupted(&self.state)
    }

    /// Worker `id`'s transfer counters (from its heartbeat).
    pub fn transfers(&mut self, id: WorkerId, now: Duration, bytes: u64, nanos: u64) {
        self.speeds.report(id, now, bytes, nanos);
    }

    /// Bytes a second worker `id`'s links achieved over the last window.
    pub fn bandwidth(&self, id: WorkerId, now: Duration) -> Option<u64> {
        self.speeds.measured(id, now)
    }

    /// Changes of standing to log now in a replicated pool: `WorkerDown`
    /// for a worker silent for its grace period (or never heard from in
    /// the grace period since the engine started), `WorkerUp` for one
    /// down and heard from again. Nothing with one copy per chunk: a
    /// silent worker's partitions wait for it.
    pub fn standing_ops(&self, now: Duration) -> Vec<MetaOp> {
        let state = &self.state;
        if state.table().replicas() == 1 || now < self.cfg.dead_after {
            return Vec::new();
        }
        let mut ops = Vec::new();
        for id in state.workers().keys() {
            let alive = self.liveness.is_alive(*id, now);
            match (state.down().contains(id), alive) {
                (false, false) => ops.push(MetaOp::WorkerDown { id: *id }),
                (true, true) => ops.push(MetaOp::WorkerUp { id: *id }),
                _ => {}
            }
        }
        ops
    }

    /// Workers that are not alive now (down, silent, or not heard from since the engine started).
    pub fn dead(&self, now: Duration) -> BTreeSet<WorkerId> {
        (self.state.workers().keys()).filter(|w| !self.liveness.is_alive(**w, now)).copied().collect()
    }

    /// Speeds of workers to log now (`SetSpeed`): see [`speeds`].
    pub fn speed_changes(&mut self, now: Duration) -> Vec<(WorkerId, u8)> {
        let known = self.state.workers();
        let current = self.state.speeds().clone();
        let mut out = self.speeds.changes(now, &current);
        out.retain(|(w, _)| known.contains_key(w));
        out
    }

    /// How far along the migration is.
    pub fn migration(&mut self, now: Duration) -> Progress {
        let state = &self.state;
        self.mover.progress(state, || state.partition_bytes(), now)
    }

    /// Opens a transaction for client `session` (see [`transactions`]).
    pub fn tx_begin(&mut self, session: u64, now: Duration) -> u64 {
        let id = self.txs.begin(&self.state, session, now);
        self.state.watch(true);
        // Images kept so far are older than its begin: it sees none of them.
        self.state.note_again();
        id
    }

    /// The inode at `path` as transaction `tx` sees it.
    pub fn tx_stat(&mut self, session: u64, tx: u64, path: &str, now: Duration) -> Result<crate::InodeInfo> {
        let r = self.txs.stat(&self.state, session, tx, path, now);
        self.state.watch(self.txs.any_open());
        r
    }

    /// Transaction `tx` writes `chunks` of file `inode` (at `path`).
    #[allow(clippy::too_many_arguments)]
    pub fn tx_write(
        &mut self,
        session: u64,
        tx: u64,
        inode: InodeId,
        path: &str,
        chunks: &[u64],
        now: Duration,
    ) -> Result<()> {
        let r = self.txs.write(&self.state, session, tx, inode, path, chunks, now);
        self.state.watch(self.txs.any_open());
        r
    }

    /// Ends transaction `tx`: what its commit is (an op to execute and log
    /// at once, under the same lock), or why it cannot commit.
    pub fn tx_commit(
        &mut self,
        session: u64,
        tx: u64,
        task: Option<String>,
        changes: transactions::Changes,
        now: Duration,
    ) -> Result<Commit> {
        let r = self.txs.commit(&self.state, session, tx, task, changes, now);
        self.state.watch(self.txs.any_open());
        r
    }

    /// What pages `first..first + count` of region `inode` held when
    /// transaction `tx` began, for those a commit wrote since.
    pub fn tx_pages(
        &mut self,
        session: u64,
        tx: u64,
        inode: InodeId,
        pages: (u64, u64),
        now: Duration,
    ) -> Result<Vec<(u64, bytes::Bytes)>> {
        let r = self.txs.pages_then(&self.state, session, tx, inode, pages, now);
        self.state.watch(self.txs.any_open());
        r
    }

    /// Whether transaction `tx` must wait for pages of region `inode`
    /// committed before it began to be written on the workers.
    pub fn tx_waits_for_pages(&self, tx: u64, inode: InodeId) -> bool {
        self.txs.waits_for_pages(&self.state, tx, inode)
    }

    /// Ends transaction `tx` without a commit.
    pub fn tx_abort(&mut self, session: u64, tx: u64) {
        self.txs.abort(session, tx);
        self.state.watch(self.txs.any_open());
    }

    /// Client `session` still runs transactions `txs` (an error names one it does not).
    pub fn tx_renew(&mut self, session: u64, txs: &[u64], now: Duration) -> Result<()> {
        self.txs.renew(session, txs, now)
    }

    /// Transactions open now.
    pub fn open_transactions(&self) -> usize {
        self.txs.open_count()
    }

    /// Turns the write-write check of commits off or on (only to show that
    /// a history checker notices the lost updates it lets through).
    /// Turns the notes of what each op changes on or off (see
    /// [`MetaState::take_changes`]).
    pub fn note_changes(&mut self, on: bool) {
        self.state.note_changes(on);
    }

    /// What the ops since the last call changed.
    pub fn take_changes(&mut self) -> crate::Changes {
        self.state.take_changes()
    }

    pub fn set_check_writes(&mut self, on: bool) {
        self.txs.set_check_writes(on);
    }

    /// Inodes held open now (for status and tests).
    pub fn held(&mut self, now: Duration) -> BTreeSet<InodeId> {
        self.leases.held(now)
    }
}
