//! Snapshot version 6: version 5 and replication (slots of R replicas per
//! partition, workers down, the copies each path keeps).
//!
//! Version 5 is nested untouched. With one replica per partition (R = 1)
//! it is exactly what version 5 wrote; `replicas` is 1 and `slots`,
//! `moving_slots` and `goal_slots` are empty (copies set per path are
//! still kept in `inode_replicas`: they count once the pool's replication
//! is raised, before any worker joins).
//!
//! With R > 1 the partition table, its moves and the goal are indexed by
//! slot (R * P entries, slot `k * P + p` is replica `k` of partition `p`)
//! and stored whole here, in `slots`, `moving_slots` and `goal_slots`. The
//! nested table then holds the owners of replica 0 (slots `0..P`) under
//! the table's epoch, with no moves and no goal: a version 4 table of one
//! replica per partition accepts any such projection (a slot of replica 0
//! is unowned while its worker is down), whereas moves from no owner (a
//! repair copying from a sibling slot) have no version 4 form. The reader
//! requires the projection to match `slots` and takes the table from here.
//!
//! Writers of versions before 6 refuse a state with replication (R > 1, a
//! worker down, copies set per path) rather than store another state.
//!
//! Frozen once released.

use super::frozen::{corrupt, TableV1};
use super::snapshot_v5::StateV5;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tierpool_meta::{MetaState, StateParts, StateView, MAX_REPLICAS};
use tierpool_placement::PartitionTable;
use tierpool_types::{InodeId, Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV6 {
    pub lsn: u64,
    pub state: StateV6,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV6 {
    /// Everything version 5 holds; with R > 1 its table is replica 0's.
    pub v5: StateV5,
    /// Slots per partition (R, 1..=8).
    pub replicas: u8,
    /// With R > 1, the owner of every slot (R * P); empty with R = 1.
    pub slots: Vec<Option<u32>>,
    /// With R > 1, slot -> the worker it is being copied to; empty with R = 1.
    pub moving_slots: BTreeMap<u32, u32>,
    /// With R > 1, the owner each slot should end with (none: left
    /// unowned); empty when there, and with R = 1.
    pub goal_slots: Vec<Option<u32>>,
    /// Workers down (silent past their grace period).
    pub down: BTreeSet<u32>,
    /// Inode -> copies per chunk it keeps, for inodes with a setting of
    /// their own (not 0, the pool's).
    pub inode_replicas: BTreeMap<u64, u8>,
}

impl StateV6 {
    pub fn from_view(s: &StateView<'_>) -> StateV6 {
        let mut v5 = StateV5::from_view(s);
        let t = s.table;
        let (mut slots, mut moving_slots, mut goal_slots) = (Vec::new(), BTreeMap::new(), Vec::new());
        if t.replicas() > 1 {
            slots = t.owners().iter().map(|o| o.map(|w| w.0)).collect();
            let first = slots[..t.partitions() as usize].to_vec();
            v5.v4.table = TableV1 { epoch: t.epoch(), owners: first };
            moving_slots = std::mem::take(&mut v5.v4.moving);
            goal_slots = std::mem::take(&mut v5.v4.goal);
        }
        StateV6 {
            v5,
            replicas: t.replicas(),
            slots,
            moving_slots,
            goal_slots,
            down: s.down.iter().map(|w| w.0).collect(),
            inode_replicas: (s.inodes.iter())
                .filter(|(_, n)| n.replicas != 0)
                .map(|(id, n)| (id.0, n.replicas))
                .collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields, not yet checked as a whole.
    pub fn into_parts(self) -> Result<StateParts> {
        let StateV6 { v5, replicas, slots, moving_slots, goal_slots, down, inode_replicas } = self;
        let (epoch, first) = (v5.v4.table.epoch, v5.v4.table.owners.clone());
        let mut parts = v5.into_parts()?;
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(corrupt(format!("a pool keeping {replicas} replicas per partition")));
        }
        if replicas == 1 {
            if !slots.is_empty() || !moving_slots.is_empty() || !goal_slots.is_empty() {
                return Err(corrupt("slots of replicas in a table of one replica per partition"));
            }
        } else {
            if slots.len() != first.len() * usize::from(replicas) || slots[..first.len()] != first[..] {
                return Err(corrupt("the slots of a replicated table do not extend its first replicas"));
            }
            if !parts.table.moving().is_empty() || !parts.goal.is_empty() {
                return Err(corrupt("moves or a goal outside the slots of a replicated table"));
            }
            parts.table =
                PartitionTable::from_slots(epoch, replicas, slots.into_iter().map(|o| o.map(WorkerId)).collect())
                    .ok_or_else(|| corrupt("a worker holding two replicas of a partition"))?
                    .with_moves(moving_slots.into_iter().map(|(s, w)| (s, WorkerId(w))).collect())
                    .ok_or_else(|| {
                        corrupt("a move of a slot with nothing to copy from, or to a holder of its partition")
                    })?;
            parts.goal = goal_slots.into_iter().map(|g| g.map(WorkerId)).collect();
        }
        parts.down = down.into_iter().map(WorkerId).collect();
        for (id, n) in inode_replicas {
            if n == 0 || n > MAX_REPLICAS {
                return Err(corrupt(format!("inode {id} keeps {n} copies of each chunk")));
            }
            let inode =
                parts.inodes.get_mut(&InodeId(id)).ok_or_else(|| corrupt(format!("copies of dead inode {id}")))?;
            inode.replicas = n;
        }
        Ok(parts)
    }
}
