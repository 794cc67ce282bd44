//! The client-side cache of a region, as pure logic.
//!
//! A region is a byte range striped over chunks on the workers. A client keeps
//! some of its pages locally: this crate decides which pages to fetch (only
//! the missing pages an access needs, plus read-ahead when access is
//! sequential), which chunks to evict when the cache is full (least recently
//! used first), and which pages to send back (only the dirty 4 KiB pages, in
//! contiguous runs — never whole chunks).
//!
//! - [`CacheState`] is the decision maker: page states and recency, no bytes.
//!   Any shell (a buffer cache, a page-fault handler over a mapping) asks it for
//!   a [`Plan`], carries the plan out, and reports each step back.
//! - [`PageCache`] is such a shell holding page bytes in memory, over a
//!   [`Backend`] that moves bytes to and from the pool.
//!
//! Nothing here performs I/O or reads a clock.

mod geometry;
mod page_cache;
mod pages;
mod readahead;
mod state;

pub use geometry::{Geometry, PageRun};
pub use page_cache::{Backend, PageCache};
pub use pages::PageSet;
pub use readahead::Readahead;
pub use state::{Access, CacheError, CacheState, CacheStats, Eviction, Plan};

/// The unit of fetching and of dirty tracking.
pub const PAGE_SIZE: u64 = 4096;
