//! The coordinator's engine as pure code: liveness, holds, garbage
//! collection and attribute pushes, driven by generated event sequences.

mod attrs;
mod collection;
mod liveness;
mod migration;
mod orphans;
mod region_pages;
mod repair;
mod snapshots_under;
mod speeds;
mod transactions;
mod tx_under;

use std::time::Duration;
use tierpool_meta::engine::{Engine, EngineConfig};
use tierpool_meta::{MetaOp, MetaState};

pub const DEAD_AFTER: Duration = Duration::from_secs(3);
pub const GRACE: Duration = Duration::from_secs(5);
pub const HOLD: Duration = Duration::from_secs(10);

pub fn config() -> EngineConfig {
    EngineConfig {
        dead_after: DEAD_AFTER,
        gc_grace: GRACE,
        hold_period: HOLD,
        gc_batch: 4,
        max_moving: 4,
        speed_threshold: 20,
        speed_window: Duration::from_secs(30),
        tx_max_files: 3,
        tx_max_pages: 4,
    }
}

/// An engine over an initialised pool of 8 partitions.
pub fn engine() -> Engine {
    let mut s = MetaState::new();
    s.execute(&MetaOp::Init { partitions: 8 }, 1).unwrap();
    Engine::new(s, config())
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
