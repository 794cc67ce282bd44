//! `Client`: the native handle to a pool. Paths are cleaned here (absolute,
//! no empty components) so results always carry canonical paths.
//!
//! The connections belong to one process: a client used in a child forked
//! after it connected connects again on its first use there (`fork.rs`).

use crate::args;
use crate::buffer::BufferView;
use crate::error::{invalid, to_py_err};
use crate::fork::PerProcess;
use crate::info::{clean_path, join, status_dict, view_to_py, FileInfo};
use crate::reader::{Reader, ReaderCore};
use crate::runtime::{blocking, wait, wait_shared};
use crate::writer::{self, WriteMode, WriteRequest, Writer};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;
use std::time::Duration;
use tierpool_client::view::{FsckView, ReplicatedView};
use tierpool_client::{ClientConfig, InodeKind, PutOptions};
use tierpool_types::{ChunkAttrs, Error, ErrorKind, DEFAULT_CHUNK_SIZE};
use tokio::io::AsyncWriteExt;

/// A connection to a tierpool pool (native half of `tierpool.Client`).
#[pyclass(frozen, module = "tierpool._native")]
pub struct Client {
    address: String,
    timeout: Duration,
    /// The secret file given, if any (else the client looks for one: see `ClientConfig::secret_file`).
    secret_file: Option<PathBuf>,
    /// This process's connection to the pool.
    conn: PerProcess<tierpool_client::Client>,
}

impl Client {
    /// The connection of this process: the one `new` made, or in a child
    /// forked since, a new one made now (which may fail like `new`).
    fn conn(&self, py: Python<'_>) -> PyResult<&tierpool_client::Client> {
        self.conn.get_or_try_init(|| connect(py, &self.address, self.timeout, self.secret_file.clone()))
    }
}

fn connect(
    py: Python<'_>,
    address: &str,
    timeout: Duration,
    secret_file: Option<PathBuf>,
) -> PyResult<tierpool_client::Client> {
    let mut cfg = ClientConfig::new(address);
    cfg.connect_timeout = timeout;
    cfg.secret_file = secret_file;
    wait_shared(py, tierpool_client::Client::connect(cfg))
}

/// Options of a new file or region, checked (defaults: 4 MiB chunks, priority 3).
fn put_options(
    chunk_size: Option<&Bound<'_, PyAny>>,
    priority: Option<&Bound<'_, PyAny>>,
    pinned: bool,
    overwrite: bool,
) -> PyResult<PutOptions> {
    let chunk_size = args::chunk_size(chunk_size)?.unwrap_or(DEFAULT_CHUNK_SIZE);
    let priority = args::priority(priority)?.unwrap_or_default();
    Ok(PutOptions { chunk_size, attrs: ChunkAttrs { priority, pinned }, mode: 0o644, overwrite, replicas: None })
}

fn is_a_directory(path: &str) -> Error {
    Error::new(ErrorKind::IsADirectory, format!("{path}: is a directory"))
}

#[pymethods]
impl Client {
    /// Connects to the coordinator at `address` (`host:port`), proving the
    /// pool's secret (from `secret_file`, else the file `tierpool up` recorded
    /// for `address`, else `$TIERPOOL_SECRET_FILE`), and checks that it answers.
    #[new]
    #[pyo3(signature = (address, timeout=3.0, secret_file=None))]
    fn new(py: Python<'_>, address: String, timeout: f64, secret_file: Option<PathBuf>) -> PyResult<Client> {
        let timeout = args::timeout(py, timeout)?;
        let conn = PerProcess::with(connect(py, &address, timeout, secret_file.clone())?);
        Ok(Client { address, timeout, secret_file, conn })
    }

    /// Coordinator address, `host:port`.
    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    /// The secret file this client was given, or `None` if it found its own.
    #[getter]
    fn secret_file(&self) -> Option<String> {
        self.secret_file.as_ref().map(|p| p.to_string_lossy().into_owned())
    }

    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<FileInfo> {
        let c = self.conn(py)?;
        let path = clean_path(path);
        let info = wait(py, c.stat(&path))?;
        Ok(FileInfo::new(path, &info))
    }

    /// Entries of a directory (sorted by name), or the file itself.
    fn ls(&self, py: Python<'_>, path: &str) -> PyResult<Vec<FileInfo>> {
        let c = self.conn(py)?;
        let path = clean_path(path);
        let (entries, is_file) = wait(py, async {
            let entries = c.list(&path).await?;
            // A file lists as itself; so does a directory holding one file of
            // its own name. Only a stat tells them apart.
            let maybe_file = matches!(entries.as_slice(), [e] if e.info.kind == InodeKind::File
                && path.rsplit('/').next() == Some(e.name.as_str()));
            let is_file = maybe_file && c.stat(&path).await?.kind == InodeKind::File;
            Ok((entries, is_file))
        })?;
        if is_file {
            return Ok(entries.iter().map(|e| FileInfo::new(path.clone(), &e.info)).collect());
        }
        Ok(entries.iter().map(|e| FileInfo::new(join(&path, &e.name), &e.info)).collect())
    }

    #[pyo3(signature = (path, parents=false))]
    fn mkdir(&self, py: Python<'_>, path: &str, parents: bool) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.mkdir(&clean_path(path), parents))
    }

    /// Removes a file or directory; returns how many files and directories went away.
    #[pyo3(signature = (path, recursive=false))]
    fn rm(&self, py: Python<'_>, path: &str, recursive: bool) -> PyResult<u64> {
        let c = self.conn(py)?;
        wait(py, c.remove(&clean_path(path), recursive))
    }

    fn mv(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.rename(&clean_path(src), &clean_path(dst)))
    }

    /// Sets priority and/or pinning of a file or of every file under a directory.
    #[pyo3(signature = (path, priority=None, pinned=None))]
    fn set_attrs(
        &self,
        py: Python<'_>,
        path: &str,
        priority: Option<&Bound<'_, PyAny>>,
        pinned: Option<bool>,
    ) -> PyResult<u64> {
        let priority = args::priority(priority)?;
        let c = self.conn(py)?;
        wait(py, c.set_attrs(&clean_path(path), priority, pinned))
    }

    /// Allocates a zero-filled region of `size` bytes at `path` (its space is
    /// reserved now: ENOSPC if the pool cannot hold it) and opens it with a
    /// local cache of `cache` bytes.
    #[pyo3(signature = (path, size, cache, chunk_size=None, priority=None, pinned=false))]
    #[allow(clippy::too_many_arguments)]
    fn alloc_region(
        &self,
        py: Python<'_>,
        path: &str,
        size: &Bound<'_, PyAny>,
        cache: &Bound<'_, PyAny>,
        chunk_size: Option<&Bound<'_, PyAny>>,
        priority: Option<&Bound<'_, PyAny>>,
        pinned: bool,
    ) -> PyResult<crate::region::Region> {
        let o = put_options(chunk_size, priority, pinned, false)?;
        let size = args::region_size(size)?;
        let cache = args::cache(cache, size, o.chunk_size)?;
        let c = self.conn(py)?;
        let opts = tierpool_client::RegionOptions { chunk_size: o.chunk_size, attrs: o.attrs, mode: 0o644 };
        let path = clean_path(path);
        let info = wait(py, c.alloc_region(&path, size, &opts))?;
        blocking(py, || crate::region::open(c, &path, info, cache, false))
    }

    /// Opens the existing region at `path` with a local cache of `cache` bytes;
    /// `readonly` shares one copy of its pages with this node's other read-only openers.
    /// With `checkpoint`, that checkpoint of it, read-only.
    #[pyo3(signature = (path, cache, readonly=false, checkpoint=None))]
    fn open_region(
        &self,
        py: Python<'_>,
        path: &str,
        cache: &Bound<'_, PyAny>,
        readonly: bool,
        checkpoint: Option<&str>,
    ) -> PyResult<crate::region::Region> {
        args::position(cache, "cache")?;
        let c = self.conn(py)?;
        let path = clean_path(path);
        let info = match checkpoint {
            Some(name) => wait(py, c.checkpoint_info(&path, name))?,
            None => wait(py, c.open_region(&path))?,
        };
        let cache = args::cache(cache, info.size, info.chunk_size)?;
        blocking(py, || crate::region::open(c, &path, info, cache, readonly))
    }

    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let s = wait(py, c.status())?;
        status_dict(py, &self.address, &s)
    }

    /// Makes `path` (with `recursive`, everything beneath it too) keep
    /// `replicas` copies of each chunk, copying or dropping the copies of
    /// what exists: `{"files", "chunks", "bytes"}` changed.
    #[pyo3(signature = (path, replicas, recursive=false))]
    fn set_replicas<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        replicas: &Bound<'py, PyAny>,
        recursive: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let replicas = args::replicas(replicas)?;
        let c = self.conn(py)?;
        let path = clean_path(path);
        let done = wait(py, c.set_replicas(&path, replicas, recursive, &mut |_, _| {}))?;
        view_to_py(py, &ReplicatedView::new(&done))
    }

    /// Sets where new chunks of `path` are written (with `recursive`, of
    /// everything beneath it too): returns how many paths took it.
    #[pyo3(signature = (path, placement, recursive=false))]
    fn set_placement(&self, py: Python<'_>, path: &str, placement: &str, recursive: bool) -> PyResult<u64> {
        let placement: tierpool_types::Placement = placement.parse().map_err(|e| crate::error::to_py_err(py, e))?;
        let c = self.conn(py)?;
        wait(py, c.set_placement(&clean_path(path), placement, recursive))
    }

    /// The files and regions at or under `path` short of copies (or with
    /// none left): `[{"path", "replicas", "chunks", "under", "lost"}]`.
    #[pyo3(signature = (path="/"))]
    fn fsck<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let entries = wait(py, c.fsck(&clean_path(path)))?;
        view_to_py(py, &entries.iter().map(FsckView::new).collect::<Vec<_>>())
    }

    /// Attaches the under-store at `uri` at pool directory `path`: its tree
    /// appears there without copying data. `{"files", "dirs", "bytes"}`.
    #[pyo3(signature = (uri, path, mode="through", readonly=false, options=None))]
    fn attach<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        path: &str,
        mode: &str,
        readonly: bool,
        options: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mode = tierpool_meta::WriteMode::parse(mode)
            .ok_or_else(|| to_py_err(py, Error::invalid(format!("write mode {mode:?}: through, back or pool-only"))))?;
        let c = self.conn(py)?;
        let (path, options) = (clean_path(path), options.unwrap_or_default());
        let p = wait(py, c.attach(uri, &path, mode, readonly, &options, &|_| {}))?;
        view_to_py(py, &serde_json::json!({"files": p.files, "dirs": p.dirs, "bytes": p.bytes}))
    }

    /// Detaches the under-store at `path`; returns how many entries went.
    #[pyo3(signature = (path, force=false))]
    fn detach(&self, py: Python<'_>, path: &str, force: bool) -> PyResult<u64> {
        let c = self.conn(py)?;
        wait(py, c.detach(&clean_path(path), force))
    }

    /// `[{"path", "uri", "mode", "readonly", "options"}]`, secrets hidden.
    fn attachments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let all = wait(py, c.attachments())?;
        let v: Vec<_> = (all.iter())
            .map(|a| {
                serde_json::json!({"path": a.path, "uri": a.attachment.uri, "mode": a.attachment.mode.name(),
                    "readonly": a.attachment.readonly, "options": tierpool_under::redact(&a.attachment.options)})
            })
            .collect();
        view_to_py(py, &v)
    }

    /// Takes snapshot `name` of the file or tree at `path` (atomically, no
    /// data copied): `{"path", "name", "created", "entries", "bytes", "kept_bytes"}`.
    fn snapshot_create<'py>(&self, py: Python<'py>, path: &str, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let s = wait(py, c.snapshot_create(&clean_path(path), name))?;
        view_to_py(py, &snapshot_json(&s))
    }

    /// The snapshots of `path` (of every path: `None`), as `snapshot_create` describes one.
    #[pyo3(signature = (path=None))]
    fn snapshots<'py>(&self, py: Python<'py>, path: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let path = path.map(clean_path);
        let all = wait(py, c.snapshots(path.as_deref()))?;
        view_to_py(py, &all.iter().map(snapshot_json).collect::<Vec<_>>())
    }

    /// Copies back the chunks of region `path` that differ from its
    /// checkpoint `name`: what it copied, as a dict.
    fn restore_region<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        name: &str,
    ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let c = self.conn(py)?;
        let r = wait(py, c.restore_region(&clean_path(path), name))?;
        crate::region::report_dict(py, &r)
    }

    /// Begins a transaction over files, reading the pool as it is now.
    fn transaction(&self, py: Python<'_>) -> PyResult<crate::transaction::Transaction> {
        let c = self.conn(py)?;
        let tx = wait(py, c.begin())?;
        Ok(crate::transaction::Transaction::new(tx))
    }

    /// Removes snapshot `name` of `path`; what only it kept is freed.
    fn snapshot_remove(&self, py: Python<'_>, path: &str, name: &str) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.snapshot_remove(&clean_path(path), name))
    }

    /// Puts snapshot `name` back at `path`, replacing what is there, in one step.
    fn snapshot_restore(&self, py: Python<'_>, path: &str, name: &str) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.snapshot_restore(&clean_path(path), name)).map(|_| ())
    }

    /// Loads the files at or beneath `path` from their under-store.
    fn load<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let p = wait(py, c.load(&clean_path(path), &|_| {}))?;
        view_to_py(py, &serde_json::json!({"files": p.files, "bytes": p.bytes}))
    }

    /// Lets go of the pool's copies of the clean files at or beneath `path`.
    fn free<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let r = wait(py, c.free(&clean_path(path)))?;
        view_to_py(py, &serde_json::json!({"files": r.files, "bytes": r.bytes, "skipped": r.skipped}))
    }

    /// Writes the files at or beneath `path` with changes not yet below.
    fn sync<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let r = wait(py, c.sync(&clean_path(path), &|_| {}))?;
        view_to_py(py, &serde_json::json!({"files": r.files, "bytes": r.bytes}))
    }

    /// Gives the file at `path` (with `recursive`, every file beneath the
    /// directory) its own write mode; `None` or `"attachment"`: its
    /// attachment's again. `{"files", "written"}`.
    #[pyo3(signature = (path, mode, recursive=false))]
    fn set_write_mode<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        mode: Option<&str>,
        recursive: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mode = match mode {
            None | Some("attachment") => None,
            Some(m) => Some(tierpool_meta::WriteMode::parse(m).ok_or_else(|| {
                to_py_err(py, Error::invalid(format!("write mode {m:?}: through, back, pool-only or attachment")))
            })?),
        };
        let c = self.conn(py)?;
        let r = wait(py, c.set_write_mode(&clean_path(path), mode, recursive))?;
        view_to_py(py, &serde_json::json!({"files": r.files, "written": r.written}))
    }

    /// The write mode the file at `path` follows: `{"mode", "own"}`.
    fn write_mode<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let (mode, own) = wait(py, c.write_mode(&clean_path(path)))?;
        view_to_py(py, &serde_json::json!({"mode": mode.name(), "own": own}))
    }

    /// Brings the attached tree at or beneath `path` up to date with its under-store.
    fn sync_meta<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.conn(py)?;
        let r = wait(py, c.sync_meta(&clean_path(path)))?;
        let v =
            serde_json::json!({"added": r.added, "changed": r.changed, "removed": r.removed, "conflicts": r.conflicts});
        view_to_py(py, &v)
    }

    /// Starts emptying worker `worker`: its partitions move to the others.
    fn drain(&self, py: Python<'_>, worker: u32) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.drain_worker(tierpool_types::WorkerId(worker)))
    }

    /// Removes worker `worker`: the partitions it owned (now the others')
    /// and the paths of what only it held.
    fn remove_worker(&self, py: Python<'_>, worker: u32) -> PyResult<(Vec<u32>, Vec<String>)> {
        let c = self.conn(py)?;
        wait(py, c.remove_worker(tierpool_types::WorkerId(worker)))
    }

    /// Sets partitions moving toward the shares the weights ask for.
    fn rebalance(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.conn(py)?;
        wait(py, c.rebalance())
    }

    /// Writes the bytes of `data` (any contiguous buffer) to `path`.
    #[pyo3(signature = (path, data, chunk_size=None, priority=None, pinned=false, overwrite=true))]
    #[allow(clippy::too_many_arguments)]
    fn put_bytes(
        &self,
        py: Python<'_>,
        path: &str,
        data: &Bound<'_, PyAny>,
        chunk_size: Option<&Bound<'_, PyAny>>,
        priority: Option<&Bound<'_, PyAny>>,
        pinned: bool,
        overwrite: bool,
    ) -> PyResult<FileInfo> {
        let opts = put_options(chunk_size, priority, pinned, overwrite)?;
        let c = self.conn(py)?;
        let path = clean_path(path);
        let view = BufferView::readonly(data)?;
        let src = view.as_slice();
        let info = wait(py, async {
            let mut w = c.create(&path, &opts).await?;
            if let Err(e) = w.write(src).await {
                w.abort().await;
                return Err(e);
            }
            w.close().await
        })?;
        Ok(FileInfo::new(path, &info))
    }

    /// Writes each `(path, data)` (any contiguous buffers), several at
    /// once: per item, in order, its `FileInfo` or the exception it failed
    /// with (returned, not raised).
    #[pyo3(signature = (items, chunk_size=None, priority=None, pinned=false, overwrite=true))]
    fn put_many<'py>(
        &self,
        py: Python<'py>,
        items: Vec<(String, Bound<'py, PyAny>)>,
        chunk_size: Option<&Bound<'py, PyAny>>,
        priority: Option<&Bound<'py, PyAny>>,
        pinned: bool,
        overwrite: bool,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let opts = put_options(chunk_size, priority, pinned, overwrite)?;
        let c = self.conn(py)?;
        let mut batch = Vec::with_capacity(items.len());
        for (path, data) in &items {
            let view = BufferView::readonly(data)?;
            batch.push((clean_path(path), bytes::Bytes::copy_from_slice(view.as_slice())));
        }
        let paths: Vec<String> = batch.iter().map(|(p, _)| p.clone()).collect();
        let results = wait(py, async { Ok(c.put_many(batch, &opts).await) })?;
        (paths.into_iter().zip(results))
            .map(|(path, r)| match r {
                Ok(info) => Ok(Bound::new(py, FileInfo::new(path, &info))?.into_any()),
                Err(e) => Ok(to_py_err(py, e).into_value(py).into_bound(py).into_any()),
            })
            .collect()
    }

    /// The whole content of each of `paths`, several at once: per path, in
    /// order, its bytes or the exception reading it failed with (returned,
    /// not raised).
    fn get_many<'py>(&self, py: Python<'py>, paths: Vec<String>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let c = self.conn(py)?;
        let paths: Vec<String> = paths.iter().map(|p| clean_path(p)).collect();
        let results = wait(py, async { Ok(c.get_many(paths).await) })?;
        (results.into_iter())
            .map(|r| match r {
                Ok(data) => Ok(PyBytes::new(py, &data).into_any()),
                Err(e) => Ok(to_py_err(py, e).into_value(py).into_bound(py).into_any()),
            })
            .collect()
    }

    /// Copies the local file `local` to `path`, streaming chunk by chunk.
    #[pyo3(signature = (local, path, chunk_size=None, priority=None, pinned=false, overwrite=true))]
    #[allow(clippy::too_many_arguments)]
    fn put_file(
        &self,
        py: Python<'_>,
        local: std::path::PathBuf,
        path: &str,
        chunk_size: Option<&Bound<'_, PyAny>>,
        priority: Option<&Bound<'_, PyAny>>,
        pinned: bool,
        overwrite: bool,
    ) -> PyResult<FileInfo> {
        let opts = put_options(chunk_size, priority, pinned, overwrite)?;
        let c = self.conn(py)?;
        let path = clean_path(path);
        let info = wait(py, async {
            let f = tokio::fs::File::open(&local).await.map_err(|e| Error::from(e).context(local.display()))?;
            if f.metadata().await.map_err(|e| Error::from(e).context(local.display()))?.is_dir() {
                return Err(is_a_directory(&local.display().to_string()));
            }
            c.put_reader(&path, tokio::io::BufReader::with_capacity(1 << 20, f), &opts).await
        })?;
        Ok(FileInfo::new(path, &info))
    }

    /// Bytes `start..end` of the file at `path` (`end=None`: to its end).
    #[pyo3(signature = (path, start=None, end=None))]
    fn get_bytes<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let start = args::opt_position(start, "start")?.unwrap_or(0);
        let end = args::opt_position(end, "end")?;
        let c = self.conn(py)?;
        let path = clean_path(path);
        let info = wait(py, c.stat(&path))?;
        if info.kind == InodeKind::Dir {
            return Err(to_py_err(py, is_a_directory(&path)));
        }
        wait(py, c.check_origin(&path, &info))?;
        let end = end.unwrap_or(info.size).min(info.size);
        let n = end.saturating_sub(start) as usize;
        PyBytes::new_with(py, n, |buf| wait(py, c.read_at(&path, &info, start, buf)).map(|_| ()))
    }

    /// Copies the file at `path` to the local file `local`; returns its size.
    fn get_file(&self, py: Python<'_>, path: &str, local: std::path::PathBuf) -> PyResult<u64> {
        let c = self.conn(py)?;
        let path = clean_path(path);
        wait(py, async {
            let f = tokio::fs::File::create(&local).await.map_err(|e| Error::from(e).context(local.display()))?;
            let mut out = tokio::io::BufWriter::with_capacity(1 << 20, f);
            let res = c.get_writer(&path, &mut out).await;
            let res = match res {
                Ok(n) => out.shutdown().await.map(|_| n).map_err(|e| Error::from(e).context(local.display())),
                Err(e) => Err(e),
            };
            if res.is_err() {
                let _ = tokio::fs::remove_file(&local).await;
            }
            res
        })
    }

    /// Opens one version of a file for reading.
    fn open_reader(&self, py: Python<'_>, path: &str) -> PyResult<Reader> {
        let c = self.conn(py)?;
        let path = clean_path(path);
        let info = wait(py, c.stat(&path))?;
        if info.kind == InodeKind::Dir {
            return Err(to_py_err(py, is_a_directory(&path)));
        }
        wait(py, c.check_origin(&path, &info))?;
        Ok(Reader::new(ReaderCore::new(c.clone(), path, info)))
    }

    /// Opens a file for writing; `mode` is `"w"` (replace), `"a"` (append) or `"x"` (create).
    /// Unset options take the defaults, or when appending, the file's own.
    #[pyo3(signature = (path, mode="w", chunk_size=None, priority=None, pinned=None))]
    fn open_writer(
        &self,
        py: Python<'_>,
        path: &str,
        mode: &str,
        chunk_size: Option<&Bound<'_, PyAny>>,
        priority: Option<&Bound<'_, PyAny>>,
        pinned: Option<bool>,
    ) -> PyResult<Writer> {
        let chunk_size = args::chunk_size(chunk_size)?;
        let priority = args::priority(priority)?;
        let c = self.conn(py)?;
        let mode = match mode {
            "w" => WriteMode::Truncate,
            "a" => WriteMode::Append,
            "x" => WriteMode::Exclusive,
            other => return Err(invalid(py, format!("write mode must be 'w', 'a' or 'x', not {other:?}"))),
        };
        let path = clean_path(path);
        let req = WriteRequest { chunk_size, priority, pinned, mode };
        let w = wait(py, writer::open(c, &path, req))?;
        Ok(Writer::new(path, w))
    }

    fn __repr__(&self) -> String {
        format!("<tierpool client of {}>", self.address)
    }
}

fn snapshot_json(s: &tierpool_client::SnapshotSummary) -> serde_json::Value {
    serde_json::json!({"path": s.path, "name": s.name, "created": s.created, "entries": s.entries,
        "bytes": s.bytes, "kept_bytes": s.kept_bytes})
}
