//! Snapshot version 14: version 13 and the region pages of committed
//! transactions not yet written on the workers (log version 16's form).
//!
//! Version 13 is nested untouched: a state with no pages pending is
//! exactly what version 13 wrote. Writers of versions before 14 refuse a
//! state with pages pending rather than store another state.
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::log_v16::{region_of, region_v16, TxRegionV16};
use super::snapshot_v13::StateV13;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{MetaState, StateView};
use tierpool_types::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV14 {
    pub lsn: u64,
    pub state: StateV14,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV14 {
    pub v13: StateV13,
    /// Commit id -> the region pages it wrote, not yet on the workers.
    pub pending: BTreeMap<u64, Vec<TxRegionV16>>,
}

impl StateV14 {
    pub fn from_view(s: &StateView<'_>) -> StateV14 {
        let pending = s.pending_pages.iter().map(|(id, rs)| (*id, rs.iter().map(region_v16).collect())).collect();
        StateV14 { v13: StateV13::from_view(s), pending }
    }

    pub fn into_state(self) -> Result<MetaState> {
        let mut parts = self.v13.into_parts()?;
        parts.pending_pages =
            self.pending.into_iter().map(|(id, rs)| (id, rs.into_iter().map(region_of).collect())).collect();
        MetaState::from_parts(parts).map_err(corrupt)
    }
}

/// Whether a state has region pages pending (which versions before 14 cannot store).
pub(super) fn pending(s: &StateView<'_>) -> bool {
    !s.pending_pages.is_empty()
}
