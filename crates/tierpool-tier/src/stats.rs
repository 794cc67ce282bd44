//! What the manager reports of its tiers: [`TierStats`], defined with the
//! shared types so that the wire and every surface show the same figures.

pub use tierpool_types::TierStats;
