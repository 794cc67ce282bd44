//! A full check of the state's invariants, for tests and for the shell after
//! recovery. Linear in the size of the state: not for every op in production.

use super::inode::Body;
use super::MetaState;
use crate::path::MAX_NAME_LEN;
use std::collections::BTreeSet;
use tierpool_types::{Error, InodeId, Result};

fn fail(what: String) -> Result<()> {
    Err(Error::internal(format!("metadata invariant broken: {what}")))
}

impl MetaState {
    /// Checks every invariant listed in the module docs of `state.rs`; the
    /// error names the first one found broken.
    pub fn check_invariants(&self) -> Result<()> {
        if !self.initialised {
            if !self.inodes.is_empty() || !self.workers.is_empty() || !self.pending_gc.is_empty() {
                return fail("an uninitialised state holds data".into());
            }
            return Ok(());
        }
        self.check_tree()?;
        for i in self.inodes.keys().chain(&self.pending_gc) {
            if i.0 == 0 || i.0 >= self.next_inode {
                return fail(format!("inode {i} is not below next_inode {}", self.next_inode));
            }
        }
        if let Some(i) = self.pending_gc.iter().find(|i| self.inodes.contains_key(i)) {
            return fail(format!("inode {i} is both live and pending garbage collection"));
        }
        self.check_workers()
    }

    /// Every live inode is reached from the root exactly once, through entries
    /// that match its back link; files carry one checksum per chunk.
    fn check_tree(&self) -> Result<()> {
        match self.inodes.get(&InodeId::ROOT) {
            Some(root) if root.is_dir() && root.parent == InodeId::ROOT => {}
            _ => return fail("the root is missing or not a directory".into()),
        }
        let mut seen = BTreeSet::from([InodeId::ROOT]);
        let mut queue = vec![InodeId::ROOT];
        while let Some(dir) = queue.pop() {
            for (name, c) in self.children(dir).into_iter().flatten() {
                let Some(n) = self.inodes.get(c) else { return fail(format!("entry {name} names dead inode {c}")) };
                if !seen.insert(*c) {
                    return fail(format!("inode {c} is reachable twice"));
                }
                if n.parent != dir || n.name != *name {
                    return fail(format!("inode {c} links back to {}/{}", n.parent, n.name));
                }
                if name.is_empty()
                    || name == "."
                    || name == ".."
                    || name.contains(['/', '\0'])
                    || name.len() > MAX_NAME_LEN
                {
                    return fail(format!("bad entry name {name:?}"));
                }
                if let Body::Region { chunk_size, .. } = &n.body {
                    if *chunk_size == 0 {
                        return fail(format!("region {c} has chunk size 0"));
                    }
                }
                if let Body::File { size, chunk_size, checksums } = &n.body {
                    if *chunk_size == 0 || checksums.len() as u64 != size.div_ceil(*chunk_size) {
                        return fail(format!("file {c} has {} checksums for {size} bytes", checksums.len()));
                    }
                }
                queue.push(*c);
            }
        }
        if seen.len() != self.inodes.len() {
            return fail(format!("{} inodes are live but unreachable", self.inodes.len() - seen.len()));
        }
        Ok(())
    }

    fn check_workers(&self) -> Result<()> {
        for (id, w) in &self.workers {
            if w.id != *id || u64::from(id.0) >= self.next_worker_id {
                return fail(format!("worker {id} has record id {} or is not below next_worker_id", w.id));
            }
        }
        if !self.workers.is_empty() {
            for p in 0..self.table.partitions() {
                if !self.table.owner(p).is_some_and(|w| self.workers.contains_key(&w)) {
                    return fail(format!("partition {p} is not owned by a known worker"));
                }
            }
        }
        Ok(())
    }
}
