//! Numbers that come from Python (sizes, offsets, lengths, priorities,
//! copies, timeouts), checked before anything is allocated or sent.
//!
//! Python ints are unbounded, so every such argument arrives as an object:
//! a negative or absurd value is an `InvalidArgument` error (a `ValueError`)
//! naming the argument, never an `OverflowError`, a `MemoryError` or a
//! panic; a value of the wrong type stays a `TypeError`, as for any Python
//! call. Offsets and read lengths saturate instead of failing, because reads
//! are clamped to the data anyway: `read(2**62)` reads what there is.

use crate::error::{invalid, to_py_err};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use std::time::Duration;
use tierpool_types::{validate_chunk_size, ByteSize, Priority};

/// Largest region the binding opens: half of the 128 TiB address space of a
/// 64-bit Linux process, since a region is mapped whole.
pub const MAX_REGION_SIZE: u64 = 1 << 46;

/// A non-negative int as `u64`; `Err(true)` if it is larger than `u64::MAX`,
/// a Python error if it is negative or not an int.
fn non_negative(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Result<u64, ()>> {
    match v.extract::<u64>() {
        Ok(n) => Ok(Ok(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
            if v.lt(0)? {
                Err(invalid(v.py(), format!("{what} must not be negative, not {v}")))
            } else {
                Ok(Err(()))
            }
        }
        Err(e) => Err(e),
    }
}

/// A byte count that must fit in 64 bits (a size to allocate or send).
pub fn size(v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    non_negative(v, what)?.map_err(|()| invalid(v.py(), format!("{what} {v} is too large")))
}

/// An offset or a read length: past `u64::MAX` it means "past the end".
pub fn position(v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    Ok(non_negative(v, what)?.unwrap_or(u64::MAX))
}

/// [`position`] of an optional argument.
pub fn opt_position(v: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<u64>> {
    v.map(|v| position(v, what)).transpose()
}

/// A chunk size: a multiple of 4 KiB up to the largest a file may have.
pub fn chunk_size(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(v) = v else { return Ok(None) };
    let n = non_negative(v, "chunk size")?.unwrap_or(u64::MAX);
    validate_chunk_size(n).map(Some).map_err(|e| to_py_err(v.py(), e))
}

/// An eviction priority, 1 ..= 5.
pub fn priority(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Priority>> {
    let Some(v) = v else { return Ok(None) };
    let n = non_negative(v, "priority")?.unwrap_or(u64::MAX);
    let n = u8::try_from(n).unwrap_or(u8::MAX);
    Priority::new(n).map(Some).map_err(|e| to_py_err(v.py(), e))
}

/// Copies of each chunk a path keeps: at least one; the coordinator
/// refuses more than the pool keeps, naming its limit.
pub fn replicas(v: &Bound<'_, PyAny>) -> PyResult<u8> {
    let n = non_negative(v, "replicas")?.unwrap_or(u64::MAX);
    match u8::try_from(n) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(invalid(v.py(), format!("replicas must be at least 1 (and at most the pool's), not {v}"))),
    }
}

/// The size of a new region: at least a byte, at most [`MAX_REGION_SIZE`].
pub fn region_size(v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let n = size(v, "region size")?;
    if n > MAX_REGION_SIZE {
        return Err(invalid(
            v.py(),
            format!("region size {} is larger than the {} one process can map", ByteSize(n), ByteSize(MAX_REGION_SIZE)),
        ));
    }
    Ok(n)
}

/// A region's cache: what the region can ever use at most (its size in
/// whole chunks) is enough, so a larger cache is clamped to that.
pub fn cache(v: &Bound<'_, PyAny>, region_size: u64, chunk_size: u64) -> PyResult<u64> {
    let want = position(v, "cache")?;
    Ok(want.min(region_size.div_ceil(chunk_size.max(1)).saturating_mul(chunk_size)))
}

/// A timeout in seconds: positive and finite.
pub fn timeout(py: Python<'_>, seconds: f64) -> PyResult<Duration> {
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if seconds > 0.0 => Ok(d),
        _ => Err(invalid(py, format!("timeout must be a positive number of seconds, not {seconds}"))),
    }
}
