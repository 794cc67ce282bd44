//! Orphans: chunks a worker stores that nothing will ever read or publish,
//! left by writers that died before they committed (a `put` killed
//! mid-stream, a crashed mount's unpublished versions) or by peers that
//! stored chunks under ids they were never given.
//!
//! A chunk is kept while anything may still want it:
//! - it is a version a live file or region references, or a snapshot
//!   keeps, or garbage that collection will delete anyway (pending);
//! - a client session holds its inode open or is writing it (renewing
//!   its hold or write lease);
//! - its inode or version id was reserved less than one hold period ago
//!   (a new writer has not renewed yet; after a restart every id counts as
//!   reserved at start, so nothing is judged until clients renewed).
//!
//! Everything else is an orphan. Its reserved id, if it could still be
//! published (a dead inode never committed, a fresh version of a live
//! file), is retired in the same step as the judgement, so a writer that
//! was given up on but comes back can never publish chunks that were deleted.
//!
//! Invariant (property-tested): a chunk that is referenced, pending, held
//! or recently reserved is never judged an orphan.

use crate::{Body, MetaState};
use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;
use tierpool_types::{ChunkKey, InodeId};

/// What becomes of one stored chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Delete it; retire this id first (so it is never published).
    Orphan {
        retire: Option<u64>,
    },
}

/// Reserved id ranges younger than one hold period.
#[derive(Debug)]
pub struct Reservations {
    period: Duration,
    /// (when, first id, end id) in the order reserved.
    recent: VecDeque<(Duration, u64, u64)>,
}

impl Reservations {
    /// Every id below `next_id` counts as reserved at `now` (the engine's start).
    pub fn new(period: Duration, next_id: u64, now: Duration) -> Reservations {
        Reservations { period, recent: VecDeque::from([(now, 0, next_id)]) }
    }

    pub fn reserved(&mut self, first: u64, count: u64, now: Duration) {
        self.recent.push_back((now, first, first.saturating_add(count)));
    }

    /// Whether `id` was reserved less than one period before `now`.
    pub fn is_recent(&mut self, id: u64, now: Duration) -> bool {
        while self.recent.front().is_some_and(|(t, _, _)| now.saturating_sub(*t) >= self.period) {
            self.recent.pop_front();
        }
        self.recent.iter().any(|(_, a, b)| (*a..*b).contains(&id))
    }
}

/// The verdict on stored chunk `k`. `held` are the inodes held now.
pub fn judge(s: &MetaState, held: &BTreeSet<InodeId>, recent: &mut dyn FnMut(u64) -> bool, k: ChunkKey) -> Verdict {
    let keep_or = |retire: Option<u64>| Verdict::Orphan { retire };
    if held.contains(&k.inode) {
        return Verdict::Keep;
    }
    if s.keeps(&k) || s.pending_chunks().contains(&k) {
        return Verdict::Keep;
    }
    let Some(n) = s.view().inodes.get(&k.inode) else {
        if s.pending_gc().contains(&k.inode) || recent(k.inode.0) {
            return Verdict::Keep;
        }
        if s.keeps_inode(k.inode) {
            // A gone file some snapshot still reads: its id is not to be retired.
            return keep_or(None);
        }
        let retirable = k.inode.0 < s.next_inode().0 && !s.retired().contains(&k.inode.0);
        return keep_or(retirable.then_some(k.inode.0));
    };
    match &n.body {
        Body::File { chunks, .. } => {
            let referenced = chunks.get(k.index as usize).is_some_and(|r| r.is_stored() && r.version == k.version);
            if referenced || s.pending_chunks().contains(&k) || recent(k.version) {
                return Verdict::Keep;
            }
            keep_or(retirable_version(s, k.version))
        }
        Body::Region { size, chunk_size } => {
            if (k.version == 1 && k.index < size.div_ceil((*chunk_size).max(1))) || recent(k.version) {
                return Verdict::Keep;
            }
            // A checkpoint's copy not (yet) recorded: retire its version so
            // a late checkpoint naming it fails.
            keep_or(retirable_version(s, k.version))
        }
        _ => keep_or(None),
    }
}

/// `version`, if it is a version id that could still be published (handed
/// out, not retired, not an inode's id). Version 1 comes with a file's
/// commit or a region's allocation: nothing publishes it later.
fn retirable_version(s: &MetaState, version: u64) -> Option<u64> {
    let retirable = version != 1 && version < s.next_inode().0 && !s.retired().contains(&version);
    let retirable = retirable && !s.view().inodes.contains_key(&InodeId(version));
    let retirable = retirable && !s.keeps_inode(InodeId(version));
    retirable.then_some(version)
}
