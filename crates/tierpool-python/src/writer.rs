//! `Writer`: a file being written. Nothing is visible at the path until
//! `close()` publishes the whole file in one atomic step (replacing what was
//! there); `abort()` or an error publishes nothing and frees what was stored.
//!
//! Opening checks what can be checked early, so that mistakes surface at
//! `open` rather than at `close`: the path must not be a directory, its
//! parent must be one, and exclusive creation needs a free path. Appending
//! copies the current content into the new version first (the pool has no
//! in-place append: a file version never changes once published).
//!
//! A writer belongs to the process that opened it: in a child forked since,
//! every call is refused (so a child never publishes or discards its parent's
//! file) and dropping it leaks it (`fork.rs`).

use crate::buffer::BufferView;
use crate::error::to_py_err;
use crate::fork::OpenedHere;
use crate::info::{parent, FileInfo};
use crate::runtime::wait;
use pyo3::prelude::*;
use tierpool_client::{Client, FileWriter, InodeKind, PutOptions};
use tierpool_types::{validate_chunk_size, ChunkAttrs, Error, ErrorKind, Priority, Result, DEFAULT_CHUNK_SIZE};

/// How `open` treats an existing file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// `wb`: replace it on close.
    Truncate,
    /// `ab`: start from its content.
    Append,
    /// `xb`: fail if the path exists.
    Exclusive,
}

/// What the caller of `open` asked for; `None` leaves the choice to the
/// default, or, when appending, to the existing file.
pub struct WriteRequest {
    pub chunk_size: Option<u64>,
    pub priority: Option<Priority>,
    pub pinned: Option<bool>,
    pub mode: WriteMode,
}

/// Opens `path` (a clean path) for writing.
pub async fn open(client: &Client, path: &str, req: WriteRequest) -> Result<FileWriter> {
    let mode = req.mode;
    let existing = match client.stat(path).await {
        Ok(i) => Some(i),
        Err(e) if e.kind == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    match &existing {
        Some(i) if i.kind == InodeKind::Dir => {
            return Err(Error::new(ErrorKind::IsADirectory, format!("{path}: is a directory")))
        }
        Some(_) if mode == WriteMode::Exclusive => {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{path}: file exists")))
        }
        Some(_) => {}
        None => match client.stat(parent(path)).await {
            Ok(p) if p.kind == InodeKind::Dir => {}
            Ok(_) => return Err(Error::new(ErrorKind::NotADirectory, format!("{path}: not a directory"))),
            Err(e) if e.kind == ErrorKind::NotFound => {
                return Err(Error::new(ErrorKind::NotFound, format!("{path}: no such file or directory")))
            }
            Err(e) => return Err(e),
        },
    }
    let old = existing.filter(|_| mode == WriteMode::Append);
    let base = old.as_ref().map(|o| (o.chunk_size, o.attrs)).unwrap_or((DEFAULT_CHUNK_SIZE, ChunkAttrs::default()));
    let opts = PutOptions {
        chunk_size: validate_chunk_size(req.chunk_size.unwrap_or(base.0))?,
        attrs: ChunkAttrs {
            priority: req.priority.unwrap_or(base.1.priority),
            pinned: req.pinned.unwrap_or(base.1.pinned),
        },
        mode: 0o644,
        overwrite: mode != WriteMode::Exclusive,
        replicas: None,
    };
    let Some(old) = old else {
        return client.create(path, &opts).await;
    };
    let mut w = client.create(path, &opts).await?;
    let mut chunks = client.chunk_stream(path, &old);
    loop {
        match chunks.next().await {
            Ok(Some(data)) => {
                if let Err(e) = w.write_bytes(data).await {
                    w.abort().await;
                    return Err(e);
                }
            }
            Ok(None) => return Ok(w),
            Err(e) => {
                w.abort().await;
                return Err(e);
            }
        }
    }
}

fn closed(path: &str) -> Error {
    Error::invalid(format!("{path}: I/O operation on a closed file"))
}

/// A file opened for writing (native half of `Client.open(path, "wb")`).
#[pyclass(frozen, module = "tierpool._native")]
pub struct Writer {
    path: String,
    /// `None` once closed or aborted.
    inner: OpenedHere<tokio::sync::Mutex<Option<FileWriter>>>,
}

impl Writer {
    pub fn new(path: String, w: FileWriter) -> Writer {
        Writer { path, inner: OpenedHere::new(tokio::sync::Mutex::new(Some(w))) }
    }

    /// The writer's state, checked before anything waits on it.
    fn inner(&self, py: Python<'_>) -> PyResult<&tokio::sync::Mutex<Option<FileWriter>>> {
        self.inner.get(&self.path).map_err(|e| to_py_err(py, e))
    }
}

#[pymethods]
impl Writer {
    /// Path the file will be published at.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Bytes written so far (including appended-to content).
    #[getter]
    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.inner(py)?;
        wait(py, async { Ok(inner.lock().await.as_ref().map_or(0, |w| w.size())) })
    }

    /// Whether `close()` or `abort()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner(py)?;
        wait(py, async { Ok(inner.lock().await.is_none()) })
    }

    /// Appends the bytes of `data` (any contiguous buffer); returns their number.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let inner = self.inner(py)?;
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        wait(py, async {
            let mut g = inner.lock().await;
            let w = g.as_mut().ok_or_else(|| closed(&self.path))?;
            w.write(src).await?;
            Ok(src.len())
        })
    }

    /// Stores what is buffered and publishes the file atomically; returns its metadata.
    /// Closing a closed writer is an error.
    fn close(&self, py: Python<'_>) -> PyResult<FileInfo> {
        let inner = self.inner(py)?;
        let info = wait(py, async {
            let w = inner.lock().await.take().ok_or_else(|| closed(&self.path))?;
            w.close().await
        })?;
        Ok(FileInfo::new(self.path.clone(), &info))
    }

    /// Gives up: deletes what was stored, publishes nothing. Does nothing if closed.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner(py)?;
        wait(py, async {
            if let Some(w) = inner.lock().await.take() {
                w.abort().await;
            }
            Ok(())
        })
    }
}
