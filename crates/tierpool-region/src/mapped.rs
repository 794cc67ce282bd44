//! The mapping and its fault handler thread.

use crate::uffd::{self, Uffd};
use parking_lot::Mutex;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use tierpool_cache::{Access, Backend, CacheState, CacheStats, Eviction, Geometry, PageRun, PAGE_SIZE};

/// Why a region could not be mapped or flushed.
#[derive(Debug)]
pub enum RegionError<E> {
    /// The system refused the mapping or the fault handler.
    Os(String),
    /// The pool refused a transfer.
    Backend(E),
    /// A page could not be fetched earlier; the region is unusable.
    Failed(String),
}

impl<E: fmt::Display> fmt::Display for RegionError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::Os(m) | RegionError::Failed(m) => f.write_str(m),
            RegionError::Backend(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for RegionError<E> {}

fn os<E>(what: &str, e: io::Error) -> RegionError<E> {
    RegionError::Os(format!("{what}: {e}"))
}

struct Inner<B> {
    state: CacheState,
    backend: B,
    /// Region page just past the last pages let through for writing.
    write_next: Option<u64>,
    /// Pages let through ahead of a sequential writer.
    write_window: u32,
    /// First writes in a row, each to the page after the previous one.
    write_run: u32,
}

/// After a fault the handler watches for the next one this long before it
/// sleeps: faults come in bursts, and waking a sleeping thread costs more
/// than this on some virtual machines.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Writes are taken as sequential after this many first writes in a row to
/// consecutive pages (scattered writes rarely line up so).
const SEQUENTIAL_AFTER: u32 = 4;

/// At most this many pages are let through ahead of a sequential writer.
const MAX_WRITE_WINDOW: u32 = 256;

struct Shared<B> {
    uffd: Uffd,
    base: usize,
    /// The file behind a read-only mapping shared by the processes of a node.
    file: Option<crate::shared_file::SharedFile>,
    inner: Mutex<Inner<B>>,
    failed: Mutex<Option<String>>,
}

/// A region as one contiguous range of memory, paged in from the pool on
/// first touch. See the crate documentation.
pub struct MappedRegion<B: Backend + Send + 'static>
where
    B::Error: fmt::Display,
{
    shared: Arc<Shared<B>>,
    len: usize,
    stop: OwnedFd,
    handler: Option<JoinHandle<()>>,
}

impl<B: Backend + Send + 'static> MappedRegion<B>
where
    B::Error: fmt::Display,
{
    /// Maps a region of shape `geom` with a cache of `cache` bytes (at least
    /// one chunk), reading ahead up to `readahead` bytes on sequential access.
    pub fn new(geom: Geometry, cache: u64, readahead: u64, backend: B) -> Result<Self, RegionError<B::Error>> {
        Self::build(geom, cache, readahead, backend, None)
    }

    /// Maps a region read-only through the file `path` (under `/dev/shm`):
    /// processes of this node that open the same region this way share one
    /// copy of the pages any of them fetched. The first to open it starts
    /// from an empty file; the last to close it removes the file. Writing to
    /// the memory is a fault (SIGSEGV); the region must not change meanwhile.
    pub fn new_shared(
        geom: Geometry,
        cache: u64,
        readahead: u64,
        backend: B,
        path: &std::path::Path,
    ) -> Result<Self, RegionError<B::Error>> {
        let len = geom.size.div_ceil(PAGE_SIZE).max(1) * PAGE_SIZE;
        let file =
            crate::shared_file::SharedFile::open(path, len).map_err(|e| os(&format!("{}", path.display()), e))?;
        Self::build(geom, cache, readahead, backend, Some(file))
    }

    fn build(
        geom: Geometry,
        cache: u64,
        readahead: u64,
        backend: B,
        file: Option<crate::shared_file::SharedFile>,
    ) -> Result<Self, RegionError<B::Error>> {
        let state = CacheState::new(geom, cache, readahead).map_err(|e| RegionError::Os(e.to_string()))?;
        let len = geom.size.div_ceil(PAGE_SIZE).max(1) as usize * PAGE_SIZE as usize;
        let uffd = Uffd::open().map_err(|e| os("cannot open a userfaultfd", e))?;
        let (flags, fd) = match &file {
            Some(f) => (libc::MAP_SHARED, f.raw()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1),
        };
        // SAFETY: a fresh mapping (of our own file, or anonymous); nothing else refers to it.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if base == libc::MAP_FAILED {
            return Err(os(&format!("cannot map {len} bytes"), io::Error::last_os_error()));
        }
        let base = base as usize;
        let unmap = || {
            // SAFETY: the mapping made above, not yet handed out.
            unsafe { libc::munmap(base as *mut libc::c_void, len) };
        };
        let mode = if file.is_some() {
            uffd::REGISTER_MODE_MISSING
        } else {
            uffd::REGISTER_MODE_MISSING | uffd::REGISTER_MODE_WP
        };
        if let Err(e) = uffd.register(base, len, mode) {
            unmap();
            return Err(os("cannot register the region for page faults", e));
        }
        // SAFETY: plain syscall returning a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            unmap();
            return Err(os("cannot create an eventfd", io::Error::last_os_error()));
        }
        // SAFETY: `efd` is ours from here on.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let shared = Arc::new(Shared {
            uffd,
            base,
            file,
            inner: Mutex::new(Inner { state, backend, write_next: None, write_window: 0, write_run: 0 }),
            failed: Mutex::new(None),
        });
        let (s, stop_fd) = (shared.clone(), stop.as_raw_fd());
        let handler = std::thread::Builder::new()
            .name("tierpool-region-faults".into())
            .spawn(move || s.serve(stop_fd))
            .map_err(|e| os("cannot start the fault handler", e))?;
        Ok(MappedRegion { shared, len, stop, handler: Some(handler) })
    }

    /// The region's bytes (the mapping is whole pages; this is the region's size).
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.base as *mut u8
    }

    pub fn len(&self) -> usize {
        self.shared.inner.lock().state.geometry().size as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as `self`; pages appear on touch.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len()) }
    }

    pub fn stats(&self) -> CacheStats {
        self.shared.inner.lock().state.stats()
    }

    /// Bytes of the region held in memory now.
    pub fn resident_bytes(&self) -> u64 {
        self.shared.inner.lock().state.resident_bytes()
    }

    /// Sends every dirty page to the pool; once this returns, a reader that
    /// opens the region sees every write made before the call.
    pub fn flush(&self) -> Result<(), RegionError<B::Error>> {
        if let Some(f) = self.shared.failed.lock().clone() {
            return Err(RegionError::Failed(f));
        }
        let mut g = self.shared.inner.lock();
        for run in g.state.dirty_runs() {
            self.shared.write_back(&mut g, run)?;
            g.state.cleaned(run);
        }
        Ok(())
    }

    /// Runs `f` on the backend while no page can be fetched (faults wait),
    /// then drops every page held, dirty ones unwritten, whatever `f`
    /// returned: for when `f` changes the pool's copy under the cache.
    pub fn discard_with<R>(&self, f: impl FnOnce(&mut B) -> R) -> Result<R, RegionError<B::Error>> {
        let mut g = self.shared.inner.lock();
        let r = f(&mut g.backend);
        let geom = g.state.geometry();
        let advice = if self.shared.file.is_some() { libc::MADV_REMOVE } else { libc::MADV_DONTNEED };
        for chunk in g.state.forget_all() {
            let start = self.shared.base + geom.page_offset(chunk, 0) as usize;
            let len = geom.chunk_pages(chunk) as usize * PAGE_SIZE as usize;
            // SAFETY: drops the chunk's pages from our own mapping; the next
            // touch faults and fetches them again.
            if unsafe { libc::madvise(start as *mut libc::c_void, len, advice) } != 0 {
                return Err(os("dropping pages", io::Error::last_os_error()));
            }
        }
        Ok(r)
    }

    /// Runs `f` on the backend (for statistics of what moved).
    pub fn with_backend<R>(&self, f: impl FnOnce(&mut B) -> R) -> R {
        f(&mut self.shared.inner.lock().backend)
    }
}

impl<B: Backend + Send + 'static> Drop for MappedRegion<B>
where
    B::Error: fmt::Display,
{
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write to our eventfd wakes the handler to stop.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(h) = self.handler.take() {
            let _ = h.join();
        }
        // SAFETY: nothing refers to the mapping any more (`&self` borrows ended).
        unsafe { libc::munmap(self.shared.base as *mut libc::c_void, self.len) };
        if let Some(f) = &self.shared.file {
            f.release();
        }
    }
}

impl<B: Backend> Shared<B>
where
    B::Error: fmt::Display,
{
    fn serve(&self, stop: i32) {
        let mut fds = [
            libc::pollfd { fd: self.uffd.raw(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        loop {
            // SAFETY: two valid pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("region fault handler: poll failed: {}", io::Error::last_os_error());
                return;
            }
            if fds[1].revents != 0 {
                return;
            }
            let mut idle_since = std::time::Instant::now();
            loop {
                match self.uffd.read() {
                    Ok(Some(m)) if m.event == uffd::EVENT_PAGEFAULT => {
                        self.fault(m);
                        idle_since = std::time::Instant::now();
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if idle_since.elapsed() < SPIN => std::hint::spin_loop(),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!("region fault handler: reading faults failed: {e}");
                        return;
                    }
                }
            }
        }
    }

    fn fault(&self, m: uffd::Msg) {
        let offset = (m.address as usize & !(PAGE_SIZE as usize - 1)) - self.base;
        let r = self.handle(offset as u64, m.flags);
        if let Err(e) = r {
            // The faulting thread cannot be given an error: like a mapped file
            // whose read fails, it gets SIGBUS, after the reason is logged.
            let msg = format!("region page at offset {offset} could not be provided: {e}");
            tracing::error!("{msg}");
            eprintln!("tierpool: {msg}");
            *self.failed.lock() = Some(msg);
            // SAFETY: signals the thread that faulted, in this process.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), m.ptid as libc::c_int, libc::SIGBUS) };
        }
    }

    fn handle(&self, offset: u64, flags: u64) -> Result<(), RegionError<B::Error>> {
        let mut g = self.inner.lock();
        let geom = g.state.geometry();
        let (chunk, page) = geom.locate(offset);
        let plen = geom.page_len(chunk, page).max(1);
        if flags & uffd::PAGEFAULT_FLAG_WP != 0 && g.state.is_present(chunk, page) {
            return self.let_write(&mut g, offset, true);
        }
        if g.state.is_present(chunk, page) {
            return Ok(()); // placed by read-ahead while this fault was queued
        }
        let plan = g.state.plan(offset, plen, Access::Read).map_err(|e| RegionError::Os(e.to_string()))?;
        for ev in &plan.evict {
            self.evict(&mut g, ev)?;
        }
        for &run in &plan.fetch {
            let r = geom.run_bytes(run);
            let mut bytes = g.backend.fetch(run.chunk, r.start, r.end - r.start).map_err(RegionError::Backend)?;
            bytes.resize(run.count as usize * PAGE_SIZE as usize, 0);
            let protect = self.file.is_none();
            self.uffd.copy(self.page_addr(&geom, run), &bytes, protect).map_err(|e| os("placing fetched pages", e))?;
            g.state.loaded(run, true);
        }
        if flags & uffd::PAGEFAULT_FLAG_WRITE != 0 && self.file.is_none() {
            // A write brought the page in: it is dirty already, spare the
            // thread a second fault.
            return self.let_write(&mut g, offset, plan.is_hit());
        }
        g.state.accessed(offset, plen, Access::Read, plan.is_hit());
        Ok(())
    }

    /// The first write to the (present) page at `offset`: marks it dirty and
    /// lets writes through. Once writes move forward page by page, a growing
    /// window of the present pages after it is marked and let through as well,
    /// sparing a sequential writer one fault per page; writes elsewhere are
    /// tracked page by page, exactly.
    fn let_write(&self, g: &mut Inner<B>, offset: u64, hit: bool) -> Result<(), RegionError<B::Error>> {
        let geom = g.state.geometry();
        let region_page = offset / PAGE_SIZE;
        g.write_run = if g.write_next == Some(region_page) { g.write_run + 1 } else { 0 };
        g.write_window =
            if g.write_run >= SEQUENTIAL_AFTER { (g.write_window * 2).clamp(8, MAX_WRITE_WINDOW) } else { 0 };
        let (chunk, page) = geom.locate(offset);
        let mut n = 1u32;
        while n <= g.write_window && page + n < geom.chunk_pages(chunk) && g.state.is_present(chunk, page + n) {
            n += 1;
        }
        let end = geom.page_offset(chunk, page + n).min(geom.size);
        g.state.accessed(offset, end - offset, Access::Write, hit);
        g.write_next = Some(region_page + u64::from(n));
        let len = n as usize * PAGE_SIZE as usize;
        self.uffd.write_protect(self.base + offset as usize, len, false).map_err(|e| os("unprotect", e))
    }

    fn page_addr(&self, geom: &Geometry, run: PageRun) -> usize {
        self.base + geom.page_offset(run.chunk, run.first) as usize
    }

    /// Protects the run against further writes, then sends its bytes.
    fn write_back(&self, g: &mut Inner<B>, run: PageRun) -> Result<(), RegionError<B::Error>> {
        let geom = g.state.geometry();
        let addr = self.page_addr(&geom, run);
        self.uffd.write_protect(addr, run.count as usize * PAGE_SIZE as usize, true).map_err(|e| os("protect", e))?;
        let r = geom.run_bytes(run);
        // SAFETY: the run's pages are present in the mapping and now
        // write-protected: nobody changes them while they are read.
        let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, (r.end - r.start) as usize) };
        g.backend.write_back(run.chunk, r.start, bytes).map_err(RegionError::Backend)
    }

    fn evict(&self, g: &mut Inner<B>, ev: &Eviction) -> Result<(), RegionError<B::Error>> {
        for &run in &ev.write_back {
            self.write_back(g, run)?;
        }
        let geom = g.state.geometry();
        let start = self.base + geom.page_offset(ev.chunk, 0) as usize;
        let len = geom.chunk_pages(ev.chunk) as usize * PAGE_SIZE as usize;
        // SAFETY: drops the chunk's pages from our own mapping; the next touch
        // faults and fetches them again.
        // A shared file's pages are removed from the file itself.
        let advice = if self.file.is_some() { libc::MADV_REMOVE } else { libc::MADV_DONTNEED };
        if unsafe { libc::madvise(start as *mut libc::c_void, len, advice) } != 0 {
            return Err(os("dropping evicted pages", io::Error::last_os_error()));
        }
        g.state.evicted(ev);
        Ok(())
    }
}
