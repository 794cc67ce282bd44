//! The process's tokio runtime and the one helper through which Python
//! threads wait for tierpool.
//!
//! Invariant: nothing blocks while the GIL is held: every wait goes through
//! [`blocking`] (directly, or through [`wait`] for futures), so other Python
//! threads keep running, and doing their own I/O in parallel, while one waits.
//!
//! The runtime is made on first use in each process ([`PerProcess`]): a child
//! forked after the parent used tierpool makes its own and never touches the
//! parent's (which it leaks), see `fork.rs`.

use crate::error::to_py_err;
use crate::fork::PerProcess;
use pyo3::prelude::*;
use std::future::Future;
use tokio::runtime::Runtime;

static RUNTIME: PerProcess<Runtime> = PerProcess::new();

/// This process's multi-thread runtime, shared by all its clients.
pub fn runtime() -> &'static Runtime {
    let made = RUNTIME.get_or_try_init(|| {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("tierpool-io")
            .enable_all()
            .build()
    });
    made.expect("cannot start the tierpool I/O runtime (out of threads or file descriptors?)")
}

/// Runs `f` with the GIL released and maps its error to a Python exception:
/// the only place where the binding releases the GIL.
pub fn blocking<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> tierpool_types::Result<T> + Send,
    T: Send,
{
    py.detach(f).map_err(|e| to_py_err(py, e))
}

/// Runs `fut` to completion on this process's runtime, through [`blocking`].
/// Every call of the client that waits for the pool goes through here.
pub fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = tierpool_types::Result<T>> + Send,
    T: Send,
{
    blocking(py, || runtime().block_on(fut))
}
