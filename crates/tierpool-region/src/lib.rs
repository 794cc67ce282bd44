//! A region used as memory.
//!
//! [`MappedRegion`] reserves an anonymous mapping as large as the region and
//! registers it with userfaultfd. The first touch of a page stops the touching
//! thread until a handler thread has fetched the page (and read-ahead, when
//! access is sequential) from the pool and placed it; pages arrive
//! write-protected, so the first write to each is reported too and marks it
//! dirty. When the cache is full, whole chunks are dropped from the mapping,
//! least recently used first, after their dirty pages — only those — were sent
//! back. Resident memory stays within the cache size however large the region.
//!
//! The decisions (what to fetch, evict, send back) are `tierpool-cache`'s;
//! this crate is the I/O around them: the mapping, the fault handler, and the
//! [`Backend`] that moves bytes.

mod mapped;
mod shared_file;
mod uffd;

pub use mapped::{MappedRegion, RegionError};
pub use tierpool_cache::{Backend, CacheError, CacheStats, Geometry, PAGE_SIZE};
