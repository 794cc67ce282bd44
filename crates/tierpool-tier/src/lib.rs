//! A worker's storage: chunks in MEM, demoted to DISK when MEM is full,
//! promoted back when read often.
//!
//! Layout of this crate:
//! - `eviction`  pure: picks victims (unpinned before pinned, lower priority before higher, then LRU);
//! - `store`     the `ChunkStore` trait with `mem` and `disk` implementations and one conformance
//!   suite; `store::disk_io` is the only place that touches the file system;
//! - `tiers`     the state behind the manager's lock: budgets, demotion, promotion, attributes;
//! - `manager`   `TierManager`: the thread-safe face, reads DISK outside the lock.
//!
//! No async runtime: callers on an async runtime use `spawn_blocking` for calls that may touch disk.

pub mod eviction;
mod manager;
pub mod store;
mod tiers;

#[cfg(test)]
mod tests;

pub use manager::{TierConfig, TierKind, TierManager, TierStats};
