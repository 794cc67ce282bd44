//! Writing files: a [`FileWriter`] cuts the byte stream into chunks, stores
//! them on their workers (several in flight), and `close` publishes the file
//! with one atomic metadata commit. Until then no reader can see it; if
//! anything fails, the chunks already stored are deleted and nothing is published.
//! Chunks are written with the copies the directory keeps as this client
//! last saw it; `close` makes up any difference the commit reveals before
//! it returns (see `dir_placing`).

use crate::client::{unexpected_meta, Client};
use crate::placing::Placing;
use crate::WriteLease;
use bytes::{Bytes, BytesMut};
use tierpool_meta::{InodeInfo, MetaOp, MetaReply};
use tierpool_proto::WorkerRequest;
use tierpool_types::{validate_chunk_size, Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinSet;

/// How a file is written.
#[derive(Clone, Debug)]
pub struct PutOptions {
    pub chunk_size: u64,
    pub attrs: ChunkAttrs,
    pub mode: u32,
    /// Replace an existing file at the path (atomically). Without it, an existing path is `AlreadyExists`.
    pub overwrite: bool,
    /// Copies of each chunk to write; `None`: what the file's directory
    /// keeps (the file inherits it when published). More than the
    /// directory keeps is written but not kept as such.
    pub replicas: Option<u8>,
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            chunk_size: tierpool_types::DEFAULT_CHUNK_SIZE,
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: true,
            replicas: None,
        }
    }
}

/// A file being written. Obtain with [`Client::create`]; finish with [`FileWriter::close`].
pub struct FileWriter {
    client: Client,
    path: String,
    inode: InodeId,
    opts: PutOptions,
    buf: BytesMut,
    size: u64,
    checksums: Vec<Checksum>,
    /// The home of each chunk a placement policy put somewhere.
    homes: Vec<Option<u32>>,
    /// Copies of each chunk written, and where.
    placing: Placing,
    /// Whether `placing` is the directory's (settled at close).
    inherited: bool,
    tasks: JoinSet<Result<()>>,
    /// Whether a file that fits in the metadata is offered to it at close.
    pub(crate) inline: bool,
    /// The first write that failed after it took bytes of the file: later
    /// writes fail with it, and `close` publishes nothing and fails with it.
    failed: Option<Error>,
    /// Keeps the stored chunks from being taken for a dead writer's.
    _lease: WriteLease,
}

/// The one chunk of a small file, as its writer would store it.
pub(crate) struct WholeChunk {
    pub key: ChunkKey,
    pub checksum: Checksum,
    pub data: Bytes,
    /// Copies it keeps.
    pub copies: u8,
}

/// Chunks a file may have for its commit to share a request with others.
const SHARED_COMMIT_CHUNKS: usize = 256;
/// How long an aborted writer waits for its chunk writes in flight to end
/// (see `FileWriter::abort`): a small one may wait in its worker's lane,
/// then for room, some 300 ms.
const ABORT_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

impl Client {
    /// Starts writing a new file at `path` (published on `close`).
    pub async fn create(&self, path: &str, opts: &PutOptions) -> Result<FileWriter> {
        validate_chunk_size(opts.chunk_size)?;
        let (placing, inherited) = match opts.replicas {
            Some(r) => (Placing { copies: r.max(1), ..self.remembered_placing(path, false).await? }, false),
            None => (self.remembered_placing(path, false).await?, true),
        };
        let inode = self.alloc_inode().await?;
        Ok(FileWriter {
            _lease: self.lease(inode),
            client: self.clone(),
            path: path.to_string(),
            inode,
            opts: opts.clone(),
            buf: BytesMut::new(),
            size: 0,
            checksums: Vec::new(),
            homes: Vec::new(),
            placing,
            inherited,
            tasks: JoinSet::new(),
            inline: true,
            failed: None,
        })
    }

    /// Writes everything `reader` yields to `path`, streaming chunk by chunk.
    pub async fn put_reader<R: AsyncRead + Unpin>(
        &self,
        path: &str,
        mut reader: R,
        opts: &PutOptions,
    ) -> Result<InodeInfo> {
        let mut w = self.create(path, opts).await?;
        let cs = opts.chunk_size;
        loop {
            let mut buf = BytesMut::with_capacity(cs as usize);
            while (buf.len() as u64) < cs {
                let n = (&mut reader).take(cs - buf.len() as u64).read_buf(&mut buf).await;
                match n {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        w.abort().await;
                        return Err(Error::from(e).context("reading input"));
                    }
                }
            }
            let done = (buf.len() as u64) < cs;
            if let Err(e) = w.write_bytes(buf.freeze()).await {
                w.abort().await;
                return Err(e);
            }
            if done {
                return w.close().await;
            }
        }
    }

    /// Writes `data` to `path`.
    pub async fn put_bytes(&self, path: &str, data: Bytes, opts: &PutOptions) -> Result<InodeInfo> {
        self.put_bytes_as(path, data, opts, true).await
    }

    /// `put_bytes`; unless `inline`, a small file is stored on the workers
    /// without being offered to the metadata first (which just refused it).
    pub(crate) async fn put_bytes_as(
        &self,
        path: &str,
        data: Bytes,
        opts: &PutOptions,
        inline: bool,
    ) -> Result<InodeInfo> {
        let mut w = self.create(path, opts).await?;
        w.inline = inline;
        if let Err(e) = w.write_bytes(data).await {
            w.abort().await;
            return Err(e);
        }
        w.close().await
    }

    /// Stores one chunk on every worker that is to hold one of its `copies`.
    pub(crate) async fn put_chunk(
        &self,
        key: ChunkKey,
        data: &[u8],
        checksum: Checksum,
        attrs: ChunkAttrs,
        copies: u8,
    ) -> Result<()> {
        self.write_replicas(key, copies, &WorkerRequest::PutChunk { key, checksum, attrs, table: 0 }, data).await
    }
}

impl FileWriter {
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends a copy of `data`.
    pub async fn write(&mut self, data: &[u8]) -> Result<()> {
        self.not_failed()?;
        let cs = self.opts.chunk_size as usize;
        let mut rest = data;
        while !rest.is_empty() {
            if self.buf.is_empty() && rest.len() >= cs {
                if let Some(chunk) = self.client.kept_chunk(&rest[..cs]) {
                    rest = &rest[cs..];
                    self.size += cs as u64;
                    self.send(chunk, false).await?;
                    continue;
                }
            }
            if self.buf.capacity() < cs {
                self.buf.reserve(cs - self.buf.len());
            }
            let n = (cs - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            self.size += n as u64;
            if self.buf.len() == cs {
                let chunk = self.buf.split().freeze();
                self.send(chunk, false).await?;
            }
        }
        Ok(())
    }

    /// Appends `data`, without copying whole chunks of it.
    pub async fn write_bytes(&mut self, mut data: Bytes) -> Result<()> {
        self.not_failed()?;
        let cs = self.opts.chunk_size as usize;
        if !self.buf.is_empty() {
            let n = (cs - self.buf.len()).min(data.len());
            self.write(&data.split_to(n)).await?;
        }
        while data.len() >= cs {
            let chunk = data.split_to(cs);
            self.size += cs as u64;
            self.send(chunk, false).await?;
        }
        if self.buf.is_empty() && !data.is_empty() {
            // A tail alone (all of a small file): kept at its own size
            // rather than in a buffer of a whole chunk's.
            self.size += data.len() as u64;
            self.buf = BytesMut::from(&data[..]);
            return Ok(());
        }
        self.write(&data).await
    }

    /// All of a file of one chunk (`data`, at most a chunk, nothing
    /// written yet), as this writer would store it; stored many to a
    /// request elsewhere (`write_many.rs`), then noted with `stored` or
    /// stored here with `unstored`.
    pub(crate) async fn whole_chunk(&mut self, data: Bytes) -> Result<WholeChunk> {
        if self.size != 0 || data.is_empty() || data.len() as u64 > self.opts.chunk_size {
            return Err(Error::internal(format!("{}: not a file of one whole chunk", self.path)));
        }
        let home = self.client.home_for(self.placing.placement, self.inode, 0).await?;
        let key = ChunkKey { home, ..ChunkKey::hashed(self.inode, 0, 1) };
        self.size = data.len() as u64;
        Ok(WholeChunk { key, checksum: crc32c::crc32c(&data), data, copies: self.placing.copies })
    }

    /// `chunk` (from `whole_chunk`) is stored on every worker that is to
    /// hold a copy of it.
    pub(crate) fn stored(&mut self, chunk: &WholeChunk) {
        self.checksums.push(chunk.checksum);
        self.homes.push(chunk.key.home);
    }

    /// `chunk` (from `whole_chunk`) is not stored everywhere it is to be:
    /// stored now, under the same key, on every copy's worker.
    pub(crate) async fn unstored(&mut self, chunk: WholeChunk) -> Result<()> {
        let c = &chunk;
        let put = self.client.put_chunk(c.key, &c.data, c.checksum, self.opts.attrs, c.copies).await;
        put.map_err(|e| e.context(&self.path))?;
        self.stored(&chunk);
        Ok(())
    }

    /// Stores `chunk` in the background, up to `window` chunks at once; the
    /// `last` chunk with none in flight (all of a small file) is stored on
    /// this task, sparing a task of its own. Its bytes are the file's
    /// already, so any failure here fails the writer.
    async fn send(&mut self, chunk: Bytes, last: bool) -> Result<()> {
        let sent = self.store(chunk, last).await;
        sent.map_err(|e| self.fail(e.context(&self.path)))
    }

    async fn store(&mut self, chunk: Bytes, last: bool) -> Result<()> {
        while self.tasks.len() >= self.client.inner.cfg.window.max(1) {
            join_one(&mut self.tasks).await?;
        }
        let crc = crc32c::crc32c(&chunk);
        let index = self.checksums.len() as u64;
        let home = self.client.home_for(self.placing.placement, self.inode, index).await?;
        let key = ChunkKey { home, ..ChunkKey::hashed(self.inode, index, 1) };
        self.checksums.push(crc);
        self.homes.push(home);
        let (c, attrs, copies) = (self.client.clone(), self.opts.attrs, self.placing.copies);
        if last && self.tasks.is_empty() {
            return c.put_chunk(key, &chunk, crc, attrs, copies).await;
        }
        // On the client's runtime: the next call on this writer may come
        // from another runtime, and the one of this call may stop running.
        let rt = self.client.runtime().clone();
        self.tasks.spawn_on(async move { c.put_chunk(key, &chunk, crc, attrs, copies).await }, &rt);
        Ok(())
    }

    /// Stores the last partial chunk and publishes the file. A small file
    /// written whole (nothing sent yet) is committed with its bytes, which
    /// the metadata keeps, if the coordinator takes it.
    pub async fn close(mut self) -> Result<InodeInfo> {
        if let Some(e) = self.failed.take() {
            self.abort().await;
            return Err(e);
        }
        if self.inline && self.checksums.is_empty() && !self.buf.is_empty() {
            if let Some(info) = self.close_inline().await? {
                return Ok(info);
            }
        }
        let mut res = Ok(());
        if !self.buf.is_empty() {
            let chunk = self.buf.split().freeze();
            res = self.send(chunk, true).await;
        }
        while !self.tasks.is_empty() {
            let r = join_one(&mut self.tasks).await;
            if res.is_ok() {
                res = r.map_err(|e| e.context(&self.path));
            }
        }
        if let Err(e) = res {
            self.client.discard_inode(self.inode).await;
            return Err(e);
        }
        // A commit of a few chunks shares a request with others; a large
        // file's (a checksum per chunk) goes alone, never near a frame's limit.
        let shared = self.checksums.len() <= SHARED_COMMIT_CHUNKS;
        let op = MetaOp::CommitFile {
            path: self.path.clone(),
            inode: self.inode,
            size: self.size,
            chunk_size: self.opts.chunk_size,
            checksums: std::mem::take(&mut self.checksums),
            homes: if self.homes.iter().any(Option::is_some) { std::mem::take(&mut self.homes) } else { Vec::new() },
            attrs: self.opts.attrs,
            mode: self.opts.mode,
            overwrite: self.opts.overwrite,
        };
        let committed = match shared {
            true => self.client.commit(op).await,
            false => self.client.meta(op).await,
        };
        let info = match committed {
            Ok(MetaReply::Info(i)) if self.inherited => {
                self.client.settle(&self.path, &i, self.placing).await.map_err(|e| e.context(&self.path))?;
                i
            }
            Ok(MetaReply::Info(i)) => i,
            Ok(other) => return Err(unexpected_meta(other)),
            Err(e) => {
                // Refused: nothing names the chunks. A commit that may have
                // been made (no answer came) keeps them; if it was not, they
                // are orphans once this writer's lease lapses, swept then.
                let unanswered = matches!(e.kind, ErrorKind::Unavailable | ErrorKind::Protocol)
                    && !tierpool_net::Connection::never_sent(&e);
                match unanswered {
                    true => tracing::warn!("{}: no answer to its commit ({e}); its chunks are kept", self.path),
                    false => self.client.discard_inode(self.inode).await,
                }
                return Err(e);
            }
        };
        self.client.committed(&self.path, info).await
    }

    /// `close` of a file that is all in the buffer: committed with its
    /// bytes (see `CommitInline`). `None`: the coordinator keeps no file
    /// this large inline, or has no room left for them; the caller stores
    /// it on the workers.
    async fn close_inline(&mut self) -> Result<Option<InodeInfo>> {
        let max = self.client.layout().await?.inline_max;
        if self.buf.len() as u64 > max.min(self.opts.chunk_size) {
            return Ok(None);
        }
        let data = Bytes::copy_from_slice(&self.buf);
        let op = MetaOp::CommitInline {
            path: self.path.clone(),
            inode: self.inode,
            data: data.clone(),
            chunk_size: self.opts.chunk_size,
            attrs: self.opts.attrs,
            mode: self.opts.mode,
            overwrite: self.opts.overwrite,
        };
        let info = match self.client.commit(op).await {
            Ok(MetaReply::Info(i)) => with_bytes(i, data),
            Ok(other) => return Err(unexpected_meta(other)),
            Err(e) if e.kind == ErrorKind::PoolFull => {
                tracing::debug!("{}: stored on the workers: {}", self.path, e.message);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        self.client.committed(&self.path, info).await.map(Some)
    }

    /// Notes that a write failed with `e` after it took bytes of the
    /// file (the first such failure is the one kept).
    fn fail(&mut self, e: Error) -> Error {
        self.failed.get_or_insert_with(|| e.clone());
        e
    }

    /// `Err` with the failure `fail` noted, if any.
    fn not_failed(&self) -> Result<()> {
        self.failed.clone().map_or(Ok(()), Err)
    }

    /// Gives up: deletes what was stored, publishes nothing. Chunk writes
    /// in flight are given up to [`ABORT_SETTLE`] to end first: a worker
    /// short of room tries one again for a while, and would store it once
    /// the delete made room, left for the sweep.
    pub async fn abort(mut self) {
        let ended = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(ABORT_SETTLE, ended).await.is_err() {
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
        self.client.discard_inode(self.inode).await;
    }
}

async fn join_one(tasks: &mut JoinSet<Result<()>>) -> Result<()> {
    match tasks.join_next().await {
        Some(Ok(r)) => r,
        Some(Err(e)) => Err(Error::internal(format!("chunk transfer task failed: {e}"))),
        None => Ok(()),
    }
}

/// The info a `CommitInline` answered with, holding the bytes committed:
/// the coordinator does not send back the bytes the writer has.
pub(crate) fn with_bytes(mut info: InodeInfo, data: Bytes) -> InodeInfo {
    if info.inline.is_none() && info.chunks.first().is_some_and(|r| r.is_inline()) {
        info.inline = Some(data);
    }
    info
}
