//! Snapshot version 9: version 8 and the bytes of small files held inline
//! (their chunk 0 is a version with the inline bit in the version 8 chunk
//! lists).
//!
//! Version 8 is nested untouched: a state without inline files is exactly
//! what version 8 wrote, with the map empty. Writers of versions before 9
//! refuse a state with inline files rather than store another state.
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::snapshot_v8::StateV8;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{MetaState, StateParts, StateView};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV9 {
    pub lsn: u64,
    pub state: StateV9,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV9 {
    pub v8: StateV8,
    /// File inode -> the bytes of its chunk 0, held inline.
    pub inline: BTreeMap<u64, Bytes>,
}

impl StateV9 {
    pub fn from_view(s: &StateView<'_>) -> StateV9 {
        StateV9 { v8: StateV8::from_view(s), inline: s.inline.iter().map(|(id, d)| (id.0, d.clone())).collect() }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields, not yet checked as a whole (a later version adds to them).
    pub fn into_parts(self) -> Result<StateParts> {
        let StateV9 { v8, inline } = self;
        let mut parts = v8.into_parts()?;
        parts.inline = inline.into_iter().map(|(id, d)| (InodeId(id), d)).collect();
        Ok(parts)
    }
}

/// Whether a state holds inline files (which versions before 9 cannot store).
pub(super) fn inline(s: &StateView<'_>) -> bool {
    !s.inline.is_empty()
}
