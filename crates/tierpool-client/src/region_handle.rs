//! [`Region`]: a region opened for use, with a local cache of its pages.
//!
//! The cache lives in an anonymous mapping paged in through userfaultfd
//! (`tierpool-region`), so the same bytes serve `read`/`write` calls and
//! direct memory access (a numpy array, a raw pointer) coherently. Where the
//! system refuses userfaultfd, the region falls back to a cache of page
//! buffers (`tierpool-cache`) and serves `read`/`write` only.
//!
//! These calls block; call them from outside an async runtime's threads
//! (or through `spawn_blocking`).

use crate::Client;
use parking_lot::Mutex;
use tierpool_cache::{Backend, CacheError, CacheStats, Geometry, PageCache};
use tierpool_meta::InodeInfo;
use tierpool_region::{MappedRegion, RegionError};
use tierpool_types::{Error, ErrorKind, Result};
use tokio::runtime::Handle;

/// Read-ahead bound for sequential access.
const READAHEAD: u64 = 1 << 20;

/// Moves pages between the cache and the region's chunks on the workers.
pub struct PoolBackend {
    client: Client,
    handle: Handle,
    path: String,
    info: InodeInfo,
}

/// A pool error as the cache layer carries it.
#[derive(Debug)]
pub struct BackendError(pub Error);

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<CacheError> for BackendError {
    fn from(e: CacheError) -> Self {
        BackendError(Error::invalid(e.to_string()))
    }
}

impl Backend for PoolBackend {
    type Error = BackendError;

    fn fetch(&mut self, chunk: u64, offset: u64, len: u64) -> std::result::Result<Vec<u8>, BackendError> {
        let f = self.client.read_region(&self.path, &self.info, chunk, offset, len);
        self.handle.block_on(f).map(|b| b.to_vec()).map_err(BackendError)
    }

    fn write_back(&mut self, chunk: u64, offset: u64, data: &[u8]) -> std::result::Result<(), BackendError> {
        let ranges = [(offset, data)];
        let f = self.client.write_region(&self.path, &self.info, chunk, &ranges);
        self.handle.block_on(f).map_err(BackendError)
    }
}

enum Cache {
    Mapped(MappedRegion<PoolBackend>),
    Buffered(Box<PageCache<PoolBackend>>),
}

/// An open region. See the module documentation.
pub struct Region {
    path: String,
    info: InodeInfo,
    client: Client,
    handle: Handle,
    cache: Mutex<Option<Cache>>,
    readonly: bool,
    /// Of a handle that may write: the region is open here (a restore
    /// elsewhere is refused meanwhile).
    lease: Mutex<Option<crate::WriteLease>>,
}

/// Tells the coordinator at once which regions this client has open:
/// waits for it outside a runtime, sends it on the way inside one (where
/// the async callers confirm the open themselves).
fn announce(client: &Client, handle: &Handle) {
    let c = client.clone();
    let tell = async move {
        if let Err(e) = c.renew_leases().await {
            tracing::warn!("could not tell the coordinator which regions are open here: {e}");
        }
    };
    if Handle::try_current().is_ok() {
        handle.spawn(tell);
    } else {
        handle.block_on(tell);
    }
}

fn region_err(e: RegionError<BackendError>) -> Error {
    match e {
        RegionError::Backend(b) => b.0,
        RegionError::Os(m) | RegionError::Failed(m) => Error::new(ErrorKind::Io, m),
    }
}

impl Region {
    /// Opens the region `info` (at `path`) with a cache of `cache` bytes
    /// (at least one chunk). `handle` runs the pool transfers. The `info`
    /// of a checkpoint (see `Client::checkpoint_info`) opens read-only.
    pub fn open(client: Client, handle: Handle, path: &str, info: InodeInfo, cache: u64) -> Result<Region> {
        let geom = Geometry::new(info.size, info.chunk_size);
        let cache = cache.max(info.chunk_size);
        let backend = || PoolBackend {
            client: client.clone(),
            handle: handle.clone(),
            path: path.to_string(),
            info: info.clone(),
        };
        let c = match MappedRegion::new(geom, cache, READAHEAD, backend()) {
            Ok(m) => Cache::Mapped(m),
            Err(RegionError::Os(why)) => {
                tracing::info!("{path}: no page-fault handling ({why}); using a buffer cache");
                let c = PageCache::new(geom, cache, READAHEAD, backend()).map_err(|e| Error::invalid(e.to_string()))?;
                Cache::Buffered(Box::new(c))
            }
            Err(e) => return Err(region_err(e)),
        };
        let readonly = !info.chunks.is_empty();
        let lease = (!readonly).then(|| client.lease(info.id));
        if lease.is_some() {
            if Handle::try_current().is_ok() {
                announce(&client, &handle);
            } else {
                handle.block_on(client.confirm_region_open(path))?;
            }
        }
        let lease = Mutex::new(lease);
        Ok(Region { path: path.to_string(), info, client, handle, cache: Mutex::new(Some(c)), readonly, lease })
    }

    /// Opens the region read-only, sharing one copy of its cached pages with
    /// the other processes of this node that open it read-only too (through a
    /// file in `/dev/shm`, removed when the last of them closes it). Each
    /// process fetches only pages no one has fetched yet. The region should
    /// not be written while it is shared.
    pub fn open_shared(client: Client, handle: Handle, path: &str, info: InodeInfo, cache: u64) -> Result<Region> {
        let geom = Geometry::new(info.size, info.chunk_size);
        let cache = cache.max(info.chunk_size);
        let pool: String =
            client.coordinator_addr().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let file = std::path::PathBuf::from(format!("/dev/shm/tierpool-{pool}-{}", info.id.0));
        let backend =
            PoolBackend { client: client.clone(), handle: handle.clone(), path: path.to_string(), info: info.clone() };
        let m = MappedRegion::new_shared(geom, cache, READAHEAD, backend, &file).map_err(region_err)?;
        let cache = Mutex::new(Some(Cache::Mapped(m)));
        Ok(Region { path: path.to_string(), info, client, handle, cache, readonly: true, lease: Mutex::new(None) })
    }

    /// Whether this handle was opened read-only (shared).
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn info(&self) -> &InodeInfo {
        &self.info
    }

    pub fn size(&self) -> u64 {
        self.info.size
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.info.size => Ok(()),
            _ => Err(Error::invalid(format!(
                "{}: bytes {offset}..{} are outside the region of {} bytes",
                self.path,
                offset.saturating_add(len),
                self.info.size
            ))),
        }
    }

    fn closed(&self) -> Error {
        Error::invalid(format!("{}: the region is closed", self.path))
    }

    /// Fills `buf` from `offset`.
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check(offset, buf.len() as u64)?;
        let mut g = self.cache.lock();
        match g.as_mut().ok_or_else(|| self.closed())? {
            Cache::Mapped(m) => {
                // SAFETY: in bounds (checked); pages arrive through faults.
                let src = unsafe { std::slice::from_raw_parts(m.as_ptr().add(offset as usize), buf.len()) };
                buf.copy_from_slice(src);
                Ok(())
            }
            Cache::Buffered(c) => c.read(offset, buf).map_err(|e| e.0),
        }
    }

    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.read_into(offset, &mut buf)?;
        Ok(buf)
    }

    /// Writes `data` at `offset`; it reaches the pool on eviction or [`flush`](Self::flush).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.readonly {
            return Err(Error::invalid(format!("{}: the region is open read-only", self.path)));
        }
        self.check(offset, data.len() as u64)?;
        let mut g = self.cache.lock();
        match g.as_mut().ok_or_else(|| self.closed())? {
            Cache::Mapped(m) => {
                // SAFETY: in bounds (checked); the mapping is writable memory.
                let dst = unsafe { std::slice::from_raw_parts_mut(m.as_ptr().add(offset as usize), data.len()) };
                dst.copy_from_slice(data);
                Ok(())
            }
            Cache::Buffered(c) => c.write(offset, data).map_err(|e| e.0),
        }
    }

    /// Sends every dirty page to the pool: afterwards, a reader that opens
    /// the region sees every write made before.
    pub fn flush(&self) -> Result<()> {
        let mut g = self.cache.lock();
        match g.as_mut().ok_or_else(|| self.closed())? {
            Cache::Mapped(m) => m.flush().map_err(region_err),
            Cache::Buffered(c) => c.flush().map_err(|e| e.0),
        }
    }

    pub fn stats(&self) -> CacheStats {
        match self.cache.lock().as_ref() {
            Some(Cache::Mapped(m)) => m.stats(),
            Some(Cache::Buffered(c)) => c.stats(),
            None => CacheStats::default(),
        }
    }

    /// The region's memory, for direct access: `(address, length)`. `None`
    /// with the buffer cache (no page-fault handling here) or once closed.
    /// The memory stays valid until [`close`](Self::close) or drop.
    pub fn memory(&self) -> Option<(*mut u8, usize)> {
        match self.cache.lock().as_ref() {
            Some(Cache::Mapped(m)) => Some((m.as_ptr(), m.len())),
            _ => None,
        }
    }

    /// Flushes and releases the local cache (and the mapping).
    pub fn close(&self) -> Result<()> {
        let r = self.flush();
        if r.is_ok() {
            self.cache.lock().take();
            self.let_go();
        }
        r
    }

    /// Takes checkpoint `name` of the region, after flushing this handle's
    /// writes (writes of other handles not flushed yet are not in it).
    pub fn checkpoint(&self, name: &str) -> Result<crate::CheckpointReport> {
        if self.readonly {
            return Err(Error::invalid(format!("{}: the region is open read-only", self.path)));
        }
        self.flush()?;
        self.handle.block_on(self.client.checkpoint(&self.path, name))
    }

    /// Rolls the region back to its checkpoint `name` (see
    /// `Client::restore_region`): this handle's writes not flushed yet are
    /// dropped, and its cache refetches every page. `Busy` if any other
    /// handle of the region is open, here or in another client.
    pub fn restore(&self, name: &str) -> Result<crate::CheckpointReport> {
        if self.readonly {
            return Err(Error::new(ErrorKind::ReadOnly, format!("{}: the region is open read-only", self.path)));
        }
        let mut g = self.cache.lock();
        let cache = g.as_mut().ok_or_else(|| self.closed())?;
        // This handle's own lease must not refuse its restore; it is taken
        // again after.
        self.lease.lock().take();
        let restore = || self.handle.block_on(self.client.restore_region(&self.path, name));
        let r = match cache {
            Cache::Mapped(m) => m.discard_with(|_| restore()).map_err(region_err).and_then(|r| r),
            Cache::Buffered(c) => {
                let r = restore();
                c.discard();
                r
            }
        };
        *self.lease.lock() = Some(self.client.lease(self.info.id));
        announce(&self.client, &self.handle);
        r
    }

    /// Ends this handle's lease on the region, and says so to the coordinator.
    fn let_go(&self) {
        if self.lease.lock().take().is_some() {
            announce(&self.client, &self.handle);
        }
    }

    /// Closes the region without writing back, and deletes it from the pool.
    pub fn free(&self) -> Result<()> {
        self.cache.lock().take();
        self.let_go();
        self.handle.block_on(self.client.remove(&self.path, false)).map(|_| ())
    }
}
