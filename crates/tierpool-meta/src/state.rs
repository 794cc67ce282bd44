//! The metadata state and its transitions.
//!
//! Owns the namespace (inodes and directory entries), the inode and worker id
//! counters, the worker records, the partition table and the inodes awaiting
//! garbage collection. Invariants (see [`MetaState::check_invariants`]):
//! - before `Init` the state is empty; after it the root directory exists;
//! - every live directory except the root is the entry of exactly one
//!   directory, reachable from the root, and its `parent`/`name` match that
//!   entry; every other live inode is the entry of exactly `links` directories;
//! - the subdirectories kept for each live directory (`subdirs`, derived:
//!   its link count is 2 more) are the directories among its entries;
//! - the files owed to under-stores (`owed`, derived) are the live files
//!   with changes not below, once the inodes an op touched are settled;
//! - every live or pending id is below `next_inode`; `pending_gc` holds no live inode;
//! - a file has one chunk entry per chunk, each object no longer than its
//!   share of the file; `pending_chunks` holds only versions of live files
//!   that no file entry references;
//! - bytes are held inline for exactly the files whose chunk 0 is inline,
//!   matching its length and CRC, and nowhere else (`inline`);
//! - `next_worker_id` is above every known worker id; once a worker is known,
//!   every partition is owned by a known worker.
//!
//! The rules of each op live in its submodule (`create`, `remove`, `rename`
//! for the POSIX rename rules, `attrs`, `update` for chunk versions,
//! `inline` for small files held with their bytes, `workers`). Namespace ops come in two forms: by path (the CLI's) and by
//! directory inode and entry name (a file system's); both share one core.
//!
//! Every op validates fully before its first mutation, so a failed op leaves the
//! state untouched, and the result depends only on the state, the op and `now`.
//!
//! The state is not serialisable: the coordinator's records own the bytes on
//! disk and convert from a [`StateView`] and to [`StateParts`] (`parts`), so
//! a change here cannot change a stored format by accident.

mod attrs;
mod before;
mod changes;
pub use before::{FileShape, Image};
pub use changes::Changes;
mod check;
mod create;
mod inline;
pub use inline::INLINE_MAX;
pub(crate) mod inode;
mod parts;
pub use parts::{StateParts, StateView};
mod placement;
mod queries;
mod remove;
mod replicas;
pub use replicas::{ReplicaHealth, MAX_REPLICAS};
mod checkpoints;
mod rename;
mod resolve;
mod snapshots;
mod transact;
mod undo;
pub use snapshots::{Frozen, FrozenBody, Snapshot, SnapshotSummary, SNAPSHOTS};
pub use transact::{already_committed, check_task, MAX_TASK_ID};
mod owed;
pub use owed::OwedFigures;
mod pending;
pub use pending::PendedNews;
mod under;
mod update;
mod workers;
mod write_modes;

use crate::{Attachment, MetaOp, MetaReply, Timestamp, WorkerRecord};
use inode::{Inode, Owner};
use snapshots::{not_reserved, writable};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_placement::PartitionTable;
use tierpool_types::{ChunkKey, Error, InodeId, Result, Spread, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaState {
    initialised: bool,
    inodes: BTreeMap<InodeId, Inode>,
    /// The next id `AllocInodes` or `Mkdir` hands out; ids below it were reserved once.
    next_inode: u64,
    workers: BTreeMap<WorkerId, WorkerRecord>,
    /// Wider than a `WorkerId` so that it can sit above `u32::MAX`.
    next_worker_id: u64,
    /// One unowned partition until `Init` fixes the real count.
    table: PartitionTable,
    pending_gc: BTreeSet<InodeId>,
    /// Replaced versions of live files' chunks, to be deleted from the workers.
    pending_chunks: BTreeSet<ChunkKey>,
    /// Reserved ids (inodes, chunk versions) whose writer was given up on:
    /// never to be published.
    retired: BTreeSet<u64>,
    /// The owner each partition should end with; empty when the table is there.
    goal: Vec<Option<WorkerId>>,
    /// Workers being emptied: they take no partitions.
    draining: BTreeSet<WorkerId>,
    /// Workers removed from the pool: their ids may not register again.
    removed: BTreeSet<WorkerId>,
    /// Workers slower than a healthy one: the percent of its bandwidth they
    /// deliver (1..=99; a worker not listed delivers 100).
    speeds: BTreeMap<WorkerId, u8>,
    /// Workers silent past their grace period in a replicated pool: they
    /// take no slots, and their slots with a live sibling were let go.
    down: BTreeSet<WorkerId>,
    /// What replicas are kept apart by (set with the replication).
    spread: Spread,
    /// Directories attached to under-stores.
    attachments: BTreeMap<InodeId, Attachment>,
    /// The bytes of small files held inline.
    inline: inline::Inline,
    /// Snapshots, and the chunk versions they keep.
    snapshots: snapshots::Snapshots,
    /// Task ids of committed transactions: a task commits once.
    tasks: BTreeSet<String>,
    /// Region pages of committed transactions not yet written on the
    /// workers, by an id of their commit (see `state/transact.rs`).
    pending_pages: BTreeMap<u64, Vec<crate::TxRegion>>,
    /// Whether a placement policy other than `hash` was ever set here since
    /// the state was loaded (or any inode has one): writers must then look
    /// up their directory's. Derived, never stored, never compared.
    placed: Placed,
    /// How many subdirectories each directory has (a directory's link
    /// count is 2 more): derived from the namespace, kept by `link` and
    /// `unlink`, never stored, never compared (checked by `check_invariants`).
    subdirs: Subdirs,
    /// Files with changes not below their under-store: derived, never
    /// stored, never compared (see `owed`).
    owed: owed::Owed,
    /// What the ops run since the last [`MetaState::take_garbage`] queued
    /// for collection; not part of the state proper (see [`Fresh`]).
    fresh: Fresh,
    /// Inodes as they were before the ops since the engine last looked
    /// changed them; not part of the state proper (see `before`).
    before: before::Before,
    /// What the ops since the shell last looked changed; not part of the
    /// state proper (see `changes`).
    changes: changes::Noted,
    /// Items put in the garbage sets since the collector's schedule last
    /// took them; not part of the state proper (see `pending`).
    pended: pending::PendedNews,
}

/// Garbage just made: removed files' inodes and replaced chunk versions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Garbage {
    pub inodes: Vec<InodeId>,
    pub keys: Vec<ChunkKey>,
}

impl Garbage {
    pub fn is_empty(&self) -> bool {
        self.inodes.is_empty() && self.keys.is_empty()
    }
}

/// A note of the garbage made since it was last taken: it says what just
/// happened, not what the state is, so two states compare equal whatever
/// their notes hold.
#[derive(Clone, Debug, Default)]
struct Fresh(Garbage);

impl PartialEq for Fresh {
    fn eq(&self, _: &Fresh) -> bool {
        true
    }
}

impl Eq for Fresh {}

/// Whether a placement policy other than `hash` may be in use: a hint for
/// writers, so two states compare equal whatever it says.
#[derive(Clone, Debug, Default)]
struct Placed(bool);

impl PartialEq for Placed {
    fn eq(&self, _: &Placed) -> bool {
        true
    }
}

impl Eq for Placed {}

/// Subdirectories of each directory that has any: derived, so two states
/// compare equal whatever it says.
#[derive(Clone, Debug, Default)]
struct Subdirs(std::collections::HashMap<InodeId, u32>);

impl PartialEq for Subdirs {
    fn eq(&self, _: &Subdirs) -> bool {
        true
    }
}

impl Eq for Subdirs {}

/// Every chunk key of inode `id`, as a range of the ordered keys.
fn inode_keys(id: InodeId) -> std::ops::RangeInclusive<ChunkKey> {
    ChunkKey::hashed(id, 0, 0)..=ChunkKey { inode: id, index: u64::MAX, version: u64::MAX, home: Some(u32::MAX) }
}

impl MetaState {
    /// An empty, uninitialised state (no root yet; `Init` creates it).
    pub fn new() -> Self {
        MetaState {
            initialised: false,
            inodes: BTreeMap::new(),
            next_inode: InodeId::ROOT.0 + 1,
            workers: BTreeMap::new(),
            next_worker_id: 1,
            table: PartitionTable::new(1),
            pending_gc: BTreeSet::new(),
            pending_chunks: BTreeSet::new(),
            retired: BTreeSet::new(),
            goal: Vec::new(),
            draining: BTreeSet::new(),
            removed: BTreeSet::new(),
            speeds: BTreeMap::new(),
            down: BTreeSet::new(),
            spread: Spread::Host,
            attachments: BTreeMap::new(),
            inline: inline::Inline::default(),
            snapshots: snapshots::Snapshots::default(),
            tasks: BTreeSet::new(),
            pending_pages: BTreeMap::new(),
            placed: Placed::default(),
            subdirs: Subdirs::default(),
            owed: Default::default(),
            fresh: Fresh::default(),
            before: before::Before::default(),
            changes: changes::Noted::default(),
            pended: pending::PendedNews::default(),
        }
    }

    /// The garbage queued by the ops run since the last call: what can be
    /// handed back to the workers' free space at once.
    pub fn take_garbage(&mut self) -> Garbage {
        std::mem::take(&mut self.fresh.0)
    }

    /// Whether `Init` has run.
    pub fn is_initialised(&self) -> bool {
        self.initialised
    }

    /// Executes `op` at time `now` on behalf of root (0/0). On error the
    /// state is unchanged.
    pub fn execute(&mut self, op: &MetaOp, now: Timestamp) -> Result<MetaReply> {
        self.execute_as(op, Owner::default(), now)
    }

    /// Executes `op` at time `now` on behalf of `owner`: the inodes it
    /// creates belong to them. On error the state is unchanged.
    pub fn execute_as(&mut self, op: &MetaOp, owner: Owner, now: Timestamp) -> Result<MetaReply> {
        if !matches!(op, MetaOp::Init { .. }) {
            self.ensure_initialised()?;
        }
        let done = self.execute_op(op, owner, now);
        self.settle_owed();
        done
    }

    fn execute_op(&mut self, op: &MetaOp, owner: Owner, now: Timestamp) -> Result<MetaReply> {
        match op {
            MetaOp::Init { partitions } => self.init(*partitions, now),
            MetaOp::Mkdir { path, parents, mode } => self.mkdir(&writable(path)?, *parents, *mode, owner, now),
            MetaOp::AllocInodes { count } => self.alloc_inodes(*count),
            MetaOp::CommitFile { path, inode, size, chunk_size, checksums, homes, attrs, mode, overwrite } => {
                let file = create::NewFile {
                    inode: *inode,
                    size: *size,
                    chunk_size: *chunk_size,
                    checksums,
                    homes,
                    attrs: *attrs,
                    mode: *mode,
                    region: false,
                };
                self.commit_file(&writable(path)?, &file, *overwrite, owner, now)
            }
            MetaOp::CommitInline { path, inode, data, chunk_size, attrs, mode, overwrite } => {
                let file =
                    inline::NewInline { inode: *inode, data, chunk_size: *chunk_size, attrs: *attrs, mode: *mode };
                self.commit_inline(&writable(path)?, &file, *overwrite, owner, now)
            }
            MetaOp::CommitRegion { path, inode, size, chunk_size, attrs, mode } => {
                let region = create::NewFile {
                    inode: *inode,
                    size: *size,
                    chunk_size: *chunk_size,
                    checksums: &[],
                    homes: &[],
                    attrs: *attrs,
                    mode: *mode,
                    region: true,
                };
                self.commit_file(&writable(path)?, &region, false, owner, now)
            }
            MetaOp::Remove { path, recursive } => self.remove(&writable(path)?, *recursive, now),
            MetaOp::Rename { from, to } => self.rename(&writable(from)?, &writable(to)?, now),
            MetaOp::SetAttrs { path, priority, pinned } => self.set_attrs(&writable(path)?, *priority, *pinned, now),
            MetaOp::SetMeta { path, mode, mtime } => self.set_meta(&writable(path)?, *mode, *mtime, now),
            MetaOp::RegisterWorker { id, addr, host, rack, mem_capacity, disk_capacity, at_once } => {
                let record = WorkerRecord {
                    id: id.unwrap_or(WorkerId(0)),
                    addr: addr.clone(),
                    host: host.clone(),
                    rack: rack.clone(),
                    mem_capacity: *mem_capacity,
                    disk_capacity: *disk_capacity,
                };
                self.register_worker(*id, record, *at_once)
            }
            MetaOp::GcDone { inodes } => {
                for i in inodes {
                    self.unpend_inode(*i);
                }
                Ok(MetaReply::Done)
            }
            MetaOp::MakeAt { parent, name, node, mode } => {
                not_reserved(name)?;
                self.make_at(*parent, name, node, *mode, owner, now)
            }
            MetaOp::MakeFileAt { parent, name, inode, chunk_size, mode } => {
                not_reserved(name)?;
                self.make_file_at(*parent, name, *inode, *chunk_size, *mode, owner, now)
            }
            MetaOp::LinkAt { inode, parent, name } => {
                not_reserved(name)?;
                self.link_at(*inode, *parent, name, now)
            }
            MetaOp::RemoveAt { parent, name, dir } => self.remove_at(*parent, name, *dir, now),
            MetaOp::RenameAt { parent, name, new_parent, new_name, noreplace } => {
                not_reserved(new_name)?;
                self.rename_at((*parent, name), (*new_parent, new_name), *noreplace, now)
            }
            MetaOp::SetInode { inode, mode, uid, gid, atime, mtime } => {
                let change = attrs::InodeChange { mode: *mode, uid: *uid, gid: *gid, atime: *atime, mtime: *mtime };
                self.set_inode(*inode, &change, now)
            }
            MetaOp::UpdateFile { inode, size, truncate, chunks } => {
                self.update_file(*inode, *size, *truncate, chunks, now)
            }
            MetaOp::UpdateInline { inode, version, data } => self.update_inline(*inode, *version, data, now),
            MetaOp::GcChunksDone { keys } => Ok(self.gc_chunks_done(keys)),
            MetaOp::SetAttrsAt { inode, priority, pinned } => {
                self.live(*inode)?;
                Ok(self.set_attrs_of(*inode, *priority, *pinned, now))
            }
            MetaOp::Retire { ids } => self.retire(ids),
            MetaOp::BeginMoves { moves } => self.begin_moves(moves),
            MetaOp::FinishMoves { partitions } => self.finish_moves(partitions),
            MetaOp::AbortMoves { partitions } => self.abort_moves(partitions),
            MetaOp::DrainWorker { id } => self.drain_worker(*id),
            MetaOp::RemoveWorker { id } => self.remove_worker(*id),
            MetaOp::Rebalance => self.rebalance(),
            MetaOp::SetSpeed { id, percent } => self.set_speed(*id, *percent),
            MetaOp::SetReplication { replicas, spread } => self.set_replication(*replicas, *spread),
            MetaOp::WorkerDown { id } => self.worker_down(*id),
            MetaOp::WorkerUp { id } => self.worker_up(*id),
            MetaOp::SetReplicas { path, replicas, recursive } => {
                self.set_replicas(&writable(path)?, *replicas, *recursive, now)
            }
            MetaOp::SetPlacement { path, placement, recursive } => {
                self.set_placement(&writable(path)?, *placement, *recursive, now)
            }
            MetaOp::Attach { path, attachment } => self.attach(&writable(path)?, attachment),
            MetaOp::Detach { path } => self.detach(&writable(path)?, now),
            MetaOp::AdoptFile { parent, name, size, chunk_size, mtime, etag, mode } => {
                not_reserved(name)?;
                let object = under::Object { size: *size, mtime: *mtime, etag };
                self.adopt_file(*parent, name, &object, *chunk_size, *mode, owner, now)
            }
            MetaOp::Persisted { inode, chunks, size, mtime, etag, key } => {
                self.persisted(*inode, chunks, &under::Object { size: *size, mtime: *mtime, etag }, key.as_deref())
            }
            MetaOp::AdoptDir { parent, name, mode } => {
                not_reserved(name)?;
                self.adopt_dir(*parent, name, *mode, owner, now)
            }
            MetaOp::Disown { parent, name } => self.disown(*parent, name, now),
            MetaOp::LoadChunks { inode, chunks } => self.load_chunks(*inode, chunks),
            MetaOp::Unload { inode } => self.unload(*inode),
            MetaOp::SnapshotCreate { path, name } => self.create_snapshot(&writable(path)?, name, now),
            MetaOp::SnapshotRemove { path, name } => self.drop_snapshot(&writable(path)?, name),
            MetaOp::SnapshotRestore { path, name } => self.restore_snapshot(&writable(path)?, name, now),
            MetaOp::Checkpoint { path, name, inode, version, chunks } => {
                self.checkpoint(&writable(path)?, name, (*inode, *version), chunks, now)
            }
            MetaOp::RegionRestore { path, name, done } => self.region_restore(&writable(path)?, name, *done, now),
            MetaOp::Transact { task, files, ns, regions } => {
                self.transact(task.as_deref(), (files, ns, regions), owner, now)
            }
            MetaOp::RegionPagesWritten { id } => self.pages_written(*id),
            MetaOp::SetWriteMode { path, mode, recursive } => {
                self.set_write_mode(&writable(path)?, *mode, *recursive, now)
            }
        }
    }

    /// Partition -> owner. Before `Init` a placeholder of one unowned partition.
    pub fn table(&self) -> &PartitionTable {
        &self.table
    }

    /// Directories attached to under-stores.
    pub fn attachments(&self) -> &BTreeMap<InodeId, Attachment> {
        &self.attachments
    }

    pub fn workers(&self) -> &BTreeMap<WorkerId, WorkerRecord> {
        &self.workers
    }

    /// Inodes whose chunks must still be deleted from the workers.
    pub fn pending_gc(&self) -> &BTreeSet<InodeId> {
        &self.pending_gc
    }

    /// Replaced chunk versions whose objects must still be deleted from the workers.
    pub fn pending_chunks(&self) -> &BTreeSet<ChunkKey> {
        &self.pending_chunks
    }

    /// Reserved ids that can never be published (see `MetaOp::Retire`).
    pub fn retired(&self) -> &BTreeSet<u64> {
        &self.retired
    }

    /// Number of live inodes (files and directories, root included).
    pub fn inode_count(&self) -> u64 {
        self.inodes.len() as u64
    }

    /// The next inode id that `AllocInodes` would hand out.
    pub fn next_inode(&self) -> InodeId {
        InodeId(self.next_inode)
    }

    fn ensure_initialised(&self) -> Result<()> {
        if self.initialised {
            Ok(())
        } else {
            Err(Error::invalid("pool is not initialised"))
        }
    }

    fn init(&mut self, partitions: u32, now: Timestamp) -> Result<MetaReply> {
        if self.initialised {
            return Err(Error::invalid("pool is already initialised"));
        }
        if partitions == 0 {
            return Err(Error::invalid("a pool needs at least one partition"));
        }
        self.initialised = true;
        self.table = PartitionTable::new(partitions);
        self.keep_before(InodeId::ROOT);
        self.inodes.insert(InodeId::ROOT, Inode::root(now));
        Ok(MetaReply::Done)
    }

    fn retire(&mut self, ids: &[u64]) -> Result<MetaReply> {
        if let Some(id) = ids.iter().find(|i| **i == 0 || **i >= self.next_inode) {
            return Err(Error::invalid(format!("id {id} was never reserved: it cannot be retired")));
        }
        if let Some(id) = ids.iter().find(|i| self.inodes.contains_key(&InodeId(**i))) {
            return Err(Error::invalid(format!("inode {id} is live: it cannot be retired")));
        }
        if let Some(id) = ids.iter().find(|i| self.snapshots.keeps_inode(InodeId(**i))) {
            return Err(Error::invalid(format!("inode {id} is kept by a snapshot: it cannot be retired")));
        }
        self.retired.extend(ids.iter().copied());
        Ok(MetaReply::Done)
    }

    fn alloc_inodes(&mut self, count: u64) -> Result<MetaReply> {
        if count == 0 {
            return Err(Error::invalid("cannot allocate 0 inodes: count must be at least 1"));
        }
        let first = self.next_inode;
        self.next_inode = first.checked_add(count).ok_or_else(|| Error::invalid("inode ids are exhausted"))?;
        Ok(MetaReply::Inodes { first: InodeId(first), count })
    }
}

impl Default for MetaState {
    fn default() -> Self {
        Self::new()
    }
}
