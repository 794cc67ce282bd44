//! The manager's public configuration and the names of its tiers: plain data
//! shared by `manager` and `tiers`, depending on neither.

use std::path::PathBuf;
use tierpool_types::ByteSize;

/// Budgets and places of a worker's tiers.
#[derive(Clone, Debug)]
pub struct TierConfig {
    /// Bytes of chunk data the MEM tier may hold.
    pub mem_budget: ByteSize,
    /// Directory of the DISK tier (created if missing).
    pub disk_dir: PathBuf,
    /// Bytes of chunk data the DISK tier may hold.
    pub disk_budget: ByteSize,
    /// A DISK chunk read this many times is promoted back to MEM (0 is taken as 1).
    pub promote_after_reads: u32,
    /// Most chunks read from DISK held in memory at once (each until its
    /// reader drops it); more readers wait. 0 is taken as 1.
    pub disk_reads: usize,
}

/// The tier a chunk is in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TierKind {
    Mem,
    Disk,
}
