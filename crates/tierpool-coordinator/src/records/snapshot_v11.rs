//! Snapshot version 11: version 10, the checkpoints of regions and the
//! regions whose restore has not finished.
//!
//! Version 10 is nested untouched, holding every snapshot but the
//! checkpoints: a state without checkpoints is exactly what version 10
//! wrote, with the maps empty. Writers of versions before 11 refuse a
//! state with checkpoints rather than store another state.
//!
//! Frozen once released.

use super::frozen::{corrupt, priority, AttrsV1, ChunkRefV1};
use super::log_v6::{placement_code, placement_of};
use super::snapshot_v10::{SnapV10, StateV10};
use super::snapshot_v2::OwnerV2;
use super::snapshot_v9::StateV9;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{Frozen, FrozenBody, MetaState, Owner, Snapshot, StateParts, StateView};
use tierpool_types::{ChunkAttrs, ChunkRef, InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV11 {
    pub lsn: u64,
    pub state: StateV11,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV11 {
    pub v10: StateV10,
    /// (path, name) -> a region's checkpoint.
    pub checkpoints: BTreeMap<(String, String), CheckpointV11>,
    /// Region id -> the checkpoint (path, name) its unfinished restore brings back.
    pub restoring: BTreeMap<u64, (String, String)>,
}

/// A region as a checkpoint froze it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointV11 {
    pub created: u64,
    pub id: u64,
    pub mode: u32,
    pub owner: OwnerV2,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    pub attrs: AttrsV1,
    pub replicas: u8,
    /// As version 7 codes it (0 hash, 1 local, 2 round-robin, 3 local-only).
    pub placement: u8,
    pub size: u64,
    pub chunk_size: u64,
    pub chunks: Vec<(ChunkRefV1, Option<u32>)>,
}

impl CheckpointV11 {
    fn of(snap: &Snapshot) -> Option<CheckpointV11> {
        let f = &snap.root;
        let FrozenBody::Region { size, chunk_size, chunks } = &f.body else { return None };
        Some(CheckpointV11 {
            created: snap.created,
            id: f.id.0,
            mode: f.mode,
            owner: OwnerV2 { uid: f.owner.uid, gid: f.owner.gid },
            atime: f.atime,
            mtime: f.mtime,
            ctime: f.ctime,
            attrs: f.attrs.into(),
            replicas: f.replicas,
            placement: placement_code(f.placement),
            size: *size,
            chunk_size: *chunk_size,
            chunks: chunks.iter().map(|r| (ChunkRefV1::from(*r), r.home)).collect(),
        })
    }

    fn into_snapshot(self) -> Result<Snapshot> {
        let chunks = self.chunks.into_iter().map(|(r, home)| ChunkRef { home, ..ChunkRef::from(r) }).collect();
        let root = Frozen {
            id: InodeId(self.id),
            mode: self.mode,
            owner: Owner { uid: self.owner.uid, gid: self.owner.gid },
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            attrs: ChunkAttrs { priority: priority(self.attrs.priority)?, pinned: self.attrs.pinned },
            replicas: self.replicas,
            placement: placement_of(self.placement)?,
            body: FrozenBody::Region { size: self.size, chunk_size: self.chunk_size, chunks },
        };
        Ok(Snapshot { created: self.created, root })
    }
}

impl StateV11 {
    pub fn from_view(s: &StateView<'_>) -> StateV11 {
        let (mut snapshots, mut checkpoints) = (BTreeMap::new(), BTreeMap::new());
        for (k, snap) in s.snapshots {
            match CheckpointV11::of(snap) {
                Some(c) => {
                    checkpoints.insert(k.clone(), c);
                }
                None => {
                    snapshots.insert(k.clone(), SnapV10 { created: snap.created, root: (&snap.root).into() });
                }
            }
        }
        StateV11 {
            v10: StateV10 { v9: StateV9::from_view(s), snapshots },
            checkpoints,
            restoring: s.restoring.iter().map(|(id, k)| (id.0, k.clone())).collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's parts, not yet checked.
    pub fn into_parts(self) -> Result<StateParts> {
        let StateV11 { v10, checkpoints, restoring } = self;
        let mut parts = v10.into_parts()?;
        for (k, c) in checkpoints {
            parts.snapshots.insert(k, c.into_snapshot()?);
        }
        parts.restoring = restoring.into_iter().map(|(id, k)| (InodeId(id), k)).collect();
        Ok(parts)
    }
}

/// Whether a state holds checkpoints of regions or restores of them
/// (which versions before 11 cannot store).
pub(super) fn checkpoints(s: &StateView<'_>) -> bool {
    !s.restoring.is_empty() || s.snapshots.values().any(|snap| matches!(snap.root.body, FrozenBody::Region { .. }))
}
