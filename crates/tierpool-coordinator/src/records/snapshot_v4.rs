//! Snapshot version 4: version 3 and the moving of partitions (the moves in
//! progress, the goal the table moves toward, the workers being drained
//! and those removed).
//!
//! Frozen once released. Inodes keep their version 2 shape.

use super::frozen::{corrupt, workers_from_v1, workers_to_v1, ChunkKeyV1, TableV1, WorkerRecordV1};
use super::snapshot_v2::{inode_from_v2, inode_to_v2, InodeV2};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{MetaState, StateParts, StateView};
use tierpool_placement::PartitionTable;
use tierpool_types::{InodeId, Result, Spread, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV4 {
    pub lsn: u64,
    pub state: StateV4,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV4 {
    pub initialised: bool,
    pub inodes: BTreeMap<u64, InodeV2>,
    pub next_inode: u64,
    pub workers: BTreeMap<u32, WorkerRecordV1>,
    pub next_worker_id: u64,
    pub table: TableV1,
    pub pending_gc: BTreeSet<u64>,
    pub pending_chunks: BTreeSet<ChunkKeyV1>,
    pub retired: BTreeSet<u64>,
    /// Partition -> the worker it is being copied to.
    pub moving: BTreeMap<u32, u32>,
    /// The owner each partition should end with; empty when there.
    pub goal: Vec<Option<u32>>,
    pub draining: BTreeSet<u32>,
    /// Workers removed from the pool.
    pub removed: BTreeSet<u32>,
}

impl StateV4 {
    pub fn from_view(s: &StateView<'_>) -> StateV4 {
        StateV4 {
            initialised: s.initialised,
            inodes: s.inodes.iter().map(|(id, n)| (id.0, inode_to_v2(n))).collect(),
            next_inode: s.next_inode,
            workers: workers_to_v1(s.workers),
            next_worker_id: s.next_worker_id,
            table: s.table.into(),
            pending_gc: s.pending_gc.iter().map(|i| i.0).collect(),
            pending_chunks: s.pending_chunks.iter().map(|k| (*k).into()).collect(),
            retired: s.retired.clone(),
            moving: s.table.moving().iter().map(|(p, w)| (*p, w.0)).collect(),
            goal: s.goal.iter().map(|g| g.map(|w| w.0)).collect(),
            draining: s.draining.iter().map(|w| w.0).collect(),
            removed: s.removed.iter().map(|w| w.0).collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields (no worker slower than a healthy one: version 4
    /// knows no speeds).
    pub fn into_parts(self) -> Result<StateParts> {
        let inodes = (self.inodes.into_iter())
            .map(|(id, n)| Ok((InodeId(id), inode_from_v2(n)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        Ok(StateParts {
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
            table: PartitionTable::try_from(self.table)?
                .with_moves(self.moving.into_iter().map(|(p, w)| (p, WorkerId(w))).collect())
                .ok_or_else(|| corrupt("a move of a partition without an owner, or to its owner"))?,
            pending_gc: self.pending_gc.into_iter().map(InodeId).collect(),
            pending_chunks: self.pending_chunks.into_iter().map(Into::into).collect(),
            retired: self.retired,
            goal: self.goal.into_iter().map(|g| g.map(WorkerId)).collect(),
            draining: self.draining.into_iter().map(WorkerId).collect(),
            removed: self.removed.into_iter().map(WorkerId).collect(),
            speeds: BTreeMap::new(),
        })
    }
}
