//! Snapshot version 5: version 4 and the speeds of workers slower than a
//! healthy one (the percent of its bandwidth each delivers).
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::snapshot_v4::StateV4;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{MetaState, StateParts, StateView};
use tierpool_types::{Result, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV5 {
    pub lsn: u64,
    pub state: StateV5,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV5 {
    pub v4: StateV4,
    /// Worker -> percent of a healthy worker's bandwidth (1..=99).
    pub speeds: BTreeMap<u32, u8>,
}

impl StateV5 {
    pub fn from_view(s: &StateView<'_>) -> StateV5 {
        StateV5 { v4: StateV4::from_view(s), speeds: s.speeds.iter().map(|(w, p)| (w.0, *p)).collect() }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields (one replica per partition, no worker down:
    /// version 5 knows no replication).
    pub fn into_parts(self) -> Result<StateParts> {
        let mut parts = self.v4.into_parts()?;
        parts.speeds = self.speeds.into_iter().map(|(w, p)| (WorkerId(w), p)).collect();
        Ok(parts)
    }
}
