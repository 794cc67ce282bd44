//! Direct access to the memory of any Python object that exports a
//! contiguous buffer (`bytes`, `bytearray`, `memoryview`, `mmap`, numpy
//! arrays, ...), so reads land in the caller's buffer and writes leave from
//! it without a copy in between.
//!
//! pyo3's `PyBuffer` is not available for abi3 wheels before Python 3.11, but
//! `PyObject_GetBuffer`, `PyBuffer_Release` and the `Py_buffer` layout have not
//! changed since Python 3.3 (they are part of the stable ABI from 3.11 on) and
//! every CPython exports them, so this module declares just those two.
//!
//! Invariants: a [`BufferView`] holds the exporter's buffer (the exporter may
//! not resize or free it) until it is dropped; it is dropped with the GIL
//! (release needs it) and never leaves the thread that made it. Only the
//! slices it hands out cross into GIL-free code.

use pyo3::ffi;
use pyo3::prelude::*;
use std::os::raw::{c_char, c_int, c_void};

/// `Py_buffer`, field for field.
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

const PYBUF_SIMPLE: c_int = 0;
const PYBUF_WRITABLE: c_int = 0x0001;

unsafe extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// A contiguous byte view of a Python object's buffer.
pub struct BufferView {
    // Boxed: exporters may point fields of the struct at the struct itself.
    raw: Box<RawBuffer>,
}

impl BufferView {
    /// Any object with a contiguous buffer, for reading its bytes.
    pub fn readonly(obj: &Bound<'_, PyAny>) -> PyResult<BufferView> {
        BufferView::get(obj, PYBUF_SIMPLE)
    }

    /// A writable contiguous buffer (`bytearray`, `memoryview`, numpy array, ...).
    pub fn writable(obj: &Bound<'_, PyAny>) -> PyResult<BufferView> {
        BufferView::get(obj, PYBUF_WRITABLE)
    }

    fn get(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<BufferView> {
        let mut raw = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: `obj` is a live object (we hold the GIL through `Bound`), and
        // `raw` is a properly laid out, writable `Py_buffer`. On failure the
        // exporter leaves nothing to release and sets a Python exception.
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *raw, flags) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(BufferView { raw })
    }

    pub fn len(&self) -> usize {
        self.raw.len as usize
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.raw.len == 0 {
            return &[];
        }
        // SAFETY: a SIMPLE or WRITABLE request yields `len` contiguous bytes at
        // `buf`, valid until release (in `drop`, which needs `&mut self`).
        unsafe { std::slice::from_raw_parts(self.raw.buf as *const u8, self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.raw.len == 0 {
            return &mut [];
        }
        assert!(self.raw.readonly == 0, "a buffer acquired with PyBUF_WRITABLE is writable");
        // SAFETY: as in `as_slice`; the exporter granted write access, and the
        // `&mut self` borrow makes this the only slice of it on our side.
        unsafe { std::slice::from_raw_parts_mut(self.raw.buf as *mut u8, self.len()) }
    }
}

impl Drop for BufferView {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is
        // released exactly once, with the GIL held.
        Python::attach(|_| unsafe { PyBuffer_Release(&mut *self.raw) });
    }
}
