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
//! step fails, puts everything back, files included. Steps beneath an
//! attached under-store are refused (transactions do not read there
//! either). Whether anything changed since the transaction began (a
//! write-write conflict) is not the state's to judge: the engine checks it
//! against its view of the past just before it runs the op, under the
//! same lock.
//!
//! A transaction may carry a task id: the state remembers the ids of those
//! that committed, so of several attempts at one task (a task run again
//! after a timeout, a speculative copy of it) exactly one commits; the
//! others fail `AlreadyExists` and change nothing.
//!
//! Invariant: `tasks` holds only ids of at most [`MAX_TASK_ID`] bytes.

use super::inode::{Body, Inode, Owner};
use super::resolve::path_error;
use super::snapshots::writable;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp, TxFile, TxNs};
use std::collections::BTreeSet;
use tierpool_types::{validate_chunk_size, Error, ErrorKind, Result};

/// The longest task id, in bytes.
pub const MAX_TASK_ID: usize = 256;

impl MetaState {
    pub(super) fn transact(
        &mut self,
        task: Option<&str>,
        files: &[TxFile],
        ns: &[TxNs],
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
        Ok(MetaReply::Done)
    }

    /// Runs one namespace step of a transaction.
    fn step(&mut self, step: &TxNs, owner: Owner, now: Timestamp) -> Result<()> {
        for p in step.paths() {
            let comps = writable(p)?;
            let parent = self.lookup(&comps[..comps.len().saturating_sub(1)]);
            if parent.is_ok_and(|d| self.attachment_of(d).is_some()) {
                return Err(Error::invalid(format!(
                    "{}: beneath an attached under-store: not changed in transactions",
                    display(&comps)
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
        self.tasks.iter().try_for_each(|t| check_task(t).map_err(|e| Error::internal(e.message)))
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
