//! Snapshot version 8: version 7 and under-stores (the attached
//! directories, and the object each file beneath them mirrors).
//!
//! Version 7 is nested untouched: a state without attachments is exactly
//! what version 7 wrote, with both maps empty. A chunk below is a chunk of
//! version `u64::MAX` in the version 7 chunk lists.
//!
//! Writers of versions before 8 refuse a state with attachments rather
//! than store another state.
//!
//! Frozen once released.

use super::frozen::corrupt;
use super::log_v7::AttachmentV7;
use super::snapshot_v7::StateV7;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{MetaState, Origin, StateParts, StateView};
use tierpool_types::{InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV8 {
    pub lsn: u64,
    pub state: StateV8,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginV8 {
    pub attach: u64,
    pub key: String,
    pub size: u64,
    pub mtime: u64,
    pub etag: String,
    pub dirty: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV8 {
    pub v7: StateV7,
    /// Directory inode -> the under-store attached there.
    pub attachments: BTreeMap<u64, AttachmentV7>,
    /// File inode -> the object it mirrors.
    pub origins: BTreeMap<u64, OriginV8>,
}

impl StateV8 {
    pub fn from_view(s: &StateView<'_>) -> StateV8 {
        StateV8 {
            v7: StateV7::from_view(s),
            attachments: s.attachments.iter().map(|(id, a)| (id.0, a.into())).collect(),
            origins: (s.inodes.iter())
                .filter_map(|(id, n)| n.origin.as_ref().map(|o| (id.0, o)))
                .map(|(id, o)| {
                    let o = OriginV8 {
                        attach: o.attach.0,
                        key: o.key.clone(),
                        size: o.size,
                        mtime: o.mtime,
                        etag: o.etag.clone(),
                        dirty: o.dirty,
                    };
                    (id, o)
                })
                .collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    pub fn into_parts(self) -> Result<StateParts> {
        let StateV8 { v7, attachments, origins } = self;
        let mut parts = v7.into_parts()?;
        for (id, a) in attachments {
            parts.attachments.insert(InodeId(id), a.try_into()?);
        }
        for (id, o) in origins {
            let n = parts.inodes.get_mut(&InodeId(id)).ok_or_else(|| corrupt(format!("origin of dead inode {id}")))?;
            let OriginV8 { attach, key, size, mtime, etag, dirty } = o;
            n.origin = Some(Origin { attach: InodeId(attach), key, size, mtime, etag, dirty, mode: None });
        }
        Ok(parts)
    }
}

/// Whether a state holds under-stores (which versions before 8 cannot store).
pub(super) fn attached(s: &StateView<'_>) -> bool {
    !s.attachments.is_empty() || s.inodes.values().any(|n| n.origin.is_some())
}
