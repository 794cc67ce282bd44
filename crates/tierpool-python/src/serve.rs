//! The server roles, for `python -m tierpool._serve` (what `tierpool.local()`
//! starts): the same coordinator and worker as the `tierpool` binary, so a
//! Python user needs no separate executable.
//!
//! Each call blocks for the life of the server with the GIL released, on a
//! runtime of its own. Every 200 ms it checks for Python signals (Ctrl-C
//! raises `KeyboardInterrupt`) and, with `watch_parent`, whether the process
//! that started it is gone, so an embedded pool never outlives its user.

use crate::error::to_py_err;
use crate::runtime::blocking;
use pyo3::prelude::*;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;
use tierpool_coordinator::CoordinatorConfig;
use tierpool_types::{ByteSize, Result};
use tierpool_worker::WorkerConfig;

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIERPOOL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}

/// Why a server stopped without an error of its own.
enum Stop {
    /// The server future returned.
    Ended,
    /// A Python signal handler raised (Ctrl-C: `KeyboardInterrupt`).
    Signal(PyErr),
    /// The process that started this one is gone.
    Orphaned,
}

fn serve(py: Python<'_>, watch_parent: bool, server: impl Future<Output = Result<()>> + Send) -> PyResult<()> {
    init_logging();
    let parent = std::os::unix::process::parent_id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tierpool-server")
        .build()
        .map_err(|e| to_py_err(py, e.into()))?;
    let stop = blocking(py, || {
        rt.block_on(async {
            tokio::pin!(server);
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    r = &mut server => return r.map(|()| Stop::Ended),
                    _ = tick.tick() => {
                        if watch_parent && std::os::unix::process::parent_id() != parent {
                            return Ok(Stop::Orphaned);
                        }
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            return Ok(Stop::Signal(e));
                        }
                    }
                }
            }
        })
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    match stop? {
        Stop::Ended => Ok(()),
        Stop::Signal(e) => Err(e),
        Stop::Orphaned => {
            tracing::info!("the process that started this server is gone; stopping");
            Ok(())
        }
    }
}

fn size(py: Python<'_>, s: &str) -> PyResult<u64> {
    s.parse::<ByteSize>().map(|b| b.0).map_err(|e| to_py_err(py, e))
}

/// Runs a coordinator until interrupted. `listen` may use port 0; the bound
/// address is written to `DIR/coordinator.addr`.
#[pyfunction]
#[pyo3(signature = (dir, listen="127.0.0.1:7700", partitions=4096, watch_parent=false))]
pub fn serve_coordinator(
    py: Python<'_>,
    dir: PathBuf,
    listen: &str,
    partitions: u32,
    watch_parent: bool,
) -> PyResult<()> {
    if partitions == 0 {
        return Err(crate::error::invalid(py, "partitions must be at least 1"));
    }
    let mut cfg = CoordinatorConfig::new(dir, listen.to_string());
    cfg.partitions = partitions;
    serve(py, watch_parent, tierpool_coordinator::run(cfg))
}

/// Runs a worker until interrupted. `mem` and `disk` are byte sizes such as
/// `"256MiB"`; the bound address is written to `DIR/worker.addr`.
#[pyfunction]
#[pyo3(signature = (dir, coordinator, listen="127.0.0.1:0", mem="256MiB", disk="1GiB", host="localhost", rack="default", watch_parent=false))]
#[allow(clippy::too_many_arguments)]
pub fn serve_worker(
    py: Python<'_>,
    dir: PathBuf,
    coordinator: String,
    listen: &str,
    mem: &str,
    disk: &str,
    host: &str,
    rack: &str,
    watch_parent: bool,
) -> PyResult<()> {
    let cfg = WorkerConfig {
        dir,
        coordinator,
        listen: listen.to_string(),
        host: host.to_string(),
        rack: rack.to_string(),
        mem: size(py, mem)?,
        disk: size(py, disk)?,
    };
    serve(py, watch_parent, tierpool_worker::run(cfg))
}
