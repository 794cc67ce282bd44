//! What the manager reports of its tiers: plain data shared by `manager` and
//! `tiers`, depending on neither.

/// A snapshot of both tiers' capacity, use and traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    pub mem_capacity: u64,
    pub mem_used: u64,
    pub mem_chunks: u64,
    pub disk_capacity: u64,
    pub disk_used: u64,
    pub disk_chunks: u64,
    /// Chunks moved MEM -> DISK since start.
    pub demotions: u64,
    /// Chunks moved DISK -> MEM since start.
    pub promotions: u64,
}
