//! `Transaction`: a transaction over files (native half of
//! `Client.transaction()`), under snapshot isolation: reads see the pool
//! as it was when it began, writes stay here until `commit()` publishes
//! all of them at once, or raises `tierpool.Conflict` if a transaction
//! that committed after it began changed what it wrote.
//!
//! Like a writer it belongs to the process that began it (`fork.rs`).

use crate::buffer::BufferView;
use crate::error::to_py_err;
use crate::fork::OpenedHere;
use crate::info::clean_path;
use crate::runtime::wait;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tierpool_client::{Committed, Transaction as Tx};
use tierpool_types::{Error, ErrorKind};

type Inner = tokio::sync::Mutex<Option<Tx>>;

#[pyclass(frozen, module = "tierpool._native")]
pub struct Transaction {
    id: u64,
    /// `None` once committed or aborted.
    inner: OpenedHere<Inner>,
}

impl Transaction {
    pub fn new(tx: Tx) -> Transaction {
        Transaction { id: tx.id(), inner: OpenedHere::new(tokio::sync::Mutex::new(Some(tx))) }
    }

    fn inner(&self, py: Python<'_>) -> PyResult<&Inner> {
        self.inner.get(&format!("transaction {}", self.id)).map_err(|e| to_py_err(py, e))
    }
}

fn ended(id: u64) -> Error {
    Error::new(ErrorKind::Conflict, format!("transaction {id} has ended (committed or aborted)"))
}

/// Runs `$call` on the open transaction `$tx` (a conflict ends it: the
/// transaction itself refuses any later call).
macro_rules! on_open {
    ($py:expr, $me:expr, |$tx:ident| $call:expr) => {{
        let inner = $me.inner($py)?;
        let id = $me.id;
        wait($py, async move {
            let mut g = inner.lock().await;
            let $tx = g.as_mut().ok_or_else(|| ended(id))?;
            $call.await
        })
    }};
}

#[pymethods]
impl Transaction {
    /// The transaction's id at the coordinator.
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// Whether it has ended (committed, aborted, or lost a conflict).
    #[getter]
    fn ended(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner(py)?;
        wait(py, async { Ok(inner.lock().await.as_ref().is_none_or(|tx| !tx.is_open())) })
    }

    /// `size` bytes (all, if negative) of the file at `path` from `offset`,
    /// as this transaction sees them.
    #[pyo3(signature = (path, offset=0, size=-1))]
    fn read<'py>(&self, py: Python<'py>, path: &str, offset: u64, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let path = clean_path(path);
        let len = u64::try_from(size).unwrap_or(u64::MAX);
        let data = on_open!(py, self, |tx| tx.read(&path, offset, len))?;
        Ok(PyBytes::new(py, &data))
    }

    /// The size of the file at `path`, as this transaction sees it.
    fn size(&self, py: Python<'_>, path: &str) -> PyResult<u64> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.size(&path))
    }

    /// Writes the bytes of `data` at `offset` of the file at `path` (made
    /// if the path is free); visible to this transaction now, to others
    /// once it commits.
    #[pyo3(signature = (path, data, offset=0))]
    fn write(&self, py: Python<'_>, path: &str, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let path = clean_path(path);
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        on_open!(py, self, |tx| async { tx.write(&path, offset, src).await.map(|()| src.len()) })
    }

    /// Appends the bytes of `data` to the file at `path`.
    fn append(&self, py: Python<'_>, path: &str, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let path = clean_path(path);
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        on_open!(py, self, |tx| async { tx.append(&path, src).await.map(|()| src.len()) })
    }

    /// Cuts or extends the file at `path` to `size` bytes.
    fn truncate(&self, py: Python<'_>, path: &str, size: u64) -> PyResult<()> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.truncate(&path, size))
    }

    /// `size` bytes (all to the end, if negative) of the region at `path`
    /// from `offset`, as this transaction sees them.
    #[pyo3(signature = (path, offset=0, size=-1))]
    fn region_read<'py>(&self, py: Python<'py>, path: &str, offset: u64, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let path = clean_path(path);
        let len = u64::try_from(size).unwrap_or(u64::MAX);
        let data = on_open!(py, self, |tx| tx.region_read(&path, offset, len))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Writes the bytes of `data` at `offset` of the region at `path` (they
    /// must fit in it); visible to this transaction now, to others once it
    /// commits.
    #[pyo3(signature = (path, data, offset=0))]
    fn region_write(&self, py: Python<'_>, path: &str, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let path = clean_path(path);
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        on_open!(py, self, |tx| async { tx.region_write(&path, offset, src).await.map(|()| src.len()) })
    }

    /// The size of the region at `path`.
    fn region_size(&self, py: Python<'_>, path: &str) -> PyResult<u64> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.region_size(&path))
    }

    /// Whether `path` names a file or directory in this transaction.
    fn exists(&self, py: Python<'_>, path: &str) -> PyResult<bool> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.exists(&path))
    }

    /// Makes the directory `path` (its parent exists).
    fn mkdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.mkdir(&path))
    }

    /// Removes the entry at `path` (a directory's tree with `recursive`).
    #[pyo3(signature = (path, recursive=false))]
    fn rm(&self, py: Python<'_>, path: &str, recursive: bool) -> PyResult<()> {
        let path = clean_path(path);
        on_open!(py, self, |tx| tx.rm(&path, recursive))
    }

    /// Moves the entry at `src` to `dst`.
    fn mv(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        let (src, dst) = (clean_path(src), clean_path(dst));
        on_open!(py, self, |tx| tx.mv(&src, &dst))
    }

    /// Commits: `True` if this transaction's writes are now visible, all at
    /// once; `False` if another transaction with the same `task_id`
    /// committed first (this one's writes are dropped). Raises
    /// `tierpool.Conflict` if it lost a write-write conflict.
    #[pyo3(signature = (task_id=None))]
    fn commit(&self, py: Python<'_>, task_id: Option<String>) -> PyResult<bool> {
        let inner = self.inner(py)?;
        let id = self.id;
        let r = wait(py, async {
            let tx = inner.lock().await.take().ok_or_else(|| ended(id))?;
            tx.commit(task_id.as_deref()).await
        })?;
        Ok(r == Committed::Now)
    }

    /// Ends the transaction without committing; nothing of it was visible.
    /// Does nothing if it has ended.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner(py)?;
        wait(py, async {
            match inner.lock().await.take() {
                Some(tx) => tx.abort().await,
                None => Ok(()),
            }
        })
    }
}
