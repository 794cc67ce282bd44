//! `Transact`: a transaction's writes of files, committed in one op.
//!
//! Each file is an `UpdateFile` (see `update`); every one is validated
//! before the first is applied, so the op changes all of them or none.
//! Updates of distinct files do not bear on each other's validation, which
//! is why a file may appear once only. Whether the files changed since the
//! transaction began (a write-write conflict) is not the state's to judge:
//! the engine checks it against its view of the past just before it runs
//! the op, under the same lock.
//!
//! A transaction may carry a task id: the state remembers the ids of those
//! that committed, so of several attempts at one task (a task run again
//! after a timeout, a speculative copy of it) exactly one commits; the
//! others fail `AlreadyExists` and change nothing.
//!
//! Invariant: `tasks` holds only ids of at most [`MAX_TASK_ID`] bytes.

use super::MetaState;
use crate::{MetaReply, Timestamp, TxFile};
use std::collections::BTreeSet;
use tierpool_types::{Error, ErrorKind, Result};

/// The longest task id, in bytes.
pub const MAX_TASK_ID: usize = 256;

impl MetaState {
    pub(super) fn transact(&mut self, task: Option<&str>, files: &[TxFile], now: Timestamp) -> Result<MetaReply> {
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
            plans.push(self.check_update(f.inode, f.size, f.truncate, &f.chunks)?);
        }
        // Validated: mutate.
        for (f, plan) in files.iter().zip(plans) {
            self.apply_update(f.inode, plan, &f.chunks, now);
        }
        if let Some(t) = task {
            self.tasks.insert(t.to_owned());
        }
        Ok(MetaReply::Done)
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
