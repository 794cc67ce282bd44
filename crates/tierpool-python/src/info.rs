//! Plain results as Python sees them: `FileInfo` (what `stat` and `ls`
//! return), the pool status as a dict, and size parsing.

use crate::error::to_py_err;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tierpool_client::view::StatusView;
use tierpool_client::{InodeInfo, InodeKind, PoolStatus};
use tierpool_types::ByteSize;

/// Metadata of a file or directory in a pool, as returned by `Client.stat`
/// and `Client.ls(detail=True)`.
#[pyclass(frozen, get_all, module = "tierpool")]
#[derive(Clone)]
pub struct FileInfo {
    /// Absolute path in the pool, e.g. `/data/x.csv`.
    pub path: String,
    /// Last component of `path` (`""` for the root).
    pub name: String,
    /// `"file"` or `"directory"`.
    pub kind: String,
    /// Bytes for a file; number of entries for a directory.
    pub size: u64,
    /// Chunk size of a file in bytes (0 for a directory).
    pub chunk_size: u64,
    /// Permission bits, e.g. `0o644`.
    pub mode: u32,
    /// Last modification, seconds since the Unix epoch.
    pub mtime: f64,
    /// Last status change, seconds since the Unix epoch.
    pub ctime: f64,
    /// Eviction priority 1 (evicted first) ..= 5 (evicted last).
    pub priority: u8,
    /// Whether the chunks are pinned in memory as long as possible.
    pub pinned: bool,
    /// Inode number, unique for the life of the pool (a replaced file gets a new one).
    pub inode: u64,
    /// Number of chunks of a file.
    pub chunks: u64,
    /// Copies of each chunk the pool keeps (of a directory: what new entries in it keep).
    pub replicas: u8,
    /// Where new chunks are written: `hash`, `local`, `round-robin` or
    /// `local-only` (of a directory: what new entries in it take).
    pub placement: String,
    /// A small file whose bytes the metadata holds, not the workers.
    pub inline: bool,
}

#[pymethods]
impl FileInfo {
    /// True for a directory.
    fn is_dir(&self) -> bool {
        self.kind == "directory"
    }

    /// True for a regular file.
    fn is_file(&self) -> bool {
        self.kind == "file"
    }

    /// The fields as a plain dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("path", &self.path)?;
        d.set_item("name", &self.name)?;
        d.set_item("kind", &self.kind)?;
        d.set_item("size", self.size)?;
        d.set_item("chunk_size", self.chunk_size)?;
        d.set_item("mode", self.mode)?;
        d.set_item("mtime", self.mtime)?;
        d.set_item("ctime", self.ctime)?;
        d.set_item("priority", self.priority)?;
        d.set_item("pinned", self.pinned)?;
        d.set_item("inode", self.inode)?;
        d.set_item("chunks", self.chunks)?;
        d.set_item("replicas", self.replicas)?;
        d.set_item("placement", &self.placement)?;
        d.set_item("inline", self.inline)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "FileInfo(path={:?}, kind={:?}, size={}, priority={}, pinned={})",
            self.path,
            self.kind,
            self.size,
            self.priority,
            if self.pinned { "True" } else { "False" }
        )
    }
}

impl FileInfo {
    pub fn new(path: String, i: &InodeInfo) -> FileInfo {
        let name = path.rsplit('/').next().unwrap_or("").to_string();
        FileInfo {
            path,
            name,
            kind: match i.kind {
                InodeKind::File => "file",
                InodeKind::Dir => "directory",
                InodeKind::Region => "region",
                InodeKind::Symlink => "link",
                _ => "other",
            }
            .to_string(),
            size: i.size,
            chunk_size: i.chunk_size,
            mode: i.mode,
            mtime: i.mtime as f64 / 1e9,
            ctime: i.ctime as f64 / 1e9,
            priority: i.attrs.priority.get(),
            pinned: i.attrs.pinned,
            inode: i.id.0,
            chunks: tierpool_client::chunk_count(i),
            replicas: i.replicas,
            placement: i.placement.name().to_string(),
            inline: i.chunks.first().is_some_and(|r| r.is_inline()),
        }
    }
}

/// `path` in the canonical form of the pool: absolute, no empty or `.`
/// components, no trailing `/`. (`..` is left for the coordinator to refuse.)
pub fn clean_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    format!("/{}", parts.join("/"))
}

/// `dir` joined with an entry name.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The parent of a clean path (the root is its own parent).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Parses a byte size such as `"512MiB"`, `"4GiB"`, `"1.5GB"` or `"4096"`.
#[pyfunction]
pub fn parse_size(py: Python<'_>, size: &str) -> PyResult<u64> {
    size.parse::<ByteSize>().map(|s| s.0).map_err(|e| to_py_err(py, e))
}

/// The pool status as nested dicts and lists of plain values: the same
/// shape as `tierpool status --json` (one serde view serves both).
pub fn status_dict<'py>(py: Python<'py>, address: &str, s: &PoolStatus) -> PyResult<Bound<'py, PyAny>> {
    view_to_py(py, &StatusView::new(address, s))
}

/// A view of `tierpool_client::view` as the Python value of its JSON (the
/// shape the command line's `--json` prints).
pub fn view_to_py<'py>(py: Python<'py>, view: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let v =
        serde_json::to_value(view).map_err(|e| to_py_err(py, tierpool_types::Error::internal(format!("view: {e}"))))?;
    to_py(py, &v)
}

/// A JSON value as the Python value `json.loads` would give.
pub fn to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let l = PyList::empty(py);
            for x in items {
                l.append(to_py(py, x)?)?;
            }
            l.into_any()
        }
        Value::Object(map) => {
            let d = PyDict::new(py);
            for (k, x) in map {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_absolute_without_empty_or_dot_components() {
        assert_eq!(clean_path(""), "/");
        assert_eq!(clean_path("/"), "/");
        assert_eq!(clean_path("a/b"), "/a/b");
        assert_eq!(clean_path("//a/./b/"), "/a/b");
    }

    #[test]
    fn join_and_parent_handle_the_root() {
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/a", "x"), "/a/x");
        assert_eq!(parent("/a/x"), "/a");
        assert_eq!(parent("/x"), "/");
        assert_eq!(parent("/"), "/");
    }
}
