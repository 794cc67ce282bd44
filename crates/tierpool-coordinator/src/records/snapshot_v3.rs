//! Snapshot version 3: version 2 and the retired ids (reserved ids whose
//! writer was given up on, see `MetaOp::Retire`).
//!
//! Frozen once released. Inodes keep their version 2 shape.

use super::frozen::{corrupt, workers_from_v1, workers_to_v1, ChunkKeyV1, TableV1, WorkerRecordV1};
use super::snapshot_v2::{inode_from_v2, inode_to_v2, InodeV2};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{MetaState, StateParts, StateView};
use tierpool_types::{InodeId, Result, Spread};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV3 {
    pub lsn: u64,
    pub state: StateV3,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV3 {
    pub initialised: bool,
    pub inodes: BTreeMap<u64, InodeV2>,
    pub next_inode: u64,
    pub workers: BTreeMap<u32, WorkerRecordV1>,
    pub next_worker_id: u64,
    pub table: TableV1,
    pub pending_gc: BTreeSet<u64>,
    pub pending_chunks: BTreeSet<ChunkKeyV1>,
    pub retired: BTreeSet<u64>,
}

impl StateV3 {
    /// Version 3 has no moves: a state with some has no version 3 form.
    pub fn from_view(s: &StateView<'_>) -> Result<StateV3> {
        if !s.table.moving().is_empty() || !s.goal.is_empty() || !s.draining.is_empty() || !s.removed.is_empty() {
            return Err(corrupt("a state moving partitions has no snapshot version 3 form"));
        }
        Ok(StateV3 {
            initialised: s.initialised,
            inodes: s.inodes.iter().map(|(id, n)| (id.0, inode_to_v2(n))).collect(),
            next_inode: s.next_inode,
            workers: workers_to_v1(s.workers),
            next_worker_id: s.next_worker_id,
            table: s.table.into(),
            pending_gc: s.pending_gc.iter().map(|i| i.0).collect(),
            pending_chunks: s.pending_chunks.iter().map(|k| (*k).into()).collect(),
            retired: s.retired.clone(),
        })
    }

    pub fn into_state(self) -> Result<MetaState> {
        let inodes = (self.inodes.into_iter())
            .map(|(id, n)| Ok((InodeId(id), inode_from_v2(n)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        MetaState::from_parts(StateParts {
            down: Default::default(),
            spread: Spread::Host,
            attachments: Default::default(),
            inline: Default::default(),
            snapshots: Default::default(),
            restoring: Default::default(),
            tasks: Default::default(),
            pending_pages: Default::default(),
            initialised: self.initialised,
            inodes,
            next_inode: self.next_inode,
            workers: workers_from_v1(self.workers),
            next_worker_id: self.next_worker_id,
            table: self.table.try_into()?,
            pending_gc: self.pending_gc.into_iter().map(InodeId).collect(),
            pending_chunks: self.pending_chunks.into_iter().map(Into::into).collect(),
            retired: self.retired,
            goal: Vec::new(),
            draining: BTreeSet::new(),
            removed: BTreeSet::new(),
            speeds: Default::default(),
        })
        .map_err(corrupt)
    }
}
