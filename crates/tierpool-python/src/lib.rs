//! PyO3 glue for the `tierpool` Python package (`tierpool._native`).
//!
//! A thin shell over [`tierpool_client`]: the classes here hold a Rust client
//! (or a reader or writer made by one) and translate arguments and results.
//! Three rules keep it thin and safe:
//! - every call that waits for the pool goes through [`runtime::wait`] (or
//!   [`runtime::blocking`] for calls that block without a future), which
//!   releases the GIL while the process's tokio runtime does the I/O;
//! - every tierpool error becomes a Python exception in [`error::to_py_err`], and
//!   nowhere else;
//! - state tied to a process (the runtime, connections, open files, regions)
//!   is never used or dropped by a child forked from it ([`fork`]).
//!
//! The Python package (`python/tierpool/`) adds only ergonomics on top: `io`
//! objects, `tierpool.local()`, the fsspec filesystem and the Dask spill mapping.

mod args;
mod buffer;
mod client;
mod error;
mod fork;
mod info;
mod reader;
mod region;
mod runtime;
mod transaction;
mod writer;

use pyo3::prelude::*;

/// The native half of the `tierpool` package. Use `tierpool` instead.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    error::register(m)?;
    m.add_class::<client::Client>()?;
    m.add_class::<info::FileInfo>()?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<writer::Writer>()?;
    m.add_class::<region::Region>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_function(wrap_pyfunction!(info::parse_size, m)?)?;
    Ok(())
}
