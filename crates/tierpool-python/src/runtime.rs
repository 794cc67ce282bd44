//! The shared tokio runtime and the one helper through which Python threads
//! wait for tierpool I/O.
//!
//! Invariant: no call into the runtime happens while the GIL is held, so
//! other Python threads keep running (and doing their own I/O in parallel)
//! while one waits. The runtime is created on first use and lives as long as
//! the process; it does not survive `fork()` (connect again in a child that
//! was forked after the parent used tierpool).

use crate::error::to_py_err;
use pyo3::prelude::*;
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The process-wide multi-thread runtime of all clients.
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("tierpool-io")
            .enable_all()
            .build()
            .expect("cannot start the tierpool I/O runtime (out of threads or file descriptors?)")
    })
}

/// Runs `fut` to completion on the shared runtime with the GIL released and
/// maps its error to a Python exception. Every blocking call of the client
/// goes through here.
pub fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = tierpool_types::Result<T>> + Send,
    T: Send,
{
    wait_on(py, runtime(), fut)
}

/// [`wait`] on a given runtime (the servers of `serve` run on their own).
/// The only place where the binding releases the GIL.
pub fn wait_on<T, F>(py: Python<'_>, rt: &Runtime, fut: F) -> PyResult<T>
where
    F: Future<Output = tierpool_types::Result<T>> + Send,
    T: Send,
{
    py.detach(|| rt.block_on(fut)).map_err(|e| to_py_err(py, e))
}
