//! Snapshot version 7: version 6 and placement (the policy of each path
//! that has one other than `hash`, the home partition of each chunk a
//! policy placed, replicas kept apart by rack).
//!
//! Version 6 is nested untouched: a state without placement is exactly
//! what version 6 wrote, with `spread` 0 and the maps empty. The homes
//! of live chunks and of replaced versions awaiting collection are kept
//! beside the version 6 chunk lists and key sets, which hold the same
//! chunks without them.
//!
//! Writers of versions before 7 refuse a state with placement rather than
//! store another state.
//!
//! Frozen once released.

use super::frozen::{corrupt, ChunkKeyV1};
use super::log_v6::{placement_code, placement_of, spread_code, spread_of};
use super::snapshot_v6::StateV6;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{Body, MetaState, StateParts, StateView};
use tierpool_types::{ChunkKey, InodeId, Placement, Result, Spread};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotV7 {
    pub lsn: u64,
    pub state: StateV7,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateV7 {
    pub v6: StateV6,
    /// What replicas are kept apart by: 0 hosts, 1 racks.
    pub spread: u8,
    /// Inode -> its placement policy (1 local, 2 round-robin, 3
    /// local-only), for inodes with one other than hash (0).
    pub placements: BTreeMap<u64, u8>,
    /// (file inode, chunk index) -> the home partition of that chunk, for
    /// chunks a policy placed.
    pub homes: BTreeMap<(u64, u64), u32>,
    /// Replaced chunk versions awaiting collection that have a home.
    pub pending_homes: BTreeMap<ChunkKeyV1, u32>,
}

impl StateV7 {
    pub fn from_view(s: &StateView<'_>) -> StateV7 {
        let mut homes = BTreeMap::new();
        for (id, n) in s.inodes {
            if let Body::File { chunks, .. } = &n.body {
                for (i, r) in chunks.iter().enumerate() {
                    if let Some(h) = r.home {
                        homes.insert((id.0, i as u64), h);
                    }
                }
            }
        }
        StateV7 {
            v6: StateV6::from_view(s),
            spread: spread_code(s.spread),
            placements: (s.inodes.iter())
                .filter(|(_, n)| n.placement != Placement::Hash)
                .map(|(id, n)| (id.0, placement_code(n.placement)))
                .collect(),
            homes,
            pending_homes: (s.pending_chunks.iter())
                .filter_map(|k| k.home.map(|h| (ChunkKeyV1::from(*k), h)))
                .collect(),
        }
    }

    pub fn into_state(self) -> Result<MetaState> {
        MetaState::from_parts(self.into_parts()?).map_err(corrupt)
    }

    /// The state's fields, not yet checked as a whole (a later version adds to them).
    pub fn into_parts(self) -> Result<StateParts> {
        let StateV7 { v6, spread, placements, homes, pending_homes } = self;
        let mut parts = v6.into_parts()?;
        parts.spread = spread_of(spread)?;
        let partitions = parts.table.partitions();
        let home_ok = |h: u32| {
            if h < partitions && h <= ChunkKey::MAX_HOME {
                Ok(h)
            } else {
                Err(corrupt(format!("home partition {h} in a pool of {partitions} partitions")))
            }
        };
        for (id, code) in placements {
            let p = placement_of(code)?;
            if p == Placement::Hash {
                return Err(corrupt(format!("inode {id} listed with the default placement")));
            }
            let n =
                parts.inodes.get_mut(&InodeId(id)).ok_or_else(|| corrupt(format!("placement of dead inode {id}")))?;
            n.placement = p;
        }
        for ((id, index), h) in homes {
            let n = parts.inodes.get_mut(&InodeId(id)).ok_or_else(|| corrupt(format!("home of dead inode {id}")))?;
            let Body::File { chunks, .. } = &mut n.body else {
                return Err(corrupt(format!("home of a chunk of inode {id}, which is not a file")));
            };
            match chunks.get_mut(index as usize) {
                Some(r) if r.is_stored() => r.home = Some(home_ok(h)?),
                _ => return Err(corrupt(format!("home of chunk {index} of inode {id}, which holds none"))),
            }
        }
        for (k, h) in pending_homes {
            let key = ChunkKey::from(k);
            if !parts.pending_chunks.remove(&key) {
                return Err(corrupt(format!("home of chunk {key}, which awaits no collection")));
            }
            parts.pending_chunks.insert(ChunkKey { home: Some(home_ok(h)?), ..key });
        }
        Ok(parts)
    }
}

/// Whether a state holds placement (which versions before 7 cannot store).
pub(super) fn placed(s: &StateView<'_>) -> bool {
    s.spread != Spread::Host
        || s.pending_chunks.iter().any(|k| k.home.is_some())
        || s.inodes.values().any(|n| {
            n.placement != Placement::Hash
                || matches!(&n.body, Body::File { chunks, .. } if chunks.iter().any(|r| r.home.is_some()))
        })
}
