//! `Region`: an open memory region (native half of `tierpool.Region`).
//!
//! Every call that may move pages runs with the GIL released. The region's
//! memory is exposed as an address and a length for `as_array`; it stays
//! mapped as long as this object lives (Python keeps it alive through the
//! arrays made over it), and dropping it flushes what is still dirty.

use crate::buffer::BufferView;
use crate::error::{invalid, to_py_err};
use crate::runtime::runtime;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Arc;
use tierpool_types::Result;

#[pyclass(frozen, module = "tierpool._native")]
pub struct Region {
    inner: Arc<tierpool_client::Region>,
}

impl Region {
    pub fn new(inner: tierpool_client::Region) -> Region {
        Region { inner: Arc::new(inner) }
    }
}

fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(|e| to_py_err(py, e))
}

#[pymethods]
impl Region {
    #[getter]
    fn path(&self) -> &str {
        self.inner.path()
    }

    #[getter]
    fn size(&self) -> u64 {
        self.inner.size()
    }

    #[getter]
    fn readonly(&self) -> bool {
        self.inner.is_readonly()
    }

    #[getter]
    fn chunk_size(&self) -> u64 {
        self.inner.info().chunk_size
    }

    /// `length` bytes from `offset`.
    fn read<'py>(&self, py: Python<'py>, offset: u64, length: u64) -> PyResult<Bound<'py, PyBytes>> {
        let r = self.inner.clone();
        let data = run(py, move || r.read(offset, length))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Fills `buffer` (any writable contiguous buffer) from `offset`; returns its length.
    fn readinto(&self, py: Python<'_>, offset: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut view = BufferView::writable(buffer)?;
        let dst = view.as_mut_slice();
        let n = dst.len();
        let r = self.inner.clone();
        run(py, move || r.read_into(offset, dst))?;
        Ok(n)
    }

    /// Writes the bytes of `data` (any contiguous buffer) at `offset`.
    fn write(&self, py: Python<'_>, offset: u64, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        let r = self.inner.clone();
        run(py, move || r.write(offset, src))
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner.clone();
        run(py, move || r.flush())
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner.clone();
        run(py, move || r.close())
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.inner.clone();
        run(py, move || r.free())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
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
        match self.inner.memory() {
            Some((p, n)) => Ok((p as usize, n)),
            None => Err(invalid(
                py,
                format!(
                    "{}: no direct memory access here (closed, or this system does not allow userfaultfd; \
                     see vm.unprivileged_userfaultfd)",
                    self.inner.path()
                ),
            )),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Err(e) = self.inner.flush() {
            if self.inner.memory().is_some() {
                tracing::warn!("{}: dirty pages could not be written back on release: {e}", self.inner.path());
            }
        }
    }
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
    if readonly {
        tierpool_client::Region::open_shared(client.clone(), handle, path, info, cache).map(Region::new)
    } else {
        tierpool_client::Region::open(client.clone(), handle, path, info, cache).map(Region::new)
    }
}
