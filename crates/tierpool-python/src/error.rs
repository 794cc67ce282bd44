//! tierpool errors as Python exceptions: one class per [`ErrorKind`], all
//! subclasses of `tierpool.TierpoolError`, each also a subclass of the
//! built-in exception a Python programmer expects (`FileNotFoundError`,
//! `OSError` with `errno.ENOSPC`, `ConnectionError`, `PermissionError`, `ValueError`, ...), so
//! `except FileNotFoundError` and `except tierpool.TierpoolError` both work.
//!
//! [`to_py_err`] is the only place where a kind is mapped to an exception;
//! the `errno` of the `OSError` family is the kind's own
//! ([`ErrorKind::errno`]), the same value the FUSE mount returns.
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
    doc: &'static str,
}

impl KindClass {
    /// Whether the built-in is an `OSError`, whose instances carry the kind's errno.
    fn is_os_error(&self) -> bool {
        self.builtin != "ValueError"
    }
}

const CLASSES: &[KindClass] = &[
    KindClass {
        kind: ErrorKind::NotFound,
        name: "NotFound",
        builtin: "FileNotFoundError",
        doc: "The path, inode, chunk or worker does not exist.",
    },
    KindClass {
        kind: ErrorKind::AlreadyExists,
        name: "AlreadyExists",
        builtin: "FileExistsError",
        doc: "The path already exists.",
    },
    KindClass {
        kind: ErrorKind::NotADirectory,
        name: "NotADirectory",
        builtin: "NotADirectoryError",
        doc: "A path component that must be a directory is not one.",
    },
    KindClass {
        kind: ErrorKind::IsADirectory,
        name: "IsADirectory",
        builtin: "IsADirectoryError",
        doc: "A file operation was given a directory.",
    },
    KindClass {
        kind: ErrorKind::DirectoryNotEmpty,
        name: "DirectoryNotEmpty",
        builtin: "OSError",
        doc: "A directory that must be empty is not (errno ENOTEMPTY).",
    },
    KindClass {
        kind: ErrorKind::PoolFull,
        name: "PoolFull",
        builtin: "OSError",
        doc: "No tier of the pool can hold more data (errno ENOSPC). Data stored before stays readable.",
    },
    KindClass {
        kind: ErrorKind::Unavailable,
        name: "Unavailable",
        builtin: "ConnectionError",
        doc: "The coordinator or a worker cannot be reached or answered too late (errno EHOSTUNREACH).",
    },
    KindClass {
        kind: ErrorKind::Corrupt,
        name: "Corrupt",
        builtin: "OSError",
        doc: "Stored bytes do not match their checksum (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Lost,
        name: "Lost",
        builtin: "OSError",
        doc: "Acknowledged data is gone: it was held only in the memory of a worker that restarted (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Stale,
        name: "Stale",
        builtin: "OSError",
        doc: "The file changed while it was being read (replaced, rewritten or removed); read it again (errno ESTALE).",
    },
    KindClass {
        kind: ErrorKind::InvalidArgument,
        name: "InvalidArgument",
        builtin: "ValueError",
        doc: "The request itself is wrong: bad size, bad path, bad value.",
    },
    KindClass {
        kind: ErrorKind::Protocol,
        name: "Protocol",
        builtin: "OSError",
        doc: "A peer sent a message that cannot be decoded or has the wrong version (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Io,
        name: "Io",
        builtin: "OSError",
        doc: "A local I/O error other than the ones above (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Internal,
        name: "Internal",
        builtin: "OSError",
        doc: "A broken invariant inside tierpool; please report it (errno EIO).",
    },
    KindClass {
        kind: ErrorKind::Unauthenticated,
        name: "Unauthenticated",
        builtin: "PermissionError",
        doc: "The pool refused this client's secret, or the client has none, or the secret file cannot be \
              used (errno EACCES). Name the pool's secret file with secret_file= or $TIERPOOL_SECRET_FILE.",
    },
    KindClass {
        kind: ErrorKind::ReadOnly,
        name: "ReadOnly",
        builtin: "OSError",
        doc: "The path cannot change: it is in a snapshot (beneath .snapshots) or in an under-store attached \
              read-only (errno EROFS).",
    },
    KindClass {
        kind: ErrorKind::Busy,
        name: "Busy",
        builtin: "OSError",
        doc: "The path is in use in a way the request cannot go with, such as a region open in another client \
              while it would be restored (errno EBUSY).",
    },
    KindClass {
        kind: ErrorKind::Conflict,
        name: "Conflict",
        builtin: "OSError",
        doc: "A transaction was aborted: another one that committed after it began changed what it wrote \
              (first committer wins), or it was abandoned; nothing of it is visible (errno ECANCELED).",
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
        return PyOSError::new_err((e.kind.errno(), e.message));
    };
    let ty = match types(py) {
        Ok(all) => all[i + 1].bind(py).clone(),
        Err(err) => return err,
    };
    if CLASSES[i].is_os_error() {
        PyErr::from_type(ty, (e.kind.errno(), e.message))
    } else {
        PyErr::from_type(ty, (e.message,))
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
        for k in ErrorKind::ALL {
            assert_eq!(CLASSES.iter().filter(|c| c.kind == k).count(), 1, "{k:?}");
        }
        assert_eq!(CLASSES.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn only_invalid_argument_is_outside_the_os_error_family() {
        for c in CLASSES {
            assert_eq!(c.is_os_error(), c.kind != ErrorKind::InvalidArgument, "{}", c.name);
        }
    }
}
