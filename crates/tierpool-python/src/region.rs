//! `Region`: an open memory region (native half of `tierpool.Region`).
//!
//! Every call that may move pages runs with the GIL released. The region's
//! memory is exposed as an address and a length for `as_array`; it stays
//! mapped as long as this object lives (Python keeps it alive through the
//! arrays made over it), and dropping it flushes what is still dirty.
//!
//! A region belongs to the process that opened it: its pages are served by a
//! thread and a userfaultfd of that process. In a child forked since, every
//! call is refused and dropping it leaks it (`fork.rs`), and the mapping is
//! not inherited at all (`MADV_DONTFORK`): an array over it touched in the
//! child faults with SIGSEGV instead of silently reading zeros where pages
//! had not arrived yet.

use crate::args;
use crate::buffer::BufferView;
use crate::error::{invalid, to_py_err};
use crate::fork::OpenedHere;
use crate::runtime::{blocking, runtime};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Arc;
use tierpool_types::{Error, Result};

#[pyclass(frozen, module = "tierpool._native")]
pub struct Region {
    path: String,
    size: u64,
    chunk_size: u64,
    readonly: bool,
    inner: OpenedHere<Arc<tierpool_client::Region>>,
}

impl Region {
    pub fn new(inner: tierpool_client::Region) -> Region {
        Region {
            path: inner.path().to_string(),
            size: inner.size(),
            chunk_size: inner.info().chunk_size,
            readonly: inner.is_readonly(),
            inner: OpenedHere::new(Arc::new(inner)),
        }
    }

    /// The open region, or the error for a forked child.
    fn inner(&self, py: Python<'_>) -> PyResult<Arc<tierpool_client::Region>> {
        self.inner.get(&self.path).cloned().map_err(|e| to_py_err(py, e))
    }
}

#[pymethods]
impl Region {
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn readonly(&self) -> bool {
        self.readonly
    }

    #[getter]
    fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// `length` bytes from `offset`, which must lie inside the region
    /// (checked before the bytes are allocated).
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: &Bound<'py, PyAny>,
        length: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let offset = args::position(offset, "offset")?;
        let length = args::position(length, "length")?;
        let r = self.inner(py)?;
        if offset.checked_add(length).is_none_or(|end| end > self.size) {
            return Err(invalid(
                py,
                format!(
                    "{}: bytes {offset}..{} are outside the region of {} bytes",
                    self.path,
                    offset.saturating_add(length),
                    self.size
                ),
            ));
        }
        let n = length as usize;
        PyBytes::new_with(py, n, |buf| blocking(py, move || r.read_into(offset, buf)))
    }

    /// Fills `buffer` (any writable contiguous buffer) from `offset`; returns its length.
    fn readinto(&self, py: Python<'_>, offset: &Bound<'_, PyAny>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let offset = args::position(offset, "offset")?;
        let r = self.inner(py)?;
        let mut view = BufferView::writable(buffer)?;
        let dst = view.as_mut_slice();
        let n = dst.len();
        blocking(py, move || r.read_into(offset, dst))?;
        Ok(n)
    }

    /// Writes the bytes of `data` (any contiguous buffer) at `offset`.
    fn write(&self, py: Python<'_>, offset: &Bound<'_, PyAny>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let offset = args::position(offset, "offset")?;
        let r = self.inner(py)?;
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        blocking(py, move || r.write(offset, src))
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner(py)?;
        blocking(py, move || r.flush())
    }

    /// Flushes this handle's writes and takes checkpoint `name` of the
    /// region: what it copied, as a dict.
    fn checkpoint<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner(py)?;
        let name = name.to_owned();
        let rep = blocking(py, move || r.checkpoint(&name))?;
        report_dict(py, &rep)
    }

    /// Rolls the region back to its checkpoint `name`, dropping this
    /// handle's unflushed writes and cached pages: what it copied, as a dict.
    fn restore<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner(py)?;
        let name = name.to_owned();
        let rep = blocking(py, move || r.restore(&name))?;
        report_dict(py, &rep)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner(py)?;
        blocking(py, move || r.close())
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner(py)?;
        blocking(py, move || r.free())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner(py)?.stats();
        let d = PyDict::new(py);
        d.set_item("bytes_fetched", s.bytes_fetched)?;
        d.set_item("bytes_written_back", s.bytes_written_back)?;
        d.set_item("cache_hits", s.cache_hits)?;
        d.set_item("cache_misses", s.cache_misses)?;
        d.set_item("chunks_written_back", s.chunks_written_back)?;
        Ok(d)
    }

    /// `(address, length)` of the region's memory.
    fn memory(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        match self.inner(py)?.memory() {
            Some((p, n)) => Ok((p as usize, n)),
            None => Err(invalid(
                py,
                format!(
                    "{}: no direct memory access here (closed, or this system does not allow userfaultfd; \
                     see vm.unprivileged_userfaultfd)",
                    self.path
                ),
            )),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // In a forked child `get` fails and nothing is flushed: the pages are the parent's.
        let Ok(r) = self.inner.get(&self.path) else { return };
        if let Err(e) = r.flush() {
            if r.memory().is_some() {
                tracing::warn!("{}: dirty pages could not be written back on release: {e}", self.path);
            }
        }
    }
}

/// What a checkpoint or a restore copied, as Python sees it.
pub fn report_dict<'py>(py: Python<'py>, r: &tierpool_client::CheckpointReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", &r.path)?;
    d.set_item("name", &r.name)?;
    d.set_item("chunks", r.chunks)?;
    d.set_item("copied", r.copied)?;
    d.set_item("bytes_copied", r.bytes_copied)?;
    d.set_item("since", r.since.as_deref())?;
    Ok(d)
}

/// Opens `info` at `path` as a region with a cache of `cache` bytes;
/// `readonly` shares the cache with the node's other read-only openers.
pub fn open(
    client: &tierpool_client::Client,
    path: &str,
    info: tierpool_client::InodeInfo,
    cache: u64,
    readonly: bool,
) -> Result<Region> {
    let handle = runtime().handle().clone();
    // A checkpoint's pages are its own: never shared with the live region's openers.
    let r = if readonly && info.chunks.is_empty() {
        tierpool_client::Region::open_shared(client.clone(), handle, path, info, cache)?
    } else {
        tierpool_client::Region::open(client.clone(), handle, path, info, cache)?
    };
    if let Some((p, n)) = r.memory() {
        keep_from_children(p, n).map_err(|e| Error::from(e).context(format!("{path}: madvise")))?;
    }
    Ok(Region::new(r))
}

/// Leaves the mapping at `p` out of children made by `fork()`.
fn keep_from_children(p: *mut u8, len: usize) -> std::io::Result<()> {
    // SAFETY: `p..p+len` lies in the region's own mapping, which starts on a
    // page boundary; the advice only changes what fork() copies.
    let page = tierpool_types::PAGE_SIZE as usize;
    if unsafe { libc::madvise(p.cast(), len.div_ceil(page) * page, libc::MADV_DONTFORK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
