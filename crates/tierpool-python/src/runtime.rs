//! The runtimes on which Python threads wait for tierpool, and the helpers
//! through which they wait.
//!
//! Invariant: nothing blocks while the GIL is held: every wait goes through
//! [`blocking`] (directly, or through [`wait`] for futures), so other Python
//! threads keep running, and doing their own I/O in parallel, while one waits.
//!
//! A call waits on a current-thread runtime of the calling thread's own
//! ([`wait`]): the answer wakes that thread itself, not a thread of a shared
//! runtime that then wakes it (a round trip to the pool takes about a third
//! less time). Such a runtime runs only while its thread waits on it, so
//! nothing may be left on it that must go on after the call: the client
//! puts such work (a lease's renewal, chunks read ahead or still being sent,
//! a dropped transaction's abort) on its own runtime, and under-store calls
//! run on the under-store's. That runtime is the process's shared one
//! ([`runtime`]): a client is made on it ([`wait_shared`]).
//!
//! Both are made on first use in each process: a child forked after the
//! parent used tierpool makes its own and never touches the parent's (which
//! it leaks), see `fork.rs`. A thread's own runtime ends with the thread.

use crate::error::to_py_err;
use crate::fork::PerProcess;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::future::Future;
use tokio::runtime::Runtime;

static RUNTIME: PerProcess<Runtime> = PerProcess::new();

/// This process's multi-thread runtime, shared by all its clients.
pub fn runtime() -> &'static Runtime {
    let build = || {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("tierpool-io")
            .enable_all()
            .build()
    };
    // A runtime made by a thread that lost the race is shut down without
    // waiting: dropping one in async context panics.
    let made = RUNTIME.get_or_try_init_or(build, Runtime::shutdown_background);
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

/// Runs `fut` to completion on the calling thread's own runtime, through
/// [`blocking`]. Every call of the client that waits for the pool goes
/// through here, except making a client ([`wait_shared`]).
pub fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = tierpool_types::Result<T>> + Send,
    T: Send,
{
    blocking(py, || own_runtime(|rt| rt.block_on(fut)))
}

/// Runs `fut` to completion on this process's shared runtime, through
/// [`blocking`]: for calls whose client keeps the runtime they ran on.
pub fn wait_shared<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = tierpool_types::Result<T>> + Send,
    T: Send,
{
    blocking(py, || runtime().block_on(fut))
}

/// A thread's own runtime, and the process that made it.
struct Own {
    pid: u32,
    runtime: Runtime,
}

impl Drop for Own {
    /// The thread ends: the connections its runtime opened go now.
    fn drop(&mut self) {
        tierpool_client::runtime_ended(self.runtime.handle().id());
    }
}

thread_local! {
    static OWN: RefCell<Option<Own>> = const { RefCell::new(None) };
}

/// Calls `f` with this thread's own runtime, made on first use. A thread
/// that forked keeps its copy of the parent's in the child: that one is
/// leaked (its epoll instance is the parent's) and a new one made.
fn own_runtime<R>(f: impl FnOnce(&Runtime) -> R) -> R {
    OWN.with(|own| {
        let me = crate::fork::pid();
        if own.borrow().as_ref().is_none_or(|o| o.pid != me) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cannot start a runtime for this thread (out of file descriptors?)");
            if let Some(parents) = own.replace(Some(Own { pid: me, runtime })) {
                std::mem::forget(parents);
            }
        }
        f(&own.borrow().as_ref().expect("made above").runtime)
    })
}
