//! A worker's storage: chunks in MEM, demoted to DISK when MEM is full,
//! promoted back when read often.
//!
//! Layout of this crate:
//! - `eviction`  pure: picks victims (unpinned before pinned, lower priority before higher, then LRU)
//!   and the reclaimable chunks to drop first (oldest mark first);
//! - `store`     the `ChunkStore` trait with `mem` and `disk` implementations and one conformance
//!   suite; `store::disk_io` is the only place that touches the file system;
//! - `config`, `stats`  the manager's public plain data (`TierConfig`, `TierKind`, `TierStats`);
//! - `tiers`     the state behind the manager's lock: budgets, demotion, promotion, attributes,
//!   reclaimable marks; `tiers::room` carries out the plans that make room;
//! - `last_use`  pure: when each inode's chunks were last read or written by a client;
//! - `manager`   `TierManager`: the thread-safe face, reads DISK outside the lock.
//!
//! Dependencies point one way: `manager` -> `tiers` -> `eviction`, `store`; all of them may use
//! `config` and `stats`, which use nothing of this crate.
//!
//! No async runtime: callers on an async runtime use `spawn_blocking` for calls that may touch disk.

mod config;
mod disk_full;
pub mod eviction;
mod last_use;
mod manager;
mod reads;
mod stats;
pub mod store;
mod tiers;

#[cfg(test)]
mod tests;

pub use config::{TierConfig, TierKind};
pub use manager::TierManager;
pub use stats::TierStats;
pub use tiers::Spill;
