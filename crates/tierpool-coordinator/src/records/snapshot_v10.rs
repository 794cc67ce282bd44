//! Snapshot version 10: version 9 and the pool's snapshots (named, frozen
//! trees of metadata whose chunk versions are kept).
//!
//! Version 9 is nested untouched: a state without snapshots is exactly
//! what version 9 wrote, with the map empty. Writers of versions before 10
//! refuse a state with snapshots rather than store another state.
//!
//! Frozen once released.

use super::frozen::{corrupt, priority, AttrsV1, ChunkRefV1, KindV1};
use super::log_v6::{placement_code, placement_of};
use super::snapshot_v2::OwnerV2;
use super::snapshot_v9::StateV9;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{Frozen, FrozenBody, MetaState, Owner, Snapshot, StateParts, StateView};
use tierpool_types::{ChunkAttrs, ChunkRef, InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV10 {
    pub lsn: u64,
    pub state: StateV10,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV10 {
    pub v9: StateV9,
    /// (path, name) -> the snapshot.
    pub snapshots: BTreeMap<(String, String), SnapV10>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapV10 {
    pub created: u64,
    pub root: FrozenV10,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenV10 {
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
    pub body: FrozenBodyV10,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FrozenBodyV10 {
    File { size: u64, chunk_size: u64, chunks: Vec<(ChunkRefV1, Option<u32>)>, inline: Option<Bytes> },
    Dir { entries: BTreeMap<String, FrozenV10> },
    Symlink { target: String },
    Special { kind: KindV1, rdev: u64 },
}

impl From<&Frozen> for FrozenV10 {
    fn from(f: &Frozen) -> Self {
        let body = match &f.body {
            FrozenBody::File { size, chunk_size, chunks, inline } => FrozenBodyV10::File {
                size: *size,
                chunk_size: *chunk_size,
                chunks: chunks.iter().map(|r| (ChunkRefV1::from(*r), r.home)).collect(),
                inline: inline.clone(),
            },
            FrozenBody::Dir { entries } => {
                FrozenBodyV10::Dir { entries: entries.iter().map(|(n, e)| (n.clone(), e.into())).collect() }
            }
            FrozenBody::Symlink { target } => FrozenBodyV10::Symlink { target: target.clone() },
            FrozenBody::Special { kind, rdev } => FrozenBodyV10::Special { kind: (*kind).into(), rdev: *rdev },
            FrozenBody::Region { .. } => unreachable!("version 10 is never given a checkpoint (version 11 holds them)"),
        };
        FrozenV10 {
            id: f.id.0,
            mode: f.mode,
            owner: OwnerV2 { uid: f.owner.uid, gid: f.owner.gid },
            atime: f.atime,
            mtime: f.mtime,
            ctime: f.ctime,
            attrs: f.attrs.into(),
            replicas: f.replicas,
            placement: placement_code(f.placement),
            body,
        }
    }
}

impl TryFrom<FrozenV10> for Frozen {
    type Error = tierpool_types::Error;
    fn try_from(f: FrozenV10) -> Result<Self> {
        let body = match f.body {
            FrozenBodyV10::File { size, chunk_size, chunks, inline } => FrozenBody::File {
                size,
                chunk_size,
                chunks: chunks.into_iter().map(|(r, home)| ChunkRef { home, ..ChunkRef::from(r) }).collect(),
                inline,
            },
            FrozenBodyV10::Dir { entries } => FrozenBody::Dir {
                entries: entries.into_iter().map(|(n, e)| Ok((n, Frozen::try_from(e)?))).collect::<Result<_>>()?,
            },
            FrozenBodyV10::Symlink { target } => FrozenBody::Symlink { target },
            FrozenBodyV10::Special { kind, rdev } => FrozenBody::Special { kind: kind.into(), rdev },
        };
        Ok(Frozen {
            id: InodeId(f.id),
            mode: f.mode,
            owner: Owner { uid: f.owner.uid, gid: f.owner.gid },
            atime: f.atime,
            mtime: f.mtime,
            ctime: f.ctime,
            attrs: ChunkAttrs { priority: priority(f.attrs.priority)?, pinned: f.attrs.pinned },
            replicas: f.replicas,
            placement: placement_of(f.placement)?,
            body,
        })
    }
}

impl StateV10 {
    pub fn from_view(s: &StateView<'_>) -> StateV10 {
        StateV10 {
            v9: StateV9::from_view(s),
            snapshots: (s.snapshots.iter())
                .map(|(k, snap)| (k.clone(), SnapV10 { created: snap.created, root: (&snap.root).into() }))
                .collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields, before their invariants are checked.
    pub fn into_parts(self) -> Result<StateParts> {
        let StateV10 { v9, snapshots } = self;
        let mut parts = v9.into_parts()?;
        for (k, snap) in snapshots {
            parts.snapshots.insert(k, Snapshot { created: snap.created, root: snap.root.try_into()? });
        }
        Ok(parts)
    }
}

/// Whether a state holds snapshots (which versions before 10 cannot store).
pub(super) fn snapshots(s: &StateView<'_>) -> bool {
    !s.snapshots.is_empty()
}
