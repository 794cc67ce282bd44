//! Placement: which worker holds a chunk.
//!
//! A chunk `(inode, index)` hashes to one of `P` partitions, `P` fixed when the
//! pool is created. The [`PartitionTable`] maps each partition to its owner.
//! Every version of a chunk lands in the same partition, so copy on write stays
//! on one worker, and elasticity moves whole partitions, never rehashes chunks.
//!
//! A file's placement policy may put a chunk in another partition than the
//! one it hashes to (its home, recorded with the chunk: see `policy`); the
//! key then names it, and everything else works by partition as before.
//!
//! Pure: no I/O, no clock, no randomness.

mod apart;
mod deal;
mod hash;
mod nearest;
pub mod plan;
mod policy;
mod table;

pub use deal::{slot_targets, target_counts, weight};
pub use hash::{partition_of, partition_of_key};
pub use nearest::{read_classes, Nearness};
pub use policy::{home, Near, NoWorkerHere};
pub use table::PartitionTable;
