//! Snapshot version 13: version 12 and the write modes files beneath
//! attachments have of their own.
//!
//! Version 12 is nested untouched: a state where no file has a mode of its
//! own is exactly what version 12 wrote. Writers of versions before 13
//! refuse a state with such modes rather than store another state.
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::log_v7::{mode_code, mode_of};
use super::snapshot_v12::StateV12;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{MetaState, StateParts, StateView};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV13 {
    pub lsn: u64,
    pub state: StateV13,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV13 {
    pub v12: StateV12,
    /// File inode -> its own write mode (log version 7's codes).
    pub modes: BTreeMap<u64, u8>,
}

impl StateV13 {
    pub fn from_view(s: &StateView<'_>) -> StateV13 {
        let modes = (s.inodes.iter()).filter_map(|(id, n)| Some((id.0, mode_code(n.origin.as_ref()?.mode?)))).collect();
        StateV13 { v12: StateV12::from_view(s), modes }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    pub fn into_parts(self) -> Result<StateParts> {
        let StateV13 { v12, modes } = self;
        let mut parts = v12.v11.into_parts()?;
        parts.tasks = v12.tasks;
        for (id, code) in modes {
            let origin = (parts.inodes.get_mut(&InodeId(id)))
                .and_then(|n| n.origin.as_mut())
                .ok_or_else(|| corrupt(format!("write mode of inode {id}, which is no file beneath an attachment")))?;
            origin.mode = Some(mode_of(code)?);
        }
        Ok(parts)
    }
}

/// Whether a state has files with write modes of their own (which versions
/// before 13 cannot store).
pub(super) fn own_modes(s: &StateView<'_>) -> bool {
    s.inodes.values().any(|n| n.origin.as_ref().is_some_and(|o| o.mode.is_some()))
}
