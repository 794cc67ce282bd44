//! Snapshot version 12: version 11 and the task ids of committed
//! transactions.
//!
//! Version 11 is nested untouched: a state that remembers no task is
//! exactly what version 11 wrote. Writers of versions before 12 refuse a
//! state with task ids rather than store another state.
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::snapshot_v11::StateV11;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use tierpool_meta::{MetaState, StateView};
use tierpool_types::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV12 {
    pub lsn: u64,
    pub state: StateV12,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV12 {
    pub v11: StateV11,
    /// Task ids of committed transactions.
    pub tasks: BTreeSet<String>,
}

impl StateV12 {
    pub fn from_view(s: &StateView<'_>) -> StateV12 {
        StateV12 { v11: StateV11::from_view(s), tasks: s.tasks.clone() }
    }

    pub fn into_state(self) -> Result<MetaState> {
        let mut parts = self.v11.into_parts()?;
        parts.tasks = self.tasks;
        MetaState::from_parts(parts).map_err(corrupt)
    }
}

/// Whether a state remembers task ids (which versions before 12 cannot store).
pub(super) fn tasks(s: &StateView<'_>) -> bool {
    !s.tasks.is_empty()
}
