//! Placement: which worker holds a chunk.
//!
//! A chunk `(inode, index)` hashes to one of `P` partitions, `P` fixed when the
//! pool is created. The [`PartitionTable`] maps each partition to its owner.
//! Every version of a chunk lands in the same partition, so copy on write stays
//! on one worker, and elasticity moves whole partitions, never rehashes chunks.
//!
//! Pure: no I/O, no clock, no randomness.

mod apart;
mod deal;
mod hash;
pub mod plan;
mod table;

pub use deal::{slot_targets, target_counts, weight};
pub use hash::partition_of;
pub use table::PartitionTable;
