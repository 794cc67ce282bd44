//! Placement policies: the partition a writer puts a chunk in (its home)
//! when its file's policy is not `hash`.
//!
//! A home is a partition whose first replica (slot `p`, `p < P`) the chosen
//! worker owns, so the chunk's first copy lands there and its other
//! copies on the partition's other slots, as any chunk's. Among a worker's
//! partitions the chunk's hash picks one, so one writer's chunks spread
//! over all of its worker's partitions (and move, when the pool changes
//! shape, a partition at a time like every other chunk).
//!
//! - `local` and `local-only`: a worker on the writer's host, else (for
//!   `local`) one in its rack, else the hashed partition (`local`) or no
//!   home at all (`local-only`: [`NoWorkerHere`]).
//! - `round-robin`: the workers owning first replicas, in id order, deal
//!   the chunks of a file in turn from a start the inode hashes to.

use crate::hash::partition_of;
use crate::PartitionTable;
use tierpool_types::{InodeId, Placement, WorkerId};

/// The workers near the writer: on its host, and in its rack.
#[derive(Clone, Debug, Default)]
pub struct Near {
    pub host: Vec<WorkerId>,
    pub rack: Vec<WorkerId>,
}

/// A `local-only` chunk's writer has no worker on its host.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NoWorkerHere;

/// The home of chunk `index` of `inode` written under `policy` (`None`:
/// its hashed partition).
pub fn home(
    policy: Placement,
    table: &PartitionTable,
    near: &Near,
    inode: InodeId,
    index: u64,
) -> Result<Option<u32>, NoWorkerHere> {
    let pick = |workers: &[WorkerId]| {
        let parts = first_replicas_of(table, workers);
        (!parts.is_empty()).then(|| parts[partition_of(inode, index, parts.len() as u32) as usize])
    };
    Ok(match policy {
        Placement::Hash => None,
        Placement::Local => pick(&near.host).or_else(|| pick(&near.rack)),
        Placement::LocalOnly => Some(pick(&near.host).ok_or(NoWorkerHere)?),
        Placement::RoundRobin => {
            let mut owners: Vec<WorkerId> = (0..table.partitions()).filter_map(|p| table.owner(p)).collect();
            owners.sort_unstable();
            owners.dedup();
            if owners.is_empty() {
                return Ok(None);
            }
            let n = owners.len() as u64;
            let start = u64::from(partition_of(inode, 0, n as u32));
            pick(&[owners[((start + index % n) % n) as usize]])
        }
    })
}

/// The partitions whose first replica one of `workers` owns, in order.
fn first_replicas_of(table: &PartitionTable, workers: &[WorkerId]) -> Vec<u32> {
    if workers.is_empty() {
        return Vec::new();
    }
    (0..table.partitions()).filter(|p| table.owner(*p).is_some_and(|w| workers.contains(&w))).collect()
}
