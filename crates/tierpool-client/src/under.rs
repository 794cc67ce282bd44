//! Under-stores from the client's side: attaching one (its tree adopted
//! entry by entry, no data copied), loading chunks that are below on first
//! read, letting go of clean copies, writing changed files below
//! (`through`), and keeping the namespace below in step with the pool's.
//!
//! The client does the under-store I/O itself, with the options the
//! attachment stores, so every surface (CLI, Python, mount) gets it.
//! A chunk below is read with the version tag its file's origin recorded:
//! an object changed behind the pool's back is `Stale`, never served as
//! the file's bytes.

use crate::batch::Commits;
use crate::client::{unexpected, unexpected_meta, Client};
use crate::coalesce::Batches;
use crate::placing::Placing;
use bytes::Bytes;
use futures::StreamExt;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;
use tierpool_meta::{
    choose_to_free, normalize, Attachment, InodeInfo, InodeKind, MetaOp, MetaReply, Origin, RoomCandidate, WriteMode,
};
use tierpool_proto::{AttachedDir, CoordRequest, CoordResponse, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkRef, Error, ErrorKind, InodeId, Result, DEFAULT_CHUNK_SIZE};
use tierpool_under::{UnderEntry, UnderStore};

/// What a long under-store operation has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnderProgress {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    /// Files of the total known so far (0 while unknown).
    pub total_files: u64,
    pub total_bytes: u64,
}

/// What `sync_meta` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaSync {
    pub added: u64,
    pub changed: u64,
    pub removed: u64,
    /// Paths changed both in the pool (not yet below) and below.
    pub conflicts: Vec<String>,
}

/// What `free` or `sync` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnderReport {
    pub files: u64,
    pub bytes: u64,
    /// Paths skipped: changes not below (`free`), or failures (`sync`).
    pub skipped: Vec<String>,
}

/// Opened stores, by process, URI and options (one connection pool each): a
/// forked child opens its own, since the tasks of its parent's connections
/// stayed in the parent.
fn stores() -> &'static Mutex<HashMap<String, UnderStore>> {
    static S: OnceLock<Mutex<HashMap<String, UnderStore>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// The store an attachment names, opened once per process (the parent's
/// stay in a forked child, unused and never dropped).
pub fn open_store(a: &Attachment) -> Result<UnderStore> {
    let id = format!("{}\0{}\0{:?}", std::process::id(), a.uri, a.options);
    if let Some(s) = stores().lock().get(&id) {
        return Ok(s.clone());
    }
    let s = UnderStore::open(&a.uri, &a.options)?;
    stores().lock().insert(id, s.clone());
    Ok(s)
}

/// `path` (normalised) relative to the attached directory `dir`, if beneath it.
pub(crate) fn relative(dir: &str, comps: &[String]) -> Option<String> {
    let d: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
    if comps.len() < d.len() || comps.iter().zip(&d).any(|(a, b)| a != b) {
        return None;
    }
    Some(comps[d.len()..].join("/"))
}

pub(crate) fn join(dir: &str, rel: &str) -> String {
    match (dir.trim_end_matches('/'), rel) {
        (d, "") => d.to_string(),
        ("", r) => format!("/{r}"),
        (d, r) => format!("{d}/{r}"),
    }
}

impl Client {
    /// The directories attached to under-stores.
    pub async fn attachments(&self) -> Result<Vec<AttachedDir>> {
        match self.coord(CoordRequest::Attachments).await? {
            CoordResponse::Attachments(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// The attachment `path` is at or beneath, and the path relative to it.
    pub async fn attached_at(&self, path: &str) -> Result<Option<(AttachedDir, String)>> {
        attached_in(&self.attachments().await?, path)
    }

    /// Attaches the under-store at `uri` at pool directory `path` (made if
    /// missing; must be empty) and adopts its tree: names, sizes, times;
    /// no data is copied. `progress` hears of every 256 entries.
    pub async fn attach(
        &self,
        uri: &str,
        path: &str,
        mode: WriteMode,
        readonly: bool,
        options: &BTreeMap<String, String>,
        progress: &(dyn Fn(&UnderProgress) + Send + Sync),
    ) -> Result<UnderProgress> {
        let options = UnderStore::resolve_options(uri, options)?;
        let attachment = Attachment { uri: uri.to_string(), mode, readonly, options };
        let store = open_store(&attachment)?;
        store.check().await?;
        let tree = visible(store.walk().await?);
        self.mkdir(path, true).await?;
        self.meta(MetaOp::Attach { path: path.to_string(), attachment }).await?;
        match self.adopt_tree(path, &tree, progress).await {
            Ok(p) => Ok(p),
            Err(e) => {
                let _ = self.meta(MetaOp::Detach { path: path.to_string() }).await;
                Err(e.context(format!("attaching {uri} at {path}")))
            }
        }
    }

    /// Adopts `tree` (sorted by path, parents first) beneath the attached directory `root`.
    async fn adopt_tree(
        &self,
        root: &str,
        tree: &[UnderEntry],
        progress: &(dyn Fn(&UnderProgress) + Send + Sync),
    ) -> Result<UnderProgress> {
        let mut ids: HashMap<String, InodeId> = HashMap::from([(String::new(), self.stat(root).await?.id)]);
        let mut p = UnderProgress {
            total_files: tree.iter().filter(|e| !e.is_dir).count() as u64,
            total_bytes: tree.iter().filter(|e| !e.is_dir).map(|e| e.size).sum(),
            ..Default::default()
        };
        // Files are adopted many to a request, once their directory is made.
        let mut files: Vec<(InodeId, &UnderEntry)> = Vec::new();
        for e in tree {
            let parent = e.path.rsplit_once('/').map_or("", |(d, _)| d);
            let dir = self.ensure_dir(root, parent, &mut ids).await?;
            if e.is_dir {
                self.ensure_dir(root, &e.path, &mut ids).await?;
                p.dirs += 1;
                continue;
            }
            files.push((dir, e));
            if files.len() == OPS_A_REQUEST {
                self.adopt_batch(root, &mut files, &mut p).await?;
                progress(&p);
            }
        }
        self.adopt_batch(root, &mut files, &mut p).await?;
        progress(&p);
        Ok(p)
    }

    /// Adopts `files` (each in its directory) in one request and empties
    /// the list; the first that fails is the error, naming its path.
    async fn adopt_batch(
        &self,
        root: &str,
        files: &mut Vec<(InodeId, &UnderEntry)>,
        p: &mut UnderProgress,
    ) -> Result<()> {
        let ops = files.iter().map(|(dir, e)| adopt_op(*dir, e)).collect();
        for ((_, e), r) in files.drain(..).zip(Commits(self.clone()).send(ops).await) {
            r.map_err(|err| err.context(join(root, &e.path)))?;
            p.files += 1;
            p.bytes += e.size;
        }
        Ok(())
    }

    /// The inode of directory `rel` beneath `root`, made (with its parents) if missing.
    async fn ensure_dir(&self, root: &str, rel: &str, ids: &mut HashMap<String, InodeId>) -> Result<InodeId> {
        if let Some(id) = ids.get(rel) {
            return Ok(*id);
        }
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let parent_id = Box::pin(self.ensure_dir(root, parent, ids)).await?;
        let id = match self.lookup(parent_id, name).await {
            Ok(i) if i.kind == InodeKind::Dir => i.id,
            Ok(_) => return Err(Error::new(ErrorKind::AlreadyExists, format!("{}: not a directory", join(root, rel)))),
            Err(e) if e.kind == ErrorKind::NotFound => {
                let op = MetaOp::AdoptDir { parent: parent_id, name: name.to_string(), mode: 0o755 };
                match self.meta(op).await? {
                    MetaReply::Info(i) => i.id,
                    other => return Err(unexpected_meta(other)),
                }
            }
            Err(e) => return Err(e),
        };
        ids.insert(rel.to_string(), id);
        Ok(id)
    }

    /// `sync_meta`'s adoptions of objects new below (or changed there,
    /// `true`) in one request, counted in `out`; empties the list. A file
    /// changed in the pool meanwhile is a conflict; any other failure is
    /// the error, naming its path.
    async fn adopt_changed(
        &self,
        root: &str,
        adopting: &mut Vec<(InodeId, &UnderEntry, bool)>,
        out: &mut MetaSync,
    ) -> Result<()> {
        let ops = adopting.iter().map(|(dir, e, _)| adopt_op(*dir, e)).collect();
        for ((_, e, was), r) in adopting.drain(..).zip(Commits(self.clone()).send(ops).await) {
            match r {
                Ok(_) if was => out.changed += 1,
                Ok(_) => out.added += 1,
                Err(err) if err.kind == ErrorKind::Stale => out.conflicts.push(join(root, &e.path)),
                Err(err) => return Err(err.context(join(root, &e.path))),
            }
        }
        Ok(())
    }

    /// Detaches the under-store at `path`: the pool forgets the tree (the
    /// store keeps it). Files changed in the pool and not yet below are
    /// refused unless `force`. Returns how many entries went.
    pub async fn detach(&self, path: &str, force: bool) -> Result<u64> {
        if !force {
            let dirty = self.dirty_files(path).await?;
            if let Some(first) = dirty.first() {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!(
                        "{path}: {} file(s) changed in the pool are not in the under-store yet (first: {first}); \
                         run `tierpool sync {path}` or detach with --force to drop them",
                        dirty.len()
                    ),
                ));
            }
        }
        match self.meta(MetaOp::Detach { path: path.to_string() }).await? {
            MetaReply::Removed { inodes, .. } => Ok(inodes),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Every file at or beneath `path`, with its chunk list.
    pub(crate) async fn files_under(&self, path: &str) -> Result<Vec<(String, InodeInfo)>> {
        let mut out = Vec::new();
        let mut stack = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            let info = self.stat(&p).await?;
            match info.kind {
                InodeKind::Dir => {
                    for e in self.list(&p).await? {
                        stack.push(join(&p, &e.name));
                    }
                }
                InodeKind::File => out.push((p, info)),
                _ => {}
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn dirty_files(&self, path: &str) -> Result<Vec<String>> {
        Ok(self.owed_files(path).await?.into_iter().map(|(p, _)| p).collect())
    }

    /// The store and origin of file `info`.
    async fn origin_store(&self, info: &InodeInfo) -> Result<(Origin, Attachment, UnderStore)> {
        let origin = (info.origin.clone())
            .ok_or_else(|| Error::invalid(format!("inode {} is not a file of an under-store", info.id)))?;
        let a = (self.attachments().await?.into_iter())
            .find(|a| a.inode == origin.attach)
            .ok_or_else(|| Error::new(ErrorKind::Stale, format!("{}: its under-store was detached", origin.key)))?;
        let store = open_store(&a.attachment)?;
        Ok((origin, a.attachment, store))
    }

    /// Chunk `index` of file `inode`, which is below: read from the
    /// under-store, stored in the pool, published; its bytes (the chunk's
    /// whole share of the file).
    /// A full pool does not fail the read: the bytes are returned and the
    /// chunk stays below.
    pub async fn load_below(&self, inode: InodeId, index: u64) -> Result<Bytes> {
        self.load_chunk(inode, index, false).await
    }

    /// [`load_below`](Self::load_below); with `keep`, a pool too full to
    /// keep the chunk is an error (`tierpool load`).
    async fn load_chunk(&self, inode: InodeId, index: u64, keep: bool) -> Result<Bytes> {
        let info = self.stat_inode(inode, true).await?;
        let r = *info
            .chunks
            .get(index as usize)
            .ok_or_else(|| Error::new(ErrorKind::Stale, format!("inode {inode}: chunk {index} is past its end now")))?;
        let share = (info.size - index * info.chunk_size).min(info.chunk_size);
        if !r.is_below() {
            // Loaded (or rewritten) since the caller looked.
            return self.fetch_chunk(&format!("inode {inode}"), inode, index, r, share).await;
        }
        let data = self.below_bytes(&info, index).await?;
        let _lease = self.lease(inode);
        let version = self.fresh_version().await?;
        let stored = match self.put_version(inode, index, version, data.clone(), info.attrs, Placing::of(&info)).await {
            Ok(s) => s,
            // The pool is full: the bytes are right all the same; the chunk
            // stays below (the upkeep frees clean files to make room).
            Err(e) if e.kind == ErrorKind::PoolFull && !keep => {
                tracing::debug!("inode {inode}: chunk {index} served from below without keeping it: {}", e.message);
                return Ok(data);
            }
            Err(e) => return Err(e),
        };
        match self.meta(MetaOp::LoadChunks { inode, chunks: vec![(index, stored)] }).await {
            Ok(_) => Ok(data),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(data),
            Err(e) => Err(e),
        }
    }

    /// Chunk `index` of file `info` as its object below holds it (its whole
    /// share of the file), read with the tag its origin recorded.
    pub(crate) async fn below_bytes(&self, info: &InodeInfo, index: u64) -> Result<Bytes> {
        let share = (info.size - index * info.chunk_size).min(info.chunk_size);
        let (origin, _, store) = self.origin_store(info).await?;
        let offset = index * info.chunk_size;
        let want = share.min(origin.size.saturating_sub(offset));
        let mut data = store.read(&origin.key, offset, want, Some(&origin.etag)).await.map_err(|e| {
            if e.kind == ErrorKind::NotFound {
                Error::new(
                    ErrorKind::Stale,
                    format!("{}: was removed from the under-store {}", origin.key, store.uri()),
                )
            } else {
                e
            }
        })?;
        if (data.len() as u64) < want {
            return Err(Error::new(
                ErrorKind::Stale,
                format!("{}: changed in the under-store {} (shorter than recorded)", origin.key, store.uri()),
            ));
        }
        if (data.len() as u64) < share {
            let mut v = data.to_vec();
            v.resize(share as usize, 0);
            data = Bytes::from(v);
        }
        Ok(data)
    }

    /// Loads every chunk below of the files at or beneath `path` into the
    /// pool (small files [`FILES_IN_FLIGHT`] at once); `progress` hears of
    /// each file.
    pub async fn load(&self, path: &str, progress: &(dyn Fn(&UnderProgress) + Send + Sync)) -> Result<UnderProgress> {
        let files = self.files_under(path).await?;
        let mut p = UnderProgress { total_files: files.len() as u64, ..Default::default() };
        p.total_bytes = files.iter().map(|(_, i)| i.size).sum();
        let (small, large): (Vec<_>, Vec<_>) = files.into_iter().partition(|(_, i)| i.size <= TOGETHER_MAX);
        let one = |(fp, info): (String, InodeInfo)| async move {
            let below: Vec<u64> =
                (info.chunks.iter().enumerate()).filter(|(_, r)| r.is_below()).map(|(i, _)| i as u64).collect();
            let mut pending = futures::stream::iter(below.into_iter().map(|i| self.load_chunk(info.id, i, true)))
                .buffer_unordered(self.inner.cfg.window.max(1));
            while let Some(r) = pending.next().await {
                r.map_err(|e| e.context(&fp))?;
            }
            Ok::<_, Error>(info.size)
        };
        let mut loaded = (futures::stream::iter(small).map(one).buffer_unordered(FILES_IN_FLIGHT))
            .chain(futures::stream::iter(large).map(one).buffer_unordered(1));
        while let Some(size) = loaded.next().await {
            p.files += 1;
            p.bytes += size?;
            progress(&p);
        }
        Ok(p)
    }

    /// Lets go of the pool's copies of the clean files at or beneath
    /// `path` (the under-store keeps the bytes; reading loads them again),
    /// on the workers or held inline by the metadata. Files with changes
    /// not yet below are skipped and listed.
    pub async fn free(&self, path: &str) -> Result<UnderReport> {
        let held = |r: &&ChunkRef| r.is_stored() || r.is_inline();
        let mut out = UnderReport::default();
        let mut clean = Vec::new();
        for (fp, info) in self.files_under(path).await? {
            let Some(o) = &info.origin else { continue };
            if o.dirty {
                out.skipped.push(fp);
                continue;
            }
            if info.chunks.iter().any(|r| held(&r)) {
                clean.push((fp, info.chunks.iter().filter(held).map(|r| r.len).sum(), info.id));
            }
        }
        self.unload_all(&clean, &mut out).await?;
        Ok(out)
    }

    /// Lets go of the pool's copies of clean files of every attachment
    /// until about `bytes` of chunk data went (a pool filling up), in the
    /// order `tierpool_meta::choose_to_free` gives: lower priority first,
    /// then the files changed longest ago; pinned files and files with
    /// changes not below stay. Their bytes are read from the store again
    /// when needed.
    pub async fn free_for_room(&self, bytes: u64) -> Result<UnderReport> {
        let mut paths = std::collections::HashMap::new();
        let mut candidates = Vec::new();
        for a in self.attachments().await? {
            for (fp, info) in self.files_under(&a.path).await? {
                candidates.push(RoomCandidate {
                    inode: info.id.0,
                    priority: info.attrs.priority.into(),
                    pinned: info.attrs.pinned,
                    dirty: info.origin.as_ref().is_none_or(|o| o.dirty),
                    held: info.chunks.iter().filter(|r| r.is_stored()).map(|r| r.len).sum(),
                    mtime: info.mtime,
                    last_read: 0,
                });
                paths.insert(info.id.0, fp);
            }
        }
        self.fill_last_reads(&mut candidates).await;
        let chosen: Vec<_> = (choose_to_free(&candidates, bytes).into_iter())
            .map(|c| (paths.remove(&c.inode).unwrap_or_default(), c.held, InodeId(c.inode)))
            .collect();
        let mut out = UnderReport::default();
        self.unload_all(&chosen, &mut out).await?;
        Ok(out)
    }

    /// Lets go of the pool's copies of `files` (path, bytes held, inode),
    /// [`OPS_A_REQUEST`] to a request, counted in `out`; one changed or
    /// removed meanwhile is skipped.
    async fn unload_all(&self, files: &[(String, u64, InodeId)], out: &mut UnderReport) -> Result<()> {
        for group in files.chunks(OPS_A_REQUEST) {
            let ops = group.iter().map(|(_, _, inode)| MetaOp::Unload { inode: *inode }).collect();
            for ((fp, n, _), r) in group.iter().zip(Commits(self.clone()).send(ops).await) {
                match r {
                    Ok(_) => {
                        out.files += 1;
                        out.bytes += n;
                    }
                    Err(e) if matches!(e.kind, ErrorKind::Stale | ErrorKind::NotFound) => out.skipped.push(fp.clone()),
                    Err(e) => return Err(e.context(fp)),
                }
            }
        }
        Ok(())
    }

    /// Sets each candidate's `last_read` to the latest use any worker saw
    /// of it (clock time, ns). A worker that cannot be asked is left out:
    /// the order then falls back on what the others and the mtimes say.
    async fn fill_last_reads(&self, candidates: &mut [RoomCandidate]) {
        let inodes: Vec<InodeId> = candidates.iter().filter(|c| c.may_go()).map(|c| InodeId(c.inode)).collect();
        if inodes.is_empty() {
            return;
        }
        let Ok(layout) = self.layout().await else { return };
        let mut ages: HashMap<u64, u64> = HashMap::new();
        for w in &layout.workers {
            let req = WorkerRequest::LastUse { inodes: inodes.clone() };
            match self.worker_pool(w.id, &w.addr).call(&req, &[], true).await {
                Ok((WorkerResponse::LastUsed(got), _)) if got.len() == inodes.len() => {
                    for (i, age) in inodes.iter().zip(got) {
                        if let Some(ms) = age {
                            let a = ages.entry(i.0).or_insert(ms);
                            *a = (*a).min(ms);
                        }
                    }
                }
                Ok(_) | Err(_) => tracing::debug!("worker {} did not say when files were last used", w.addr),
            }
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let now = now.as_nanos().min(u64::MAX as u128) as u64;
        for c in candidates.iter_mut() {
            if let Some(ms) = ages.get(&c.inode) {
                c.last_read = now.saturating_sub(ms.saturating_mul(1_000_000));
            }
        }
    }

    /// A file just committed as `info` at `path`: beneath an attachment that
    /// writes through, written below before the commit is reported, and
    /// then as the pool has it (the write recorded the object's tag).
    pub(crate) async fn committed(&self, path: &str, info: InodeInfo) -> Result<InodeInfo> {
        if info.origin.is_some() && self.persist(path, info.clone(), false).await? {
            return self.stat(path).await;
        }
        Ok(info)
    }

    /// Writes file `info` (at `path`) to its object below if it has
    /// changes not there yet and it writes through (its own mode, else its
    /// attachment's; or `always`); returns whether it wrote. A change made
    /// meanwhile is written in turn. Of a file writing back (not `always`), the file's
    /// chunks are moved to their workers' disks instead, so that the
    /// write outlives a kill of every pool process until it is below.
    pub async fn persist(&self, path: &str, mut info: InodeInfo, always: bool) -> Result<bool> {
        for _ in 0..8 {
            let Some(o) = info.origin.clone() else { return Ok(false) };
            if !o.dirty {
                return Ok(false);
            }
            let (origin, attachment, store) = self.origin_store(&info).await?;
            let mode = origin.mode_in(&attachment);
            if mode == WriteMode::Back && !always {
                // Acknowledged from the pool: kept on the workers' disks
                // until the write-back (or a `sync`) writes it below.
                self.keep_on_disk(&info).await.map_err(|e| e.context(path))?;
                return Ok(false);
            }
            if mode != WriteMode::Through && !always {
                return Ok(false);
            }
            if attachment.readonly {
                return Err(Error::new(ErrorKind::ReadOnly, format!("{path}: its under-store is attached read-only")));
            }
            // A write of these bytes that a crash kept from being recorded
            // (the write-back and `sync` look): recorded, not written again.
            let found = if always {
                crate::already_below::already_below(&store, &origin, &info).await.map_err(|e| e.context(path))?
            } else {
                None
            };
            let e = match found {
                Some(e) => e,
                None => {
                    // Read with the file's read-ahead (chunks come padded to their share).
                    let mut pieces = Vec::with_capacity(info.chunks.len());
                    let mut chunks = self.chunk_stream(path, &info);
                    while let Some(d) = chunks.next().await? {
                        pieces.push(d);
                    }
                    match store.write(&origin.key, pieces).await {
                        Ok(written) => written,
                        Err(e) => {
                            // A write that failed as the file was removed (its
                            // directory below with it) can still leave its
                            // object: it goes, unless the pool names a file
                            // there again.
                            if self.stat_inode(info.id, false).await.is_err_and(|e| e.kind == ErrorKind::NotFound) {
                                let named = self.stat(path).await.map(|_| ());
                                delete_after_removal(&store, &origin.key, false, named).await;
                            }
                            return Err(e.context(path));
                        }
                    }
                }
            };
            let op = MetaOp::Persisted {
                inode: info.id,
                chunks: info.chunks.clone(),
                size: info.size,
                mtime: e.mtime_ns,
                etag: e.etag.clone(),
                key: Some(origin.key.clone()),
            };
            match self.meta(op).await {
                Ok(_) => return Ok(true),
                Err(err) if err.kind == ErrorKind::Stale => {
                    info = self.stat_inode(info.id, true).await?;
                    if info.origin.as_ref().is_some_and(|o| o.key != origin.key) {
                        // Renamed while it was written: what was written sits at
                        // the old key, which no file of the pool names now.
                        remove_stray(&store, &origin.key, &e.etag).await;
                    }
                }
                Err(err) if err.gone_inode() == Some(info.id.0) => {
                    // Removed while it was written: its removal below came
                    // first, so what was written would outlive it there.
                    remove_stray(&store, &origin.key, &e.etag).await;
                    return Err(err.context(path));
                }
                Err(err) => return Err(err.context(path)),
            }
        }
        Err(Error::new(ErrorKind::Stale, format!("{path}: kept changing while it was written to the under-store")))
    }

    /// Moves every chunk the pool holds of file `info` to the DISK tier of
    /// each worker keeping a copy.
    pub(crate) async fn keep_on_disk(&self, info: &InodeInfo) -> Result<()> {
        let copies = Placing::of(info).copies;
        let keys: Vec<_> = (info.chunks.iter().enumerate())
            .filter(|(_, r)| r.is_stored())
            .map(|(i, r)| r.key(info.id, i as u64))
            .collect();
        let mut pending = futures::stream::iter(keys.into_iter().map(|key| {
            let req = WorkerRequest::KeepOnDisk { key };
            async move { self.write_replicas(key, copies, &req, &[]).await }
        }))
        .buffer_unordered(self.inner.cfg.window.max(1));
        while let Some(r) = pending.next().await {
            r?;
        }
        Ok(())
    }

    /// Writes file `inode` below now if it has changes not there yet and it
    /// writes back (its own mode, else its attachment's: `fsync` on the
    /// mount); otherwise nothing.
    pub async fn flush_back(&self, path: &str, inode: InodeId) -> Result<()> {
        let info = self.stat_inode(inode, true).await?;
        if !info.origin.as_ref().is_some_and(|o| o.dirty) {
            return Ok(());
        }
        let (origin, attachment, _) = self.origin_store(&info).await?;
        if origin.mode_in(&attachment) == WriteMode::Back {
            self.persist(path, info, true).await?;
        }
        Ok(())
    }

    /// Writes every file at or beneath `path` with changes not yet below
    /// (`sync`): of a `through` attachment, ones a failure left behind; of
    /// a `back` one, those the write-back has not reached yet; of a
    /// `pool-only` one, every changed file (an explicit request). A file
    /// that fails is skipped and the rest written; then the (first) error.
    pub async fn sync(&self, path: &str, progress: &(dyn Fn(&UnderProgress) + Send + Sync)) -> Result<UnderReport> {
        self.sync_where(path, &|_| true, true, progress).await
    }

    /// What the background write-back does: [`sync`](Self::sync) of the
    /// files at or beneath `path` that follow the `back` mode (their own,
    /// or their attachment's).
    pub async fn write_back(&self, path: &str) -> Result<UnderReport> {
        let attached = self.attachments().await?;
        let back = |o: &Origin| crate::write_modes::mode_among(&attached, o) == Some(WriteMode::Back);
        self.sync_where(path, &back, true, &|_| {}).await
    }

    /// [`sync`](Self::sync) of the dirty files whose origin `which` takes
    /// (small ones [`FILES_IN_FLIGHT`] at once);
    /// not `always`: only as their write modes say (see [`persist`](Self::persist)).
    pub(crate) async fn sync_where(
        &self,
        path: &str,
        which: &(dyn Fn(&Origin) -> bool + Send + Sync),
        always: bool,
        progress: &(dyn Fn(&UnderProgress) + Send + Sync),
    ) -> Result<UnderReport> {
        let mut out = UnderReport::default();
        let dirty: Vec<_> = (self.owed_files(path).await?.into_iter())
            .filter(|(_, i)| i.origin.as_ref().is_some_and(|o| o.dirty && which(o)))
            .collect();
        let mut p = UnderProgress { total_files: dirty.len() as u64, ..Default::default() };
        let mut first_error = None;
        // Small files many at once (each waits on its store's write and on
        // the log); larger ones one at a time, after.
        let (small, large): (Vec<_>, Vec<_>) = dirty.into_iter().partition(|(_, i)| i.size <= TOGETHER_MAX);
        let one = |(fp, info): (String, InodeInfo)| async move {
            let size = info.size;
            let r = self.persist(&fp, info, always).await;
            (fp, size, r)
        };
        let mut persisted = (futures::stream::iter(small).map(one).buffer_unordered(FILES_IN_FLIGHT))
            .chain(futures::stream::iter(large).map(one).buffer_unordered(1));
        while let Some((fp, size, r)) = persisted.next().await {
            // One file that cannot be written does not hold back the others.
            match r {
                Ok(_) => {
                    out.files += 1;
                    out.bytes += size;
                }
                Err(e) => {
                    out.skipped.push(fp);
                    first_error.get_or_insert(e);
                }
            }
            p.files += 1;
            p.bytes += size;
            progress(&p);
        }
        match first_error {
            None => Ok(out),
            Some(e) if out.skipped.len() == 1 => Err(e),
            Some(e) => Err(Error::new(
                e.kind,
                format!(
                    "{} of {} files not written to the under-store (the others were); first: {}",
                    out.skipped.len(),
                    p.total_files,
                    e.message
                ),
            )),
        }
    }

    /// Brings the pool's view of the attached tree at or beneath `path`
    /// up to date with the under-store: new objects adopted, changed ones
    /// replacing clean files, vanished ones removed (clean files only).
    pub async fn sync_meta(&self, path: &str) -> Result<MetaSync> {
        let (a, rel) = (self.attached_at(path).await?)
            .ok_or_else(|| Error::invalid(format!("{path}: is not in an attached under-store")))?;
        let store = open_store(&a.attachment)?;
        let below: BTreeMap<String, UnderEntry> = (visible(store.walk().await?).into_iter())
            .filter(|e| rel.is_empty() || e.path == rel || e.path.starts_with(&format!("{rel}/")))
            .map(|e| (e.path.clone(), e))
            .collect();
        let here = join(&a.path, &rel);
        let mut out = MetaSync::default();
        let pool: BTreeMap<String, InodeInfo> = (self.files_under(&here).await?.into_iter())
            .filter_map(|(p, i)| relative(&a.path, &normalize(&p).ok()?).map(|r| (r, i)))
            .collect();
        let mut ids = HashMap::from([(String::new(), a.inode)]);
        // Objects new or changed below, adopted many to a request.
        let mut adopting: Vec<(InodeId, &UnderEntry, bool)> = Vec::new();
        for (key, e) in &below {
            if e.is_dir {
                self.ensure_dir(&a.path, key, &mut ids).await?;
                continue;
            }
            let was = pool.get(key);
            if let Some(i) = was {
                if i.origin.as_ref().is_some_and(|o| o.same_object(e.size, e.mtime_ns, &e.etag) && !o.dirty) {
                    continue;
                }
            }
            let parent = key.rsplit_once('/').map_or("", |(d, _)| d);
            let dir = self.ensure_dir(&a.path, parent, &mut ids).await?;
            adopting.push((dir, e, was.is_some()));
            if adopting.len() == OPS_A_REQUEST {
                self.adopt_changed(&a.path, &mut adopting, &mut out).await?;
            }
        }
        self.adopt_changed(&a.path, &mut adopting, &mut out).await?;
        for (key, i) in &pool {
            if below.contains_key(key) {
                continue;
            }
            // Gone below: a clean file goes; one with changes stays (to be written back).
            if i.origin.as_ref().is_some_and(|o| !o.dirty) {
                let (parent, name) = key.rsplit_once('/').unwrap_or(("", key));
                let dir = self.ensure_dir(&a.path, parent, &mut ids).await?;
                self.meta(MetaOp::Disown { parent: dir, name: name.to_string() }).await?;
                out.removed += 1;
            } else {
                out.conflicts.push(join(&a.path, key));
            }
        }
        Ok(out)
    }

    /// Checks that file `info` at `path` still mirrors its object below
    /// (size, time and tag): `Stale` if the object changed or went, telling
    /// how to pick up the change.
    pub async fn check_origin(&self, path: &str, info: &InodeInfo) -> Result<()> {
        let Some(o) = &info.origin else { return Ok(()) };
        if o.dirty {
            return Ok(());
        }
        let (_, _, store) = self.origin_store(info).await?;
        let now = match store.stat(&o.key).await {
            Err(e) if e.kind == ErrorKind::Unavailable && info.chunks.iter().all(|r| !r.is_below()) => {
                // The pool holds every byte: served, saying the store could not be asked.
                tracing::warn!("{path}: served from the pool without checking its under-store: {}", e.message);
                return Ok(());
            }
            other => other?,
        };
        match now {
            Some(e) if o.same_object(e.size, e.mtime_ns, &e.etag) => Ok(()),
            _ => Err(Error::new(
                ErrorKind::Stale,
                format!("{path}: changed in the under-store {}; run `tierpool sync-meta {path}`", store.uri()),
            )),
        }
    }

    /// Before a namespace change at `path` in an attachment that mirrors
    /// names (`through`, `back`): the store and the key it names there.
    pub(crate) async fn through_key(&self, path: &str) -> Result<Option<(UnderStore, String)>> {
        through_key_in(&self.attachments().await?, path)
    }

    /// [`through_key`](Self::through_key) of entry `name` of directory
    /// `parent` among the attachments `all` (the mount's operations, by
    /// inode): the directory's key comes from its parent links. With the
    /// attachment, to tell two apart. Nothing is asked when no attachment
    /// mirrors names.
    pub(crate) async fn through_key_at(
        &self,
        all: &[AttachedDir],
        parent: InodeId,
        name: &str,
    ) -> Result<Option<(UnderStore, String, InodeId)>> {
        let mirrors = |id: InodeId| {
            all.iter().find(|a| a.inode == id && a.attachment.mode.mirrors_names() && !a.attachment.readonly)
        };
        if !all.iter().any(|a| mirrors(a.inode).is_some()) {
            return Ok(None);
        }
        let chain = self.dir_ancestry(parent).await?;
        // Attachments do not nest: at most one directory of the chain is one.
        let Some((i, a)) = (chain.iter().enumerate()).find_map(|(i, (id, _))| mirrors(*id).map(|a| (i, a))) else {
            return Ok(None);
        };
        let below: Vec<&str> = chain[i + 1..].iter().map(|(_, n)| n.as_str()).chain([name]).collect();
        Ok(Some((open_store(&a.attachment)?, below.join("/"), a.inode)))
    }
}

/// The attachment of `all` that `path` is at or beneath, and the path relative to it.
pub(crate) fn attached_in(all: &[AttachedDir], path: &str) -> Result<Option<(AttachedDir, String)>> {
    let comps = normalize(path)?;
    Ok(all.iter().find_map(|a| relative(&a.path, &comps).map(|rel| (a.clone(), rel))))
}

/// [`Client::through_key`] among the attachments `all`.
pub(crate) fn through_key_in(all: &[AttachedDir], path: &str) -> Result<Option<(UnderStore, String)>> {
    let Some((a, rel)) = attached_in(all, path)? else { return Ok(None) };
    if !a.attachment.mode.mirrors_names() || a.attachment.readonly || rel.is_empty() {
        return Ok(None);
    }
    Ok(Some((open_store(&a.attachment)?, rel)))
}

/// Files an `attach` or a `sync-meta` adopts (or a `free` lets go of) in
/// one request.
const OPS_A_REQUEST: usize = 256;

/// The adoption of the object `e` below as a file of directory `parent`
/// (named by the last component of its path).
fn adopt_op(parent: InodeId, e: &UnderEntry) -> MetaOp {
    MetaOp::AdoptFile {
        parent,
        name: e.path.rsplit_once('/').map_or(e.path.as_str(), |(_, n)| n).to_string(),
        size: e.size,
        chunk_size: DEFAULT_CHUNK_SIZE,
        mtime: e.mtime_ns,
        etag: e.etag.clone(),
        mode: 0o644,
    }
}

/// Files a `sync` or the write-back writes below at once (or a `load`
/// loads) ...
const FILES_IN_FLIGHT: usize = 64;
/// ... of those up to this size (a file written below is read whole
/// first); larger ones go one at a time, after.
const TOGETHER_MAX: u64 = 1 << 20;

/// Pauses before the tries again of [`delete_below`] (75 ms in all).
const NOT_EMPTY_PAUSES_MS: [u64; 4] = [5, 10, 20, 40];

/// Deletes the object (or directory, with what it holds if `recursive`)
/// at `key` below, for the removal of a pool entry. A directory below
/// that is not empty is tried again a few times: a write-back that wrote
/// a file of it as the file was removed takes that object away as soon as
/// it hears of the removal (see `persist`). Anything else there stays,
/// and the removal fails.
pub(crate) async fn delete_below(store: &UnderStore, key: &str, recursive: bool) -> Result<()> {
    for pause in NOT_EMPTY_PAUSES_MS {
        match store.delete(key, recursive).await {
            Err(e) if e.kind == ErrorKind::DirectoryNotEmpty => {
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await
            }
            r => return r,
        }
    }
    store.delete(key, recursive).await
}

/// After the removal of a file (or, `tree`, of a directory and all it
/// held) whose object (or tree) at `key` below went first: that again,
/// unless the pool names something there again (`named` is what looking
/// the name up said). A write-back that wrote a file just after that first
/// delete, and recorded it before the removal, put it back (with its
/// directories); nothing would take it away then.
pub(crate) async fn delete_after_removal(store: &UnderStore, key: &str, tree: bool, named: Result<()>) {
    match named {
        Err(e) if e.kind == ErrorKind::NotFound => {}
        _ => return,
    }
    if let Err(e) = store.delete(key, tree).await {
        tracing::warn!("{e}; what a write-back wrote below of a removed file as it was removed may stay");
    }
}

/// Removes the object at `key` if it is still the one written there (tag
/// `etag`): a file renamed or removed while its bytes were being written
/// below left it behind. Anything else there now (written since) stays.
async fn remove_stray(store: &UnderStore, key: &str, etag: &str) {
    match store.stat(key).await {
        Ok(Some(found)) if !found.is_dir && found.etag == etag => {
            if let Err(e) = store.delete(key, false).await {
                tracing::warn!("{e}; an object left by a rename during its write stays");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("{e}; an object left by a rename during its write may stay"),
    }
}

/// The objects of a store the pool can show: a `.snapshots` name is the
/// pool's own (each path's snapshots), so objects beneath one are left out.
fn visible(tree: Vec<UnderEntry>) -> Vec<UnderEntry> {
    let (shown, hidden): (Vec<_>, Vec<_>) =
        tree.into_iter().partition(|e| !e.path.split('/').any(|c| c == tierpool_meta::SNAPSHOTS));
    if let Some(e) = hidden.first() {
        tracing::warn!("{} objects under a .snapshots name are not shown (first: {})", hidden.len(), e.path);
    }
    shown
}
