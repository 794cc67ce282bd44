//! `Transact`: a transaction's writes of files and its changes of the
//! namespace, committed in one op.
//!
//! Each file is an `UpdateFile` (see `update`) of a file that existed
//! before; every one is validated before the first is applied. Updates of
//! distinct files do not bear on each other's validation, which is why a
//! file may appear once only. Then the namespace steps run in order, each
//! as the op it names (`Mkdir`, `Remove`, `Rename`; `Create` makes an
//! empty file with a reserved id and updates it): a step validates only
//! once the steps before it ran, so the op arms an undo (`undo`) and, if a
//! step fails, puts everything back, files included. Beneath an attached
//! under-store, files may be updated and made (they become dirty, and
//! the committer writes them below as its mode says, after the commit);
//! directories made, entries removed and moved are refused where the
//! attachment mirrors names (`through`, `back`: those happen below first,
//! which no commit can take part in), and anything beneath a read-only
//! one is `ReadOnly`. Whether anything changed since the transaction began (a
//! write-write conflict) is not the state's to judge: the engine checks it
//! against its view of the past just before it runs the op, under the
//! same lock.
//!
//! Pages of memory regions (`regions`) change in place on the workers, so
//! the op cannot publish them by naming new versions: it keeps them, with
//! the id of their commit, in `pending_pages` (and in every metadata
//! snapshot) until `RegionPagesWritten` says they are on the workers. The
//! commit happened when the op did; the coordinator writes the pages right
//! after it is durable, and writes them again after a restart if it had
//! not said they were written (writing a page twice with the same bytes is
//! harmless, and no later commit can have written one of them meanwhile:
//! a transaction reads a region only once the pages committed there before
//! it began are written, and a later commit of a page comes later in the
//! log, so the coordinator, writing oldest first, writes it later). Each
//! region must be a live region, not being restored, and each page whole
//! and inside it. A region with pages pending is neither checkpointed nor
//! restored (`Busy`) until they are written.
//!
//! A transaction may carry a task id: the state remembers the ids of those
//! that committed, so of several attempts at one task (a task run again
//! after a timeout, a speculative copy of it) exactly one commits; the
//! others fail `AlreadyExists` and change nothing.
//!
//! Invariants: `tasks` holds only ids of at most [`MAX_TASK_ID`] bytes;
//! every pending commit has pages, each region's indexes rising and each
//! page at most [`REGION_PAGE`] bytes.

use super::inode::{Body, Inode, Owner};
use super::resolve::path_error;
use super::snapshots::writable;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp, TxFile, TxNs, TxRegion, WriteMode, REGION_PAGE};
use std::collections::BTreeSet;
use tierpool_types::{validate_chunk_size, Error, ErrorKind, Result};

/// The longest task id, in bytes.
pub const MAX_TASK_ID: usize = 256;

impl MetaState {
    pub(super) fn transact(
        &mut self,
        task: Option<&str>,
        (files, ns, regions): (&[TxFile], &[TxNs], &[TxRegion]),
        owner: Owner,
        now: Timestamp,
    ) -> Result<MetaReply> {
        if let Some(t) = task {
            check_task(t)?;
            if self.tasks.contains(t) {
                return Err(already_committed(t));
            }
        }
        let mut seen = BTreeSet::new();
        let mut plans = Vec::with_capacity(files.len());
        for f in files {
            if !seen.insert(f.inode) {
                return Err(Error::invalid(format!("inode {}: a transaction commits each file once", f.inode)));
            }
            plans.push(self.check_update(f.inode, f.size, f.truncate, &f.chunks, false)?);
        }
        let mut regions_seen = BTreeSet::new();
        for r in regions {
            if !regions_seen.insert(r.inode) {
                return Err(Error::invalid(format!("inode {}: a transaction commits each region once", r.inode)));
            }
            self.check_pages(r)?;
        }
        // Validated: mutate.
        let undo = (!ns.is_empty()).then(|| self.arm_undo());
        for (f, plan) in files.iter().zip(plans) {
            self.apply_update(f.inode, plan, &f.chunks, now);
        }
        if let Some(undo) = undo {
            for (i, step) in ns.iter().enumerate() {
                if let Err(e) = self.step(step, owner, now) {
                    self.rollback(undo);
                    return Err(Error::new(e.kind, format!("step {} of the transaction: {}", i + 1, e.message)));
                }
            }
            self.keep_changes();
        }
        if let Some(t) = task {
            self.tasks.insert(t.to_owned());
        }
        let regions: Vec<TxRegion> = regions.iter().filter(|r| !r.pages.is_empty()).cloned().collect();
        if !regions.is_empty() {
            let id = self.pending_pages.last_key_value().map_or(1, |(id, _)| id + 1);
            self.pending_pages.insert(id, regions);
        }
        Ok(MetaReply::Done)
    }

    /// Fails unless `r`'s pages are whole pages of a live region, indexes
    /// rising, and the region is not being restored.
    fn check_pages(&self, r: &TxRegion) -> Result<()> {
        let Some(Body::Region { size, .. }) = self.inodes.get(&r.inode).map(|n| &n.body) else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("inode {}: not a region (removed since the transaction wrote it?)", r.inode),
            ));
        };
        if let Some((path, name)) = self.snapshots.restoring.get(&r.inode) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{path}: its restore to checkpoint {name} has not finished; restore it again first"),
            ));
        }
        let mut last = None;
        for (index, bytes) in &r.pages {
            let start = index.saturating_mul(REGION_PAGE);
            if start >= *size || last.is_some_and(|l| l >= *index) {
                return Err(Error::invalid(format!(
                    "inode {}: page {index} is not a next page of a region of {size} bytes",
                    r.inode
                )));
            }
            let len = (size - start).min(REGION_PAGE);
            if bytes.len() as u64 != len {
                return Err(Error::invalid(format!(
                    "inode {}: page {index} has {} bytes, not {len}",
                    r.inode,
                    bytes.len()
                )));
            }
            last = Some(*index);
        }
        Ok(())
    }

    /// `Busy` while region `id` (at `comps`) has pages of committed
    /// transactions not yet on the workers: a checkpoint would miss them,
    /// and a restore could be overwritten by them.
    pub(super) fn no_pages_pending(&self, id: tierpool_types::InodeId, comps: &[String]) -> Result<()> {
        if self.pending_pages.values().flatten().any(|r| r.inode == id) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{}: pages that transactions committed to this region are still being written on the workers; \
                     try again",
                    display(comps)
                ),
            ));
        }
        Ok(())
    }

    /// The checkpoint region `id` is being restored to, if a restore of it
    /// has not finished.
    pub fn restoring_region(&self, id: tierpool_types::InodeId) -> Option<&(String, String)> {
        self.snapshots.restoring.get(&id)
    }

    /// The pages pending as `id` are on the workers.
    pub(super) fn pages_written(&mut self, id: u64) -> Result<MetaReply> {
        match self.pending_pages.remove(&id) {
            Some(_) => Ok(MetaReply::Done),
            None => Err(Error::new(ErrorKind::NotFound, format!("no region pages are pending as {id}"))),
        }
    }

    /// Region pages of committed transactions not yet written on the
    /// workers, by the id of their commit, oldest first.
    pub fn pending_pages(&self) -> &std::collections::BTreeMap<u64, Vec<TxRegion>> {
        &self.pending_pages
    }

    /// Runs one namespace step of a transaction.
    fn step(&mut self, step: &TxNs, owner: Owner, now: Timestamp) -> Result<()> {
        for p in step.paths() {
            let comps = writable(p)?;
            let Ok(parent) = self.lookup(&comps[..comps.len().saturating_sub(1)]) else { continue };
            self.check_writable(parent, &display(&comps))?;
            let mirrored = self.attachment_of(parent).filter(|a| self.attachments[a].mode != WriteMode::PoolOnly);
            if let (Some(a), false) = (mirrored, matches!(step, TxNs::Create { .. })) {
                return Err(Error::invalid(format!(
                    "{}: beneath the attachment at {}, whose store makes, removes and moves names first: \
                     not in a transaction (do it outside one)",
                    display(&comps),
                    self.dir_path(a)
                )));
            }
        }
        match step {
            TxNs::Mkdir { path, mode } => {
                self.mkdir(&writable(path)?, false, *mode, owner, now)?;
            }
            TxNs::Remove { path, recursive } => {
                self.remove(&writable(path)?, *recursive, now)?;
            }
            TxNs::Rename { from, to } => {
                self.rename(&writable(from)?, &writable(to)?, now)?;
            }
            TxNs::Create { path, mode, chunk_size, file } => {
                let comps = writable(path)?;
                validate_chunk_size(*chunk_size).map_err(|e| e.context(display(&comps)))?;
                let Some(name) = comps.last() else { return Err(Error::invalid("the root directory exists")) };
                let parent = self.parent_dir(&comps)?;
                if self.child(parent, name).is_some() {
                    return Err(path_error(ErrorKind::AlreadyExists, &comps));
                }
                self.check_reserved(file.inode)?;
                let body = Body::File { size: 0, chunk_size: *chunk_size, chunks: Vec::new() };
                self.add_entry(parent, name, file.inode, Inode::new(*mode, owner, now, body), now);
                let plan = self.check_update(file.inode, file.size, file.truncate, &file.chunks, false)?;
                self.apply_update(file.inode, plan, &file.chunks, now);
            }
        }
        Ok(())
    }

    /// Whether a transaction with task id `task` committed.
    pub fn task_committed(&self, task: &str) -> bool {
        self.tasks.contains(task)
    }

    /// The task ids of committed transactions, in order.
    pub fn tasks(&self) -> impl Iterator<Item = &String> {
        self.tasks.iter()
    }

    /// How many task ids are remembered.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    pub(super) fn check_tasks(&self) -> Result<()> {
        self.tasks.iter().try_for_each(|t| check_task(t).map_err(|e| Error::internal(e.message)))?;
        for (id, regions) in &self.pending_pages {
            let bad = regions.is_empty()
                || regions.iter().any(|r| {
                    r.pages.is_empty()
                        || r.pages.windows(2).any(|w| w[0].0 >= w[1].0)
                        || r.pages.iter().any(|(_, b)| b.is_empty() || b.len() as u64 > REGION_PAGE)
                });
            if bad {
                return Err(Error::internal(format!("region pages pending as {id} are malformed")));
            }
        }
        Ok(())
    }
}

/// A task id is 1 to [`MAX_TASK_ID`] bytes.
pub fn check_task(task: &str) -> Result<()> {
    if task.is_empty() || task.len() > MAX_TASK_ID {
        return Err(Error::invalid(format!("a task id is 1 to {MAX_TASK_ID} bytes, not {}", task.len())));
    }
    Ok(())
}

/// The error of an attempt at a task that committed already.
pub fn already_committed(task: &str) -> Error {
    Error::new(ErrorKind::AlreadyExists, format!("task {task}: a transaction of this task committed already"))
}
