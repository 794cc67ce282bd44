//! An open file of the mount: the [`FileState`] of its contents plus the
//! I/O that feeds it: chunks fetched through the shared cache, chunks sent
//! to their workers as they fill up, and publishing.
//!
//! One `OpenFile` per inode is shared by every handle of the mount that has
//! the file open, so processes on this machine see each other's writes at
//! once; other clients see them after a publish (`close`, `fsync`). Writes
//! are coalesced into whole chunks here; a chunk filled to its end is sent
//! at once (a sequential writer streams to the workers while it writes),
//! others wait for the publish, for the dirty budget to run out, or for an
//! attribute change kept for the publish (sent early: a failure of such a
//! send is left to the publish, which sends the chunk again).
//!
//! Lock: `inner` is held across the I/O of a write, a cut or a publish (so
//! these are atomic with respect to each other), but a read holds it only
//! to find where the bytes are: chunk versions are never overwritten, so
//! they are fetched without it.

use crate::cache::ChunkCache;
use crate::file_state::{FileState, Source};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tierpool_client::{Client, InodeChange, InodeInfo, InodeKind, MetaOp, NewFileAt, Placing};
use tierpool_types::{ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Result};
use tokio::runtime::Handle;
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;

/// Chunks stored in parallel by one file.
const SEND_WINDOW: usize = 8;
/// `ctime`s of publishes kept until taken (the latest).
const PUBLISHED_KEPT: usize = 8;
/// Chunks fetched ahead of a reader that reads in order.
pub const READ_AHEAD_CHUNKS: u64 = 6;

/// What every open file shares: the client, its runtime, the chunk cache.
#[derive(Clone)]
pub struct Io {
    pub client: Client,
    pub rt: Handle,
    pub cache: Arc<Mutex<ChunkCache>>,
    /// Chunks being fetched, so each is fetched once.
    pub fetching: Arc<Mutex<Fetching>>,
    /// Bytes of unsent writes an open file may hold before sending some.
    pub dirty_limit: u64,
    /// The boot id of the coordinator's machine when its log was last
    /// fsynced for this mount (see [`Io::sync_log`]).
    pub machine: Arc<Mutex<Option<String>>>,
}

thread_local! {
    /// The runtime a thread outside any runtime (one serving the kernel's
    /// requests) runs its calls to the pool on (see [`Io::wait`]); none on
    /// a runtime's own threads, or if it could not be made.
    static OWN: Option<tokio::runtime::Runtime> = match Handle::try_current() {
        Ok(_) => None,
        Err(_) => tokio::runtime::Builder::new_current_thread().enable_all().build().ok(),
    };
}

impl Io {
    /// Runs `call`, a call to the pool, to its end on this thread. A thread
    /// outside any runtime runs it on a runtime of its own: the answer then
    /// wakes this thread directly, where on the shared runtime it wakes
    /// one of that runtime's threads, which wakes this one (a hand-off per
    /// round trip, about 14 µs of a 48 µs `stat` here). The call's own
    /// connections stay with that runtime (`tierpool_net::Pool`); what
    /// outlives a call (the client's batches, lease renewals, chunks
    /// fetched ahead) runs on the shared one (`Client::runtime`).
    ///
    /// A runtime of its own runs only while its thread waits, so nothing
    /// a call leaves behind may need it: under-store calls run on the
    /// under-store's own runtime wherever they come from (`tierpool-under`),
    /// and work that outlives a call on the client's.
    pub fn wait<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        OWN.with(|own| match own {
            Some(own) => own.block_on(call),
            None => self.rt.block_on(call),
        })
    }

    /// Waits until the coordinator's log is fsynced (an `fsync`): the
    /// mount's changes are answered once written there. `Lost` (`EIO`) if
    /// the coordinator's machine restarted since the log was last fsynced
    /// for this mount: changes answered before may be gone with it.
    pub fn sync_log(&self) -> Result<()> {
        let machine = self.wait(self.client.sync_log())?;
        match self.machine.lock().replace(machine.clone()) {
            Some(before) if before != machine => Err(Error::new(
                ErrorKind::Lost,
                "the coordinator's machine restarted since this mount's last fsync: changes answered before \
                 then may have been lost with it",
            )),
            _ => Ok(()),
        }
    }
}

type Send = JoinHandle<Result<(ChunkRef, Bytes)>>;

struct Inner {
    state: FileState,
    /// The inode as last seen at the coordinator.
    info: InodeInfo,
    /// Chunks on their way to a worker, oldest first.
    sending: Vec<InFlight>,
    /// The first failure of a send, reported by the next write or publish.
    error: Option<Error>,
    /// When the last local change was made (ns), shown as mtime until published.
    changed_at: u64,
    /// The inode has no name left: nothing is published any more.
    unlinked: bool,
    /// How far a reader going in order has read, to fetch ahead of it.
    read_end: u64,
    /// Of a small file the metadata holds inline: its chunk 0 as last seen
    /// with its bytes (still read after the file loses its last name).
    inline: Option<(ChunkRef, Bytes)>,
    /// Attribute changes made while local changes were unpublished, and
    /// when (ns): shown here at once, published with the changes.
    pending: InodeChange,
    pending_at: u64,
    /// The `ctime`s the publishes since the last `take_published` left
    /// the inode with, as the coordinator answered them.
    published: Vec<u64>,
    /// The last handle closed (`close` ran): nothing is deferred or sent
    /// any more, as nothing would publish or discard it.
    closed: bool,
    /// A file this mount answered the create of itself: not in the pool
    /// until its first publish (or [`OpenFile::make`]) makes it.
    making: Option<NewFileAt>,
    /// Its directory as the publish that made it left it, until taken.
    made_dir: Option<InodeInfo>,
    /// Why the last attempt to make it failed, until taken.
    make_error: Option<Error>,
    /// The contents (size and chunk versions) published when the file was
    /// opened here, while nothing has changed them since: neither a write
    /// or cut here nor a newer publish taken in (see [`OpenFile::kept`]).
    unmoved: Option<Contents>,
}

/// A file's published contents: its size and chunk versions. Versions are
/// never reused, so equal contents are equal bytes.
pub type Contents = (u64, Vec<ChunkRef>);

/// A chunk on its way to a worker as `version`.
struct InFlight {
    index: u64,
    version: u64,
    task: Send,
    /// Sent ahead of the publish (`send_early`): its failure is not the
    /// writer's error; the chunk is only unsent again, for the publish.
    early: bool,
}

pub struct OpenFile {
    inode: InodeId,
    inner: Mutex<Inner>,
    /// `inner.making` is set: read without the lock, which a publish
    /// holds across its I/O.
    unmade: AtomicBool,
    /// A file of a snapshot: never refreshed from the live inode.
    frozen: bool,
    /// Its number among the open files this process made (see `kept_pages.rs`).
    seq: u64,
}

/// The next [`OpenFile::seq`].
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

impl OpenFile {
    /// The file `info` (with its chunk list) as published.
    pub fn new(info: InodeInfo) -> OpenFile {
        let info_id = info.id;
        let state = FileState::new(info.id, info.chunk_size, info.size, info.chunks.clone());
        let inline = inline_of(&info);
        // Only files small enough for the kernel to cache (`open_flags`): a
        // chunk list of up to 16 chunks, kept past the close (`kept_pages.rs`).
        let small = info.size <= crate::fs::CACHED_MAX;
        let unmoved = (small && info.kind == InodeKind::File && info.origin.is_none() && info.has_chunks())
            .then(|| (info.size, info.chunks.clone()));
        let inner = Inner {
            state,
            info,
            sending: Vec::new(),
            error: None,
            changed_at: 0,
            unlinked: false,
            read_end: 0,
            inline,
            pending: InodeChange::default(),
            pending_at: 0,
            published: Vec::new(),
            closed: false,
            making: None,
            made_dir: None,
            make_error: None,
            unmoved,
        };
        let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
        OpenFile { inode: info_id, inner: Mutex::new(inner), unmade: AtomicBool::new(false), frozen: false, seq }
    }

    /// A new empty file `info` that this mount answered the create of
    /// itself: `make` makes it in the pool with its first publish.
    pub fn making(info: InodeInfo, make: NewFileAt) -> OpenFile {
        let f = OpenFile::new(info);
        let mut g = f.inner.lock();
        g.making = Some(make);
        g.unmoved = None;
        drop(g);
        f.unmade.store(true, Ordering::Release);
        f
    }

    /// Where the file is to be made, while it is not: `(directory, name)`.
    pub fn to_make_at(&self) -> Option<(u64, String)> {
        self.inner.lock().making.as_ref().map(|m| (m.parent.0, m.name.clone()))
    }

    /// Whether the file is still to be made in the pool.
    pub fn unmade(&self) -> bool {
        self.unmade.load(Ordering::Acquire)
    }

    /// Makes the file in the pool now if it is still to be made, with the
    /// attribute changes kept for it but not its bytes (another change
    /// needs it there, or it waited long enough): the file and its
    /// directory as the make left them; `None` if it was made already or
    /// never will be (its last handle closed).
    pub fn make(&self, io: &Io) -> Result<Option<(InodeInfo, InodeInfo)>> {
        let mut g = self.inner.lock();
        let Some(file) = g.making.clone() else { return Ok(None) };
        let made = match io.wait(io.client.make_and_publish(&file, None, &g.pending)) {
            Ok(m) => m,
            Err(e) => {
                g.make_error = Some(e.clone());
                return Err(e);
            }
        };
        made_here(&mut g, &made.file);
        self.unmade.store(false, Ordering::Release);
        if let Some(info) = answered(&mut g, made.published)? {
            g.info = InodeInfo { chunks: Vec::new(), ..info };
        }
        let file = g.info.clone();
        Ok(Some((file, made.dir)))
    }

    /// Why the last attempt to make the file failed, once.
    pub fn take_make_error(&self) -> Option<Error> {
        self.inner.lock().make_error.take()
    }

    /// The directory as the publish that made this file left it, once.
    pub fn take_made_dir(&self) -> Option<InodeInfo> {
        self.inner.lock().made_dir.take()
    }

    /// A file of a snapshot, `info` with the chunk list it froze: read
    /// only, and a chunk gone is an error, never the live file's bytes.
    pub fn frozen(info: InodeInfo) -> OpenFile {
        let f = OpenFile::new(info);
        f.inner.lock().unmoved = None;
        OpenFile { frozen: true, ..f }
    }

    /// Its number among the open files this process made, each new one higher.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The contents every read of this open file returned, if they were
    /// all of one publish: the one it was opened on, with nothing written
    /// or cut here and no other publish taken in since (`None` too for a
    /// file made here, beneath an attachment, or unlinked). The pages the
    /// kernel cached from those reads then hold exactly these contents.
    pub fn kept(&self) -> Option<Contents> {
        let g = self.inner.lock();
        g.unmoved.clone().filter(|_| !g.unlinked)
    }

    /// The pool inode whose chunks this file reads.
    pub fn inode(&self) -> InodeId {
        self.inode
    }

    /// Its size as this mount shows it.
    pub fn size(&self) -> u64 {
        self.inner.lock().state.size()
    }

    /// The inode as this mount shows it: local size and times while
    /// changes are unpublished, no links once unlinked.
    pub fn info(&self) -> InodeInfo {
        let g = self.inner.lock();
        let mut i = g.info.clone();
        i.chunks = Vec::new();
        i.size = g.state.size();
        if g.state.changed() {
            (i.mtime, i.ctime) = (g.changed_at, g.changed_at);
        }
        let p = &g.pending;
        if *p != InodeChange::default() {
            i.mode = p.mode.unwrap_or(i.mode);
            (i.uid, i.gid) = (p.uid.unwrap_or(i.uid), p.gid.unwrap_or(i.gid));
            (i.atime, i.mtime) = (p.atime.unwrap_or(i.atime), p.mtime.unwrap_or(i.mtime));
            i.ctime = i.ctime.max(g.pending_at);
        }
        if g.unlinked {
            i.nlink = 0;
        }
        i
    }

    /// A newer view of the inode from the coordinator (`info` with its
    /// chunk list replaces the contents only if nothing changed here).
    pub fn refresh(&self, info: InodeInfo) {
        self.refresh_locked(&mut self.inner.lock(), info)
    }

    fn refresh_locked(&self, g: &mut Inner, info: InodeInfo) {
        if info.has_chunks() {
            if g.unmoved.as_ref().is_some_and(|(size, chunks)| (*size, &chunks[..]) != (info.size, &info.chunks[..])) {
                g.unmoved = None;
            }
            g.state.refresh(info.size, info.chunks.clone());
            g.inline = inline_of(&info).or(g.inline.take());
        }
        g.info = InodeInfo { chunks: Vec::new(), ..info };
    }

    /// Makes the attribute changes `change` here, to be published with the
    /// local changes (one commit at `close` or `fsync`, not one each, as
    /// `tar` makes three to every file it writes); the inode as this mount
    /// now shows it. `None` if nothing is waiting to be published: the
    /// caller makes them at once.
    ///
    /// A writer that sets attributes has mostly written its last bytes
    /// (`tar`, `cp -p` and `rsync` set them after the contents): the
    /// chunks it left unsent start on their way to the workers now, so
    /// that the publish finds them stored. Bytes written after that make
    /// the chunk unsent again (the sent version is then discarded).
    pub fn defer_change(&self, io: &Io, change: &InodeChange) -> Option<InodeInfo> {
        {
            let mut g = self.inner.lock();
            // Not after a failed publish: made at once, their error is theirs.
            let waiting = g.state.changed() || g.making.is_some();
            if self.frozen || g.closed || g.unlinked || !waiting || g.error.is_some() {
                return None;
            }
            let p = &mut g.pending;
            p.mode = change.mode.or(p.mode);
            (p.uid, p.gid) = (change.uid.or(p.uid), change.gid.or(p.gid));
            (p.atime, p.mtime) = (change.atime.or(p.atime), change.mtime.or(p.mtime));
            g.pending_at = crate::attr::time_ns();
            send_early(io, &mut g);
        }
        Some(self.info())
    }

    /// The `ctime`s the publishes since the last call left the inode with.
    pub fn take_published(&self) -> Vec<u64> {
        std::mem::take(&mut self.inner.lock().published)
    }

    /// The inode lost its last name: nothing is published any more.
    pub fn mark_unlinked(&self) {
        self.inner.lock().unlinked = true;
    }

    /// Up to `size` bytes at `offset`, as pieces in order.
    pub fn read(&self, io: &Io, offset: u64, size: u32) -> Result<Vec<Bytes>> {
        let (sources, prefetch) = {
            let mut g = self.inner.lock();
            let end = (offset + u64::from(size)).min(g.state.size());
            let cs = g.state.chunk_size();
            let mut sources = Vec::new();
            let mut pos = offset;
            while pos < end {
                let index = pos / cs;
                let from = (pos - index * cs) as usize;
                let to = ((end - index * cs) as usize).min(cs as usize);
                sources.push((index, from, to, g.state.source(index, from, to)));
                pos = index * cs + to as u64;
            }
            // The kernel's read-ahead sends neighbouring reads out of order:
            // a read near the furthest point read so far continues a sequence.
            let in_order = offset.abs_diff(g.read_end) <= 2 * cs || offset == 0;
            g.read_end = if in_order { g.read_end.max(end) } else { end };
            for (index, from, to, source) in &mut sources {
                if let Source::Stored(r) = source {
                    if let Some(d) = held_inline(&g, *index, *r) {
                        *source = Source::Local(slice_padded(&d, *from, *to).to_vec());
                    }
                }
            }
            let mut prefetch = Vec::new();
            if in_order && end < g.state.size() {
                let next = end / cs;
                let last = (g.state.size() - 1) / cs;
                for index in next..=last.min(next + READ_AHEAD_CHUNKS) {
                    if let Source::Stored(r) = g.state.source(index, 0, 0) {
                        prefetch.push((index, r));
                    }
                }
            }
            (sources, prefetch)
        };
        let inode = self.inode;
        for (index, r) in prefetch {
            prefetch_chunk(io, r.key(inode, index), r);
        }
        let mut out = Vec::with_capacity(sources.len());
        for (index, from, to, source) in sources {
            out.push(match source {
                Source::Local(b) => Bytes::from(b),
                Source::Zero => Bytes::from(vec![0u8; to - from]),
                Source::Stored(r) => {
                    let data = match fetch(io, r.key(inode, index), r) {
                        Err(e) if e.kind == ErrorKind::Lost => self.refetch(io, index, r).ok_or(e)??,
                        other => other?,
                    };
                    slice_padded(&data, from, to)
                }
            });
        }
        Ok(out)
    }

    /// A published chunk version this mount read is gone: another client
    /// replaced it and its worker dropped the old version to make room.
    /// When nothing changed here, the file's current contents replace this
    /// mount's view (as a fresh open would see them) and the chunk's
    /// current version is fetched; `None` if that does not apply.
    fn refetch(&self, io: &Io, index: u64, gone: ChunkRef) -> Option<Result<Bytes>> {
        if self.frozen {
            return None;
        }
        let info = match io.wait(io.client.stat_inode(self.inode, true)) {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        let r = {
            let mut g = self.inner.lock();
            if g.state.changed() {
                return None;
            }
            self.refresh_locked(&mut g, info);
            match g.state.source(index, 0, 0) {
                Source::Stored(r) if r.version != gone.version => r,
                _ => return None,
            }
        };
        tracing::debug!(
            "inode {}: chunk {index} was replaced elsewhere; reading its version {}",
            self.inode,
            r.version
        );
        Some(fetch(io, r.key(self.inode, index), r))
    }

    /// Writes `data` at `offset` (or at the end, for `append`); returns the
    /// offset written at.
    pub fn write(&self, io: &Io, offset: u64, data: &[u8], append: bool) -> Result<u64> {
        let mut g = self.inner.lock();
        g.unmoved = None;
        collect(io, &mut g, false);
        if let Some(e) = &g.error {
            return Err(e.clone());
        }
        let offset = if append { g.state.size() } else { offset };
        for (index, r) in g.state.loads_for_write(offset, data.len() as u64) {
            let bytes = fetch_in(io, &g, index, r)?;
            g.state.install(index, &bytes);
        }
        let full = g.state.write(offset, data);
        g.changed_at = crate::attr::time_ns();
        g.pending.mtime = None; // a write after setting the time moves it on
        for index in full {
            send(io, &mut g, index)?;
        }
        while g.state.dirty_bytes() > io.dirty_limit {
            let Some(index) = g.state.oldest_dirty() else { break };
            send(io, &mut g, index)?;
        }
        Ok(offset)
    }

    /// Cuts or extends the file to `size` (published by the caller).
    pub fn truncate(&self, io: &Io, size: u64) -> Result<()> {
        let mut g = self.inner.lock();
        g.unmoved = None;
        if let Some((index, r)) = g.state.load_for_cut(size) {
            let bytes = fetch_in(io, &g, index, r)?;
            g.state.install(index, &bytes);
        }
        g.state.truncate(size);
        g.changed_at = crate::attr::time_ns();
        g.pending.mtime = None;
        Ok(())
    }

    /// `fsync`: publishes, then, of a file that writes back (its own mode,
    /// else its attachment's), writes it to its under-store before returning.
    /// Whether it holds changes (bytes or attributes) a publish would make.
    pub fn unpublished(&self) -> bool {
        let g = self.inner.lock();
        !g.unlinked && (g.state.changed() || g.making.is_some() || g.pending != InodeChange::default())
    }

    pub fn sync(&self, io: &Io) -> Result<()> {
        self.publish(io)?;
        let (inode, below) = {
            let g = self.inner.lock();
            (g.state.inode(), g.info.origin.is_some() && !g.unlinked)
        };
        if below {
            io.rt.block_on(io.client.flush_back(&format!("inode {inode}"), inode))?;
        }
        // The mount's changes were acknowledged once written: now fsynced.
        io.sync_log()
    }

    /// Publishes every local change: sends what is held here, then commits
    /// the new chunk versions and size at once. A file unlinked meanwhile
    /// publishes nothing (its data lives on here until the last close).
    pub fn publish(&self, io: &Io) -> Result<()> {
        let mut g = self.inner.lock();
        let r = self.publish_locked(io, &mut g);
        if g.making.is_none() {
            self.unmade.store(false, Ordering::Release);
        }
        r
    }

    fn publish_locked(&self, io: &Io, g: &mut Inner) -> Result<()> {
        if g.unlinked || !(g.state.changed() || g.making.is_some()) {
            return Ok(());
        }
        if !g.state.changed() {
            // Made empty: made with the attribute changes kept for it.
            let file = g.making.clone().expect("a file to make");
            let got = io.wait(io.client.make_and_publish(&file, None, &g.pending));
            let got = got.inspect_err(|e| g.make_error = Some(e.clone()))?;
            made_here(g, &got.file);
            g.made_dir = Some(got.dir);
            if let Some(info) = answered(g, got.published)? {
                g.info = InodeInfo { chunks: Vec::new(), ..info };
            }
            return Ok(());
        }
        g.error = None;
        if self.publish_inline(io, g)? {
            return Ok(());
        }
        loop {
            match g.state.dirty_chunks()[..] {
                // One chunk and nothing in flight (a small file's publish):
                // sent from this thread, without a hop to the runtime's.
                [index] if g.sending.is_empty() => send_now(io, g, index)?,
                ref dirty => {
                    for &index in dirty {
                        send(io, g, index)?;
                    }
                }
            }
            collect(io, g, true);
            if let Some(e) = g.error.take() {
                return Err(e);
            }
            if g.state.dirty_chunks().is_empty() {
                break;
            }
        }
        let c = g.state.commit().ok_or_else(|| Error::internal("chunks are still held after sending them all"))?;
        let inode = g.state.inode();
        tracing::debug!(
            "inode {inode}: publishing {} bytes, cut {:?}, {} new chunk versions",
            c.size,
            c.cut,
            c.chunks.len()
        );
        let op = MetaOp::UpdateFile { inode, size: c.size, truncate: c.cut, chunks: c.chunks };
        let got = commit(io, g, op)?;
        if let Some(info) = answered(g, got)? {
            g.state.published(info.size, info.chunks.clone());
            g.inline = inline_of(&info).or(g.inline.take());
            let through = info.origin.as_ref().is_some_and(|o| o.dirty);
            g.info = InodeInfo { chunks: Vec::new(), ..info.clone() };
            if through {
                // Beneath an attachment that writes through: below before close or fsync
                // returns; one that writes back: on the workers' disks.
                io.rt.block_on(io.client.persist(&format!("inode {inode}"), info, false))?;
            }
        }
        discard_garbage(io, g);
        Ok(())
    }

    /// Publishes a small file whose bytes are all held here with them, held
    /// by the metadata (no worker stores it); `false` if it is not such a
    /// file (or the coordinator has no room left for it): it is published
    /// by chunks. Not for files of an under-store, which are written to it
    /// from their chunks.
    fn publish_inline(&self, io: &Io, g: &mut Inner) -> Result<bool> {
        let max = io.wait(io.client.layout())?.inline_max;
        if !inline_candidate(g, max) {
            return Ok(false); // sends in flight keep going meanwhile
        }
        collect(io, g, true);
        if let Some(e) = g.error.take() {
            return Err(e);
        }
        let Some(data) = g.state.small_contents(max) else { return Ok(false) };
        let inode = g.state.inode();
        let version = io.wait(io.client.fresh_version())?;
        tracing::debug!("inode {inode}: publishing {} bytes inline as version {version}", data.len());
        let op = MetaOp::UpdateInline { inode, version, data: Bytes::from(data) };
        let got = commit(io, g, op)?;
        if let Err(e) = &got {
            if e.kind == ErrorKind::PoolFull {
                tracing::debug!("inode {inode}: not kept inline ({e}); publishing its chunk");
                return Ok(false);
            }
        }
        if let Some(info) = answered(g, got)? {
            g.state.published_inline(info.size, info.chunks.clone());
            g.inline = inline_of(&info);
            g.info = InodeInfo { chunks: Vec::new(), ..info };
        }
        discard_garbage(io, g);
        Ok(true)
    }

    /// The last handle closed: waits for sends in flight and deletes every
    /// version that will not be published: all of them if the file was
    /// unlinked, or if its last publish failed (that `close` reported the
    /// error; the changes are lost, as with any file system whose `close`
    /// fails).
    pub fn close(&self, io: &Io) {
        let mut g = self.inner.lock();
        g.closed = true;
        collect(io, &mut g, true);
        let mut keys = g.state.take_garbage();
        if g.unlinked || g.state.changed() {
            if !g.unlinked {
                tracing::warn!("inode {}: unpublished changes dropped at the last close", g.state.inode());
            }
            keys.extend(g.state.unpublished());
        }
        // Attribute changes waiting for a publish that failed: acknowledged, so made on their own
        // (not of a file never made: the publish that failed was to make it).
        let pending = std::mem::take(&mut g.pending);
        if pending != InodeChange::default() && !g.unlinked && g.making.is_none() {
            if let Err(e) = io.wait(io.client.set_inode(g.state.inode(), &pending)) {
                tracing::warn!("inode {}: attribute changes not made: {e}", g.state.inode());
            }
        }
        // Never made now: what it held is dropped above.
        if g.making.take().is_some() {
            self.unmade.store(false, Ordering::Release);
        }
        // Before the release is answered: the space is free once it is.
        io.wait(io.client.discard_versions(keys));
    }
}

/// Publishes `op` with the attribute changes kept for it, and makes the
/// file first if it is still to be made: the publish's answer. The make's
/// failure is the error (nothing changed then).
fn commit(io: &Io, g: &mut Inner, op: MetaOp) -> Result<Result<(InodeInfo, Vec<u64>)>> {
    let Some(file) = g.making.clone() else { return Ok(io.wait(io.client.publish_with(op, &g.pending))) };
    let made = io.wait(io.client.make_and_publish(&file, Some(op), &g.pending));
    let made = made.inspect_err(|e| g.make_error = Some(e.clone()))?;
    made_here(g, &made.file);
    g.made_dir = Some(made.dir);
    Ok(made.published)
}

/// The file was made in the pool as `file`.
fn made_here(g: &mut Inner, file: &InodeInfo) {
    g.making = None;
    g.published.push(file.ctime);
    g.info = InodeInfo { chunks: Vec::new(), ..file.clone() };
}

/// The answer to a publish of `g` (`publish_with`), noted in it: the inode
/// as published, `None` if the file was unlinked meanwhile (its changes
/// stay local).
fn answered(g: &mut Inner, got: Result<(InodeInfo, Vec<u64>)>) -> Result<Option<InodeInfo>> {
    match got {
        Ok((info, ctimes)) => {
            g.pending = InodeChange::default();
            g.published.extend(ctimes);
            let over = g.published.len().saturating_sub(PUBLISHED_KEPT);
            g.published.drain(..over);
            Ok(Some(info))
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            tracing::debug!("inode {} was unlinked while open: its changes stay local", g.state.inode());
            g.unlinked = true;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Deletes, in the background, the versions `g` stored that nothing will publish.
fn discard_garbage(io: &Io, g: &mut Inner) {
    let garbage = g.state.take_garbage();
    if garbage.is_empty() {
        return; // most publishes: no task (and no thread woken) for nothing
    }
    let client = io.client.clone();
    io.rt.spawn(async move { client.discard_versions(garbage).await });
}

/// Hands chunk `index` out to be stored as a fresh version, keeping at
/// most `SEND_WINDOW` sends in flight.
fn send(io: &Io, g: &mut Inner, index: u64) -> Result<()> {
    send_in_flight(io, g, index, false)
}

/// [`send`], `early` if ahead of the publish.
fn send_in_flight(io: &Io, g: &mut Inner, index: u64, early: bool) -> Result<()> {
    while g.sending.len() >= SEND_WINDOW {
        collect_one(io, g);
    }
    let Some(store) = to_store(io, g, index)? else { return Ok(()) };
    let (version, task) = (store.version, io.rt.spawn(store.run()));
    g.sending.push(InFlight { index, version, task, early });
    Ok(())
}

/// Hands out the unsent chunks of `g` while none is in flight, as many as
/// go at once (`SEND_WINDOW`: the change never waits for a send; the
/// publish sends the rest), unless the file is one its publish keeps in
/// the metadata (which takes its bytes from here), or sending is refused
/// (the publish then tries again).
fn send_early(io: &Io, g: &mut Inner) {
    if !g.sending.is_empty() || g.info.kind != InodeKind::File {
        return;
    }
    let Ok(layout) = io.wait(io.client.layout()) else { return };
    if inline_candidate(g, layout.inline_max) {
        return;
    }
    for index in g.state.dirty_chunks().into_iter().take(SEND_WINDOW) {
        if send_in_flight(io, g, index, true).is_err() {
            return;
        }
    }
}

/// Whether the publish of `g` may give its bytes to the metadata to keep
/// (`publish_inline`), which keeps files of up to `inline_max` bytes.
fn inline_candidate(g: &Inner, inline_max: u64) -> bool {
    g.info.origin.is_none() && g.info.kind == InodeKind::File && g.state.fits_inline(inline_max)
}

/// Stores chunk `index` as a fresh version and waits for it here.
fn send_now(io: &Io, g: &mut Inner, index: u64) -> Result<()> {
    let Some(store) = to_store(io, g, index)? else { return Ok(()) };
    let version = store.version;
    let outcome = io.wait(store.run());
    stored(io, g, index, version, outcome, false);
    Ok(())
}

/// Chunk `index` of an open file on its way to a worker as `version`.
struct Store {
    client: Client,
    inode: InodeId,
    index: u64,
    version: u64,
    data: Bytes,
    attrs: tierpool_types::ChunkAttrs,
    placing: Placing,
}

impl Store {
    async fn run(self) -> Result<(ChunkRef, Bytes)> {
        let Store { client, inode, index, version, data, attrs, placing } = self;
        let r = client.put_version(inode, index, version, data.clone(), attrs, placing).await?;
        Ok((r, data))
    }
}

/// Takes chunk `index`'s bytes from `g` to be stored as a fresh version
/// (`None` if it holds none to send).
fn to_store(io: &Io, g: &mut Inner, index: u64) -> Result<Option<Store>> {
    let version = io.wait(io.client.fresh_version())?;
    let Some(data) = g.state.send(index, version) else { return Ok(None) };
    tracing::debug!("inode {}: sending chunk {index} ({} bytes) as version {version}", g.state.inode(), data.len());
    let (client, inode, attrs, placing) = (io.client.clone(), g.state.inode(), g.info.attrs, Placing::of(&g.info));
    Ok(Some(Store { client, inode, index, version, data, attrs, placing }))
}

/// Takes in the answers of finished sends (all of them, waiting, if `all`).
fn collect(io: &Io, g: &mut Inner, all: bool) {
    while !g.sending.is_empty() {
        if !all && !g.sending[0].task.is_finished() {
            break;
        }
        collect_one(io, g);
    }
}

/// Waits for the oldest send and records its outcome.
fn collect_one(io: &Io, g: &mut Inner) {
    let InFlight { index, version, task, early } = g.sending.remove(0);
    let outcome = io.rt.block_on(task).unwrap_or_else(|e| Err(Error::internal(format!("chunk send failed: {e}"))));
    stored(io, g, index, version, outcome, early);
}

/// Records the outcome of storing chunk `index` as `version`; the failure
/// of a send that was `early` leaves the chunk to the publish.
fn stored(io: &Io, g: &mut Inner, index: u64, version: u64, outcome: Result<(ChunkRef, Bytes)>, early: bool) {
    match outcome {
        Ok((r, data)) => {
            io.cache.lock().insert(r.key(g.state.inode(), index), data);
            g.state.sent(index, r);
        }
        Err(e) => {
            tracing::warn!("storing chunk {index} of inode {}: {e}", g.state.inode());
            g.state.send_failed(index, version);
            if !early {
                g.error.get_or_insert(e);
            }
        }
    }
}

/// Chunk 0 of `info` with its bytes, if the metadata holds them inline.
fn inline_of(info: &InodeInfo) -> Option<(ChunkRef, Bytes)> {
    Some((*info.chunks.first().filter(|r| r.is_inline())?, info.inline.clone()?))
}

/// The bytes of chunk `index` version `r` if this open file holds them
/// inline (as the metadata gave them).
fn held_inline(g: &Inner, index: u64, r: ChunkRef) -> Option<Bytes> {
    let (held, data) = g.inline.as_ref()?;
    (index == 0 && *held == r).then(|| data.clone())
}

/// The bytes of chunk `index` version `r` of the open file `g`.
fn fetch_in(io: &Io, g: &Inner, index: u64, r: ChunkRef) -> Result<Bytes> {
    match held_inline(g, index, r) {
        Some(d) => Ok(d),
        None => fetch(io, r.key(g.state.inode(), index), r),
    }
}

/// The bytes of chunk version `key` (`r`), through the cache.
fn fetch(io: &Io, key: ChunkKey, r: ChunkRef) -> Result<Bytes> {
    if let Some(d) = io.cache.lock().get(key) {
        return Ok(d);
    }
    io.wait(io.loader().load(key, r))
}

/// Starts fetching chunk version `key` into the cache, unless it is there.
fn prefetch_chunk(io: &Io, key: ChunkKey, r: ChunkRef) {
    if io.cache.lock().contains(key) || io.fetching.lock().contains_key(&key) {
        return;
    }
    let loader = io.loader();
    io.rt.spawn(async move {
        let _ = loader.load(key, r).await;
    });
}

/// Fetches chunk versions into the cache, each once however many ask for it.
#[derive(Clone)]
pub struct Loader {
    client: Client,
    cache: Arc<Mutex<ChunkCache>>,
    fetching: Arc<Mutex<Fetching>>,
}

/// Chunk versions being fetched, each with the cell its fetch fills.
pub type Fetching = HashMap<ChunkKey, Arc<OnceCell<Result<Bytes>>>>;

impl Loader {
    async fn load(&self, key: ChunkKey, r: ChunkRef) -> Result<Bytes> {
        let cell = self.fetching.lock().entry(key).or_default().clone();
        let out = cell
            .get_or_init(|| async {
                let path = format!("inode {}", key.inode);
                let got = self.client.fetch_chunk(&path, key.inode, key.index, r, r.len).await;
                // A chunk below is cached under the version it is loaded as, not as "below".
                if let (Ok(d), false) = (&got, r.is_below()) {
                    self.cache.lock().insert(key, d.clone());
                }
                got
            })
            .await
            .clone();
        let mut f = self.fetching.lock();
        if f.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            f.remove(&key);
        }
        out
    }
}

impl Io {
    fn loader(&self) -> Loader {
        Loader { client: self.client.clone(), cache: self.cache.clone(), fetching: self.fetching.clone() }
    }
}

/// Bytes `from..to` of a chunk whose stored bytes are `data` (zeros after them).
fn slice_padded(data: &Bytes, from: usize, to: usize) -> Bytes {
    if to <= data.len() {
        return data.slice(from..to);
    }
    let mut out = vec![0u8; to - from];
    if from < data.len() {
        out[..data.len() - from].copy_from_slice(&data[from..]);
    }
    Bytes::from(out)
}
