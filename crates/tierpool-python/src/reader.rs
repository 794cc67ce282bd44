//! `Reader`: random access to one committed version of a file.
//!
//! A reader resolves the file once, when it is opened, and reads that version
//! until it is closed, even if the path is replaced meanwhile (close-to-open).
//! Reads of two chunks or more go straight into the caller's buffer, several
//! chunks in flight. Smaller reads are served from the last chunks fetched,
//! and a sequential reader has the next chunk fetched ahead, so that small
//! buffered reads cost one chunk transfer per chunk, not one per read.
//!
//! Lock: `cache` is held across the fetch of one chunk; concurrent reads of
//! one reader are serialised there (Python's `BufferedReader` does the same).
//!
//! A reader belongs to the process that opened it: in a child forked since,
//! reads are refused and dropping it leaks it (`fork.rs`).

use crate::args;
use crate::buffer::BufferView;
use crate::error::to_py_err;
use crate::fork::OpenedHere;
use crate::info::FileInfo;
use crate::runtime::{runtime, wait};
use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::VecDeque;
use tierpool_client::{Client, InodeInfo};
use tierpool_types::{Error, ErrorKind, Result};
use tokio::task::JoinHandle;

/// Chunks kept for small reads.
const KEEP: usize = 2;

#[derive(Default)]
struct Cache {
    recent: VecDeque<(u64, Bytes)>,
    ahead: Option<(u64, JoinHandle<Result<Bytes>>)>,
    last: Option<u64>,
}

pub struct ReaderCore {
    client: Client,
    path: String,
    info: InodeInfo,
    cache: tokio::sync::Mutex<Cache>,
}

impl ReaderCore {
    pub fn new(client: Client, path: String, info: InodeInfo) -> ReaderCore {
        ReaderCore { client, path, info, cache: tokio::sync::Mutex::new(Cache::default()) }
    }

    /// Reads from `offset` into `buf`; fewer bytes than `buf.len()` only at
    /// the end of the file.
    pub async fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let size = self.info.size;
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - offset) as usize;
        let buf = &mut buf[..n];
        let cs = self.info.chunk_size;
        if n as u64 >= 2 * cs {
            return self.client.read_at(&self.path, &self.info, offset, buf).await;
        }
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let idx = pos / cs;
            let data = self.chunk(idx).await?;
            let from = (pos - idx * cs) as usize;
            if from >= data.len() {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("{}: chunk {idx} is shorter than recorded", self.path),
                ));
            }
            let k = (data.len() - from).min(n - done);
            buf[done..done + k].copy_from_slice(&data[from..from + k]);
            done += k;
        }
        Ok(n)
    }

    /// Chunk `idx`, from the cache, the read-ahead or the pool.
    async fn chunk(&self, idx: u64) -> Result<Bytes> {
        let mut c = self.cache.lock().await;
        if let Some((_, b)) = c.recent.iter().find(|(i, _)| *i == idx) {
            return Ok(b.clone());
        }
        let data = match c.ahead.take() {
            Some((i, h)) if i == idx => {
                h.await.map_err(|e| Error::internal(format!("chunk fetch task failed: {e}")))??
            }
            other => {
                if let Some((_, h)) = other {
                    h.abort();
                }
                self.client.read_chunk(&self.path, &self.info, idx).await?
            }
        };
        c.recent.push_back((idx, data.clone()));
        if c.recent.len() > KEEP {
            c.recent.pop_front();
        }
        let sequential = idx == 0 || c.last == Some(idx - 1);
        c.last = Some(idx);
        let next = idx + 1;
        if sequential && next < tierpool_client::chunk_count(&self.info) {
            let (client, path, info) = (self.client.clone(), self.path.clone(), self.info.clone());
            c.ahead = Some((next, runtime().spawn(async move { client.read_chunk(&path, &info, next).await })));
        }
        Ok(data)
    }
}

impl Drop for ReaderCore {
    fn drop(&mut self) {
        if let Some((_, h)) = self.cache.get_mut().ahead.take() {
            h.abort();
        }
    }
}

/// A file opened for reading (native half of `Client.open(path, "rb")`).
#[pyclass(frozen, module = "tierpool._native")]
pub struct Reader {
    path: String,
    info: InodeInfo,
    core: OpenedHere<ReaderCore>,
}

impl Reader {
    pub fn new(core: ReaderCore) -> Reader {
        Reader { path: core.path.clone(), info: core.info.clone(), core: OpenedHere::new(core) }
    }

    fn core(&self) -> Result<&ReaderCore> {
        self.core.get(&self.path)
    }
}

#[pymethods]
impl Reader {
    /// Size of the file version being read, in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.info.size
    }

    /// Path of the file.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Metadata of the file version being read.
    #[getter]
    fn info(&self) -> FileInfo {
        FileInfo::new(self.path.clone(), &self.info)
    }

    /// Reads bytes at `offset` into `buffer` (any writable contiguous buffer)
    /// without an intermediate copy; returns how many bytes were read (fewer
    /// than `len(buffer)` only at the end of the file).
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, offset: &Bound<'_, PyAny>) -> PyResult<usize> {
        let offset = args::position(offset, "offset")?;
        let core = self.core().map_err(|e| to_py_err(py, e))?;
        let mut view = BufferView::writable(buffer)?;
        let dst = view.as_mut_slice();
        wait(py, core.read_into(offset, dst))
    }

    /// Up to `size` bytes at `offset` (`size=None`: to the end of the file);
    /// only what the file holds there is allocated, however large `size` is.
    #[pyo3(signature = (offset, size=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: &Bound<'py, PyAny>,
        size: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let offset = args::position(offset, "offset")?;
        let size = args::opt_position(size, "size")?;
        let core = self.core().map_err(|e| to_py_err(py, e))?;
        let left = self.info.size.saturating_sub(offset);
        let n = size.map_or(left, |s| s.min(left)) as usize;
        PyBytes::new_with(py, n, |buf| wait(py, core.read_into(offset, buf)).map(|_| ()))
    }
}
