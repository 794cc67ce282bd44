//! tierpool errors as Python exceptions: one class per [`ErrorKind`], all
//! subclasses of `tierpool.TierpoolError`, each also a subclass of the
//! built-in exception a Python programmer expects (`FileNotFoundError`,
//! `OSError` with `errno.ENOSPC`, `ConnectionError`, `ValueError`, ...), so
//! `except FileNotFoundError` and `except tierpool.TierpoolError` both work.
//!
//! [`to_py_err`] is the only place where a kind is mapped to an exception.
//! The classes are made at import with `type(name, bases, dict)` because they
//! inherit from two bases, which `create_exception!` cannot express.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use tierpool_types::{Error, ErrorKind};

/// How one kind surfaces in Python.
struct KindClass {
    kind: ErrorKind,
    /// Class name, as the kind is named in Rust.
    name: &'static str,
    /// The built-in exception it also derives from.
    builtin: &'static str,
    /// `errno` of the exception, for the `OSError` family.
    errno: Option<i32>,
    doc: &'static str,
}

// errno values are those of Linux (and every other Unix for these names).
const ENOENT: i32 = 2;
const EIO: i32 = 5;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const ENOSPC: i32 = 28;
const ENOTEMPTY: i32 = 39;

const CLASSES: &[KindClass] = &[
    KindClass {
        kind: ErrorKind::NotFound,
        name: "NotFound",
        builtin: "FileNotFoundError",
        errno: Some(ENOENT),
        doc: "The path, inode, chunk or worker does not exist.",
    },
    KindClass {
        kind: ErrorKind::AlreadyExists,
        name: "AlreadyExists",
        builtin: "FileExistsError",
        errno: Some(EEXIST),
        doc: "The path already exists.",
    },
    KindClass {
        kind: ErrorKind::NotADirectory,
        name: "NotADirectory",
        builtin: "NotADirectoryError",
        errno: Some(ENOTDIR),
        doc: "A path component that must be a directory is not one.",
    },
    KindClass {
        kind: ErrorKind::IsADirectory,
        name: "IsADirectory",
        builtin: "IsADirectoryError",
        errno: Some(EISDIR),
        doc: "A file operation was given a directory.",
    },
    KindClass {
        kind: ErrorKind::DirectoryNotEmpty,
        name: "DirectoryNotEmpty",
        builtin: "OSError",
        errno: Some(ENOTEMPTY),
        doc: "A directory that must be empty is not (errno ENOTEMPTY).",
    },
    KindClass {
        kind: ErrorKind::PoolFull,
        name: "PoolFull",
        builtin: "OSError",
        errno: Some(ENOSPC),
        doc: "No tier of the pool can hold more data (errno ENOSPC). Data stored before stays readable.",
    },
    KindClass {
        kind: ErrorKind::Unavailable,
        name: "Unavailable",
        builtin: "ConnectionError",
        errno: None,
        doc: "The coordinator or a worker cannot be reached or answered too late.",
    },
    KindClass {
        kind: ErrorKind::Corrupt,
        name: "Corrupt",
        builtin: "OSError",
        errno: Some(EIO),
        doc: "Stored bytes do not match their checksum (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Lost,
        name: "Lost",
        builtin: "OSError",
        errno: Some(EIO),
        doc: "Acknowledged data is gone: it was held only in the memory of a worker that restarted (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::InvalidArgument,
        name: "InvalidArgument",
        builtin: "ValueError",
        errno: None,
        doc: "The request itself is wrong: bad size, bad path, bad value.",
    },
    KindClass {
        kind: ErrorKind::Protocol,
        name: "Protocol",
        builtin: "OSError",
        errno: Some(EIO),
        doc: "A peer sent a message that cannot be decoded or has the wrong version (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Io,
        name: "Io",
        builtin: "OSError",
        errno: Some(EIO),
        doc: "A local I/O error other than the ones above (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Internal,
        name: "Internal",
        builtin: "OSError",
        errno: Some(EIO),
        doc: "A broken invariant inside tierpool; please report it (errno EIO).",
    },
];

/// `TierpoolError` first, then one class per entry of [`CLASSES`], in order.
static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn make_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: Bound<'py, PyTuple>,
    doc: &str,
    kind: Option<&str>,
) -> PyResult<Py<PyType>> {
    let dict = PyDict::new(py);
    dict.set_item("__module__", "tierpool")?;
    dict.set_item("__doc__", doc)?;
    dict.set_item("kind", kind)?;
    let ty = py.import("builtins")?.getattr("type")?.call1((name, bases, dict))?;
    Ok(ty.cast_into::<PyType>()?.unbind())
}

fn types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    TYPES.get_or_try_init(py, || {
        let builtins = py.import("builtins")?;
        let exception = builtins.getattr("Exception")?;
        let base = make_class(
            py,
            "TierpoolError",
            PyTuple::new(py, [exception])?,
            "Base class of every error raised by tierpool. Each subclass is named after a \
             tierpool error kind and also derives from the matching built-in exception; \
             `kind` holds the kind's stable short name.",
            None,
        )?;
        let mut out = vec![base.clone_ref(py)];
        for c in CLASSES {
            let bases = PyTuple::new(py, [base.bind(py).clone().into_any(), builtins.getattr(c.builtin)?])?;
            out.push(make_class(py, c.name, bases, c.doc, Some(c.kind.as_str()))?);
        }
        Ok(out)
    })
}

/// Adds `TierpoolError` and the per-kind classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let all = types(py)?;
    m.add("TierpoolError", all[0].clone_ref(py))?;
    for (c, ty) in CLASSES.iter().zip(&all[1..]) {
        m.add(c.name, ty.clone_ref(py))?;
    }
    Ok(())
}

/// The Python exception for a tierpool error. The message is kept as is (it
/// names the path or worker concerned); `OSError` subclasses also get `errno`.
pub fn to_py_err(py: Python<'_>, e: Error) -> PyErr {
    let Some(i) = CLASSES.iter().position(|c| c.kind == e.kind) else {
        return PyOSError::new_err((EIO, e.message));
    };
    let ty = match types(py) {
        Ok(all) => all[i + 1].bind(py).clone(),
        Err(err) => return err,
    };
    match CLASSES[i].errno {
        Some(errno) => PyErr::from_type(ty, (errno, e.message)),
        None => PyErr::from_type(ty, (e.message,)),
    }
}

/// An `InvalidArgument` error raised by the binding itself (bad mode, bad size).
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py_err(py, Error::invalid(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_exactly_one_class() {
        let kinds = [
            ErrorKind::NotFound,
            ErrorKind::AlreadyExists,
            ErrorKind::NotADirectory,
            ErrorKind::IsADirectory,
            ErrorKind::DirectoryNotEmpty,
            ErrorKind::PoolFull,
            ErrorKind::Unavailable,
            ErrorKind::Corrupt,
            ErrorKind::Lost,
            ErrorKind::InvalidArgument,
            ErrorKind::Protocol,
            ErrorKind::Io,
            ErrorKind::Internal,
        ];
        for k in kinds {
            assert_eq!(CLASSES.iter().filter(|c| c.kind == k).count(), 1, "{k:?}");
        }
        assert_eq!(CLASSES.len(), kinds.len());
    }

    #[test]
    fn os_errors_carry_an_errno_and_the_others_do_not() {
        for c in CLASSES {
            let os_family = !matches!(c.builtin, "ValueError" | "ConnectionError");
            assert_eq!(c.errno.is_some(), os_family, "{}", c.name);
        }
    }
}
