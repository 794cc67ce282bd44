//! The durable metadata log.
//!
//! Files in the meta directory:
//! - `snapshot`: the whole state after some lsn S (replaced atomically);
//! - `log-<first lsn, 20 digits>`: segments of records, appended in lsn order.
//!
//! Group commit: callers queue encoded records (under the coordinator's
//! state lock, so queue order is lsn order). The first caller then waiting
//! for its records writes what is queued itself, as the leader of a group:
//! it holds the segment while it writes (callers that find it held leave
//! their records to the holder, which looks at the queue again after
//! letting go), so records reach the kernel without a hop to another
//! thread. A leader writes until its own records are written, then leaves
//! what is still queued to the flusher thread, so no request writes for
//! others for long. Under [`LogSync::Always`], a leader that waits alone
//! (no other caller waiting for an fsync, none under way, none met within
//! [`QUIET`], and another runtime thread to serve requests meanwhile)
//! issues the `fdatasync` itself once it has let go of
//! the segment, and publishes the new synced lsn: a lone writer waits on
//! no other thread (a hand-off to a sleeping thread and back costs two
//! wakeups). Otherwise the leader hands the fsync to the syncer thread,
//! which issues one `fdatasync` for everything written meanwhile and
//! publishes it, and the runtime's threads go on serving requests. Writing
//! never waits for an fsync: changes arriving during one are written at
//! once and share the next. Records whose callers wait only for them to be
//! written (a file system's changes, [`LogWriter::append_answered_written`])
//! are fsynced within [`LAZY`] rather than at once, so a burst of them
//! shares one fsync; a caller that comes to wait for the fsync of such a
//! record asks for it at once (`wait_synced`). The flusher thread does the slow writes: the
//! zeros ahead (below), and a snapshot in the queue (callers leave it and
//! what follows it to the thread); it also writes what no caller waits for
//! within [`TICK`].
//!
//! Snapshots: the coordinator asks for one every so many records with a
//! copy of its state (taken under its lock, which a copy holds far shorter
//! than an encoding would), unless one is still being made. The flusher
//! thread meets it in the queue after the records before it: it fsyncs the
//! segment, starts the next one at the snapshot's lsn + 1, and hands the
//! copy to a thread of its own, which encodes it, writes the `snapshot`
//! file (fsynced, then renamed over the old one) and only then drops the
//! segments it covers. Records go on being written meanwhile. Invariant:
//! segments start at a snapshot's lsn + 1 (or at the first lsn after a
//! recovery), and every segment not covered by the snapshot on disk is
//! there, so the snapshot and the segments after it always hold every
//! record written.
//!
//! Three lsns are published: *written* (in the kernel: it survives the
//! coordinator's process dying), *durable* (what replies wait for) and
//! *synced* (fdatasync'd). With [`LogSync::Always`] durable is synced:
//! nothing is acknowledged before its fsync, except by the callers that
//! ask for *written* (a file system's changes, which its `fsync` then
//! waits for). With [`LogSync::Every`] durable is written, and synced
//! follows within the period. Invariant: synced <= durable <= written,
//! each only rising, and whatever destroys data on the strength of a
//! change (deleting collected chunks, pushing a new partition table) waits
//! for *synced*, so a machine crash that loses the last period's changes
//! never leaves a file naming deleted chunks.
//!
//! Space ahead of the records is written with zeros by the flusher
//! thread, up to a [`RESERVE`] ahead once fewer than half of one is left,
//! in pieces of [`RESERVE_PIECE`] between which it lets go of the segment
//! (so a request waits for one piece at most), each piece's writeback
//! started at once: records then mostly overwrite blocks the file system
//! has already allocated and written, so an fdatasync writes their bytes
//! only. (The first one after each step also commits the file's new size
//! and may wait for zeros still being written: once per 2 MiB of records. Space merely allocated, by `fallocate`, is marked
//! unwritten, and converting it costs every fsync a second write: about
//! 1.5x the time here.) Records that outrun the zeros grow the file.
//! Recovery takes zeros after the last record as the end.
//!
//! Recovery: load the snapshot, replay every record with lsn > S; a torn tail
//! of the last segment is cut off (its records were never acknowledged, or,
//! fsynced within a period, lost with the machine after they were). A
//! whole record that cannot be used (a newer version, impossible content)
//! stops recovery with an error: cutting it off could lose acknowledged
//! changes. The bytes of records and snapshots are defined in [`crate::records`].
//! A write or fsync failure stops the process: the log can no longer promise
//! durability, and acknowledging anyway could lose data.

use crate::records::{decode_record, decode_snapshot, encode_snapshot, Decoded};
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tierpool_meta::MetaState;
use tierpool_types::{Error, ErrorKind, Result};
use tokio::sync::watch;

/// How often the flusher thread writes records that no caller waited for.
const TICK: Duration = Duration::from_millis(5);

/// How long after they were written records that no caller waits to see
/// fsynced may wait for their fsync under [`LogSync::Always`].
pub const LAZY: Duration = Duration::from_millis(10);

/// Space written with zeros at a time ahead of the records of a segment,
/// once fewer than half of it are left.
pub const RESERVE: u64 = 4 << 20;
/// Zeros written ahead at a time by the flusher thread.
const RESERVE_PIECE: u64 = 256 << 10;
/// What zeros are written from.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

enum Item {
    Records {
        bytes: Vec<u8>,
        last_lsn: u64,
        /// Its caller will wait for the fsync (not only the write).
        awaited: bool,
    },
    /// The state after `lsn`, to be written as the snapshot.
    Snapshot { lsn: u64, state: Box<MetaState> },
    /// fsync what was written now, whatever the period.
    Sync,
}

/// When the log is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogSync {
    /// Before a change is acknowledged: an acknowledged change survives a
    /// crash of the machine.
    #[default]
    Always,
    /// At most this long after a change was written, which is before it is
    /// acknowledged: an acknowledged change survives the coordinator's
    /// process dying (`kill -9`), and a crash of the machine loses at most
    /// the changes of the last period (the log keeps a prefix: a torn tail
    /// is cut at recovery).
    Every(Duration),
}

impl LogSync {
    /// The period of [`LogSync::Every`] in milliseconds, 0 for `Always`.
    pub fn period_ms(self) -> u64 {
        match self {
            LogSync::Always => 0,
            LogSync::Every(p) => p.as_millis() as u64,
        }
    }
}

/// What callers and the flusher thread share: the queue, and the segment
/// whoever writes holds.
struct Shared {
    /// Items not yet taken by a writer, in lsn order.
    queue: Mutex<Vec<Item>>,
    /// Held while writing; callers only ever try it.
    flusher: Mutex<Flusher>,
    /// Set when the flusher thread is to write now (a snapshot is queued,
    /// or the writer is gone), with what wakes it.
    call: Mutex<Call>,
    wake: Condvar,
    /// The last lsn written.
    written: watch::Receiver<u64>,
    /// Set while a snapshot is asked for and not yet written.
    snapshotting: Arc<AtomicBool>,
    /// The thread writing the last snapshot.
    snapshot_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    lsns: Arc<Lsns>,
    syncs: Arc<AtomicU64>,
}

#[derive(Default)]
struct Call {
    now: bool,
    stop: bool,
}

/// Hands records to the log; what callers wait on.
pub struct LogWriter {
    shared: Arc<Shared>,
    written: watch::Receiver<u64>,
    durable: watch::Receiver<u64>,
    synced: watch::Receiver<u64>,
    syncs: Arc<AtomicU64>,
    sync: LogSync,
    flusher_thread: Option<std::thread::JoinHandle<()>>,
    /// Callers waiting for an fsync now (`wait_durable` under
    /// [`LogSync::Always`], `wait_synced`).
    waiting: AtomicUsize,
}

impl Drop for LogWriter {
    /// The flusher thread writes what is queued, fsyncs it and ends, and
    /// a snapshot being written is finished, before this returns: a log
    /// opened next on the same directory finds the files at rest. (So the
    /// drop may take as long as writing a snapshot: it happens when a
    /// coordinator stops.)
    fn drop(&mut self) {
        self.shared.call(|c| c.stop = true);
        if let Some(t) = self.flusher_thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.shared.snapshot_thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    /// Whether a caller waiting as `w` may fsync itself: alone now, no
    /// writers met lately, and on a runtime with another thread to serve
    /// requests meanwhile. On a runtime of one thread (the default on a
    /// machine of one core) no other request is even read during the
    /// fsync, so the next writer finds itself alone too: each would fsync
    /// for itself, one after another (deletes of 32 clients ran at 9-19k/s
    /// there, 30-35k with the fsyncs left to the syncer).
    fn lone_writer(&self, w: &Waiting<'_>) -> bool {
        if !w.alone {
            self.lsns.contended();
        }
        w.alone && self.lsns.quiet() && others_serve()
    }

    fn call(&self, set: impl FnOnce(&mut Call)) {
        set(&mut self.call.lock());
        self.wake.notify_one();
    }

    /// Writes what is queued if no one else is writing (the holder looks
    /// at the queue again after letting go of the segment), until
    /// everything up to `lsn` is written: what is queued after that is
    /// left to the flusher thread, so no caller writes for others for long.
    /// A caller that will wait for the fsync and waits alone (`fsync`)
    /// issues it itself when it wrote and no other is under way.
    fn write_queued(&self, lsn: u64, fsync: bool) {
        loop {
            if self.queue.lock().is_empty() {
                return;
            }
            let Some(mut f) = self.flusher.try_lock() else { return };
            let for_thread = f.drain(&self.queue, Drainer::Caller { fsync });
            let fsync_here = f.fsync_here.take();
            drop(f);
            if let Some(t) = fsync_here {
                // Records others queued meanwhile are written now, not
                // after this fsync: writing never waits for one.
                if !self.queue.lock().is_empty() {
                    self.call(|c| c.now = true);
                }
                sync_data(&t, &self.syncs, &self.lsns);
                // After `syncs`: read the other way round, never more than it.
                self.lsns.by_writers.fetch_add(1, Ordering::Relaxed);
            }
            if for_thread {
                return self.call(|c| c.now = true);
            }
            if *self.written.borrow() >= lsn {
                if !self.queue.lock().is_empty() {
                    self.call(|c| c.now = true);
                }
                return;
            }
        }
    }
}

impl LogWriter {
    /// Queues encoded records ending at `last_lsn`. Call in lsn order.
    /// They are written by the next wait on this log, or within [`TICK`].
    pub fn append(&self, bytes: Vec<u8>, last_lsn: u64) {
        self.shared.queue.lock().push(Item::Records { bytes, last_lsn, awaited: true });
    }

    /// As [`append`](Self::append), for records whose caller waits only for
    /// them to be written ([`wait_written`](Self::wait_written)): under
    /// [`LogSync::Always`] they are fsynced within [`LAZY`], not at once.
    pub fn append_answered_written(&self, bytes: Vec<u8>, last_lsn: u64) {
        self.shared.queue.lock().push(Item::Records { bytes, last_lsn, awaited: false });
    }

    /// Queues a snapshot of `state`, the state after `lsn` (a copy is
    /// taken; call in lsn order, as `append`); later records go to a new
    /// segment. Returns false, and takes none, while the last one asked
    /// for is still being written.
    pub fn snapshot(&self, lsn: u64, state: &MetaState) -> bool {
        if self.shared.snapshotting.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.shared.queue.lock().push(Item::Snapshot { lsn, state: Box::new(state.clone()) });
        self.shared.call(|c| c.now = true);
        true
    }

    /// How many times the log was fsynced since it was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// How many of those fsyncs writers waiting alone issued themselves.
    pub fn writer_syncs(&self) -> u64 {
        self.shared.lsns.by_writers.load(Ordering::Relaxed)
    }

    /// When this log is fsynced.
    pub fn sync_mode(&self) -> LogSync {
        self.sync
    }

    /// The last lsn fsynced.
    pub fn synced(&self) -> u64 {
        *self.synced.borrow()
    }

    /// Waits until every record up to `lsn` may be acknowledged (see [`LogSync`]).
    pub async fn wait_durable(&self, lsn: u64) -> Result<()> {
        if self.sync == LogSync::Always {
            // Durable is synced.
            return self.wait_synced(lsn).await;
        }
        self.shared.write_queued(lsn, false);
        wait_for(&self.durable, lsn).await
    }

    /// Waits until every record up to `lsn` is written (to the kernel: it
    /// survives the process, not yet the machine): what a file system's
    /// changes wait for, until its `fsync` ([`sync_now`](Self::sync_now)).
    pub async fn wait_written(&self, lsn: u64) -> Result<()> {
        self.shared.write_queued(lsn, false);
        wait_for(&self.written, lsn).await
    }

    /// Waits until every record up to `lsn` is fsynced: what deletes data
    /// on the strength of a change waits for this.
    pub async fn wait_synced(&self, lsn: u64) -> Result<()> {
        let alone = Waiting::of(&self.waiting);
        self.shared.write_queued(lsn, self.sync == LogSync::Always && self.shared.lone_writer(&alone));
        if self.sync == LogSync::Always && self.synced() < lsn {
            // Written among records no one waited to see fsynced: asked
            // for now rather than within `LAZY`.
            wait_for(&self.written, lsn).await?;
            let l = &self.shared.lsns;
            let unasked = l.lazy.load(Ordering::Acquire) >= lsn && l.eager.load(Ordering::Acquire) < lsn;
            if unasked && self.synced() < lsn {
                self.ask_sync();
                self.shared.write_queued(lsn, false);
            }
        }
        wait_for(&self.synced, lsn).await
    }

    /// As [`wait_synced`](Self::wait_synced), for work that may wait (an
    /// op's effects): never asks for the fsync sooner than the log would do
    /// it (records answered once written: within [`LAZY`]), and does not
    /// count as a caller waiting for one.
    pub async fn wait_synced_later(&self, lsn: u64) -> Result<()> {
        self.shared.write_queued(lsn, false);
        wait_for(&self.synced, lsn).await
    }

    /// [`wait_synced`](Self::wait_synced), asking for the fsync now rather
    /// than at the end of the period (for the rare changes a caller waits on).
    pub async fn sync_now(&self, lsn: u64) -> Result<()> {
        if self.synced() < lsn {
            self.ask_sync();
        }
        self.wait_synced(lsn).await
    }

    /// Queues a request for an fsync at once, for the syncer or the next
    /// writer to carry out.
    fn ask_sync(&self) {
        self.shared.queue.lock().push(Item::Sync);
    }
}

/// One caller counted in [`LogWriter::waiting`] while it lives.
struct Waiting<'a> {
    count: &'a AtomicUsize,
    /// No other caller was waiting for an fsync when this one came: a
    /// lone writer may issue it itself (`write_queued`). With several, the
    /// syncer's fsync is theirs, and the runtime's threads go on serving
    /// requests rather than one of them sitting in an fsync.
    alone: bool,
}

impl<'a> Waiting<'a> {
    fn of(count: &'a AtomicUsize) -> Waiting<'a> {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        Waiting { count, alone }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether the runtime this runs on has more than one thread, so that
/// others go on serving requests while this one waits in a call.
fn others_serve() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|h| h.metrics().num_workers() > 1)
}

async fn wait_for(lsn_now: &watch::Receiver<u64>, lsn: u64) -> Result<()> {
    let mut rx = lsn_now.clone();
    rx.wait_for(|d| *d >= lsn).await.map(|_| ()).map_err(|_| Error::new(ErrorKind::Unavailable, "metadata log stopped"))
}

fn segment_name(first_lsn: u64) -> String {
    format!("log-{first_lsn:020}")
}

fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(n) = name.strip_prefix("log-").and_then(|s| s.parse::<u64>().ok()) {
            out.push((n, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Lowers the calling thread to the lowest CPU priority (nice 19): a
/// snapshot's encoding and writing take a core for about half a second per
/// 80 MB of state, which the request threads need more on a small machine.
/// The snapshot waits for nothing but itself: records go on being written,
/// and only the segments it covers stay on disk a little longer. (On Linux
/// the nice value is the thread's own.)
fn background_priority() {
    // SAFETY: plain system calls on the calling thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    if r != 0 {
        tracing::debug!("metadata snapshot: priority not lowered: {}", std::io::Error::last_os_error());
    }
}

fn fatal(what: &str, e: std::io::Error) -> ! {
    tracing::error!("metadata log: {what}: {e}; stopping to keep acknowledged changes safe");
    eprintln!("tierpool coordinator: metadata log: {what}: {e}");
    std::process::exit(70);
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Recovers the state from `dir` and starts the flusher, which fsyncs
/// before every acknowledgement. Returns the state, the last lsn, and the writer.
pub fn open(dir: &Path) -> Result<(MetaState, u64, LogWriter)> {
    open_with(dir, LogSync::Always)
}

/// [`open`], fsyncing as `sync` says.
pub fn open_with(dir: &Path, sync: LogSync) -> Result<(MetaState, u64, LogWriter)> {
    open_lazy(dir, sync, LAZY)
}

/// [`open_with`], fsyncing records no one waits to see fsynced within `lazy`.
fn open_lazy(dir: &Path, sync: LogSync, lazy: Duration) -> Result<(MetaState, u64, LogWriter)> {
    std::fs::create_dir_all(dir).map_err(|e| Error::from(e).context(dir.display()))?;
    let (mut state, mut lsn) = match std::fs::read(dir.join("snapshot")) {
        Ok(b) => {
            let (lsn, state) = decode_snapshot(&b)?;
            (state, lsn)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (MetaState::new(), 0),
        Err(e) => return Err(Error::from(e).context("reading metadata snapshot")),
    };
    let segs = segments(dir)?;
    let mut replayed = 0u64;
    for (i, (_, path)) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        replayed += replay_segment(path, last, &mut state, &mut lsn)?;
    }
    if replayed > 0 || segs.len() > 1 {
        // Compact: everything recovered goes into a fresh snapshot.
        write_snapshot(dir, lsn, &encode_snapshot(lsn, &state))
            .map_err(|e| Error::from(e).context("writing metadata snapshot"))?;
        for (_, p) in &segs {
            let _ = std::fs::remove_file(p);
        }
    }
    let segment = Segment::open(dir, lsn + 1).map_err(|e| Error::from(e).context("opening metadata log"))?;
    let (written, written_rx) = watch::channel(lsn);
    let (durable, durable_rx) = watch::channel(lsn);
    let (synced, synced_rx) = watch::channel(lsn);
    let lsns = Arc::new(Lsns {
        written,
        durable,
        synced,
        fsyncing: AtomicUsize::new(0),
        contended_at: AtomicU64::new(0),
        opened: Instant::now(),
        by_writers: AtomicU64::new(0),
        lazy: AtomicU64::new(0),
        eager: AtomicU64::new(0),
    });
    let syncs = Arc::new(AtomicU64::new(0));
    let (tx, syncer_rx) = mpsc::channel();
    let to_syncer = ToSyncer { tx, parked: Arc::new(Mutex::new(Parked::default())) };
    let (l, n, p) = (lsns.clone(), syncs.clone(), to_syncer.parked.clone());
    std::thread::Builder::new()
        .name("meta-log-sync".into())
        .spawn(move || syncer(syncer_rx, p, sync, lazy, l, n))
        .map_err(|e| Error::from(e).context("starting log syncer"))?;
    let flusher = Flusher {
        dir: dir.to_path_buf(),
        segment,
        syncs: syncs.clone(),
        sync,
        lsns: lsns.clone(),
        syncer: to_syncer,
        fsync_here: None,
        unsynced: None,
        buf: Vec::new(),
        snapshot: None,
    };
    let shared = Arc::new(Shared {
        queue: Mutex::new(Vec::new()),
        flusher: Mutex::new(flusher),
        call: Mutex::new(Call::default()),
        wake: Condvar::new(),
        written: written_rx.clone(),
        snapshotting: Arc::new(AtomicBool::new(false)),
        snapshot_thread: Mutex::new(None),
        lsns,
        syncs: syncs.clone(),
    });
    let s = shared.clone();
    let flusher = std::thread::Builder::new()
        .name("meta-log".into())
        .spawn(move || flusher_thread(&s))
        .map_err(|e| Error::from(e).context("starting log flusher"))?;
    let writer = LogWriter {
        shared,
        written: written_rx,
        durable: durable_rx,
        synced: synced_rx,
        syncs,
        sync,
        flusher_thread: Some(flusher),
        waiting: AtomicUsize::new(0),
    };
    Ok((state, lsn, writer))
}

/// The segment being written: its records end at `end`; its file is
/// written up to `reserved` (zeros beyond `end`).
struct Segment {
    file: Arc<File>,
    end: u64,
    reserved: u64,
    /// Cleared when zeros cannot be written ahead (the disk is full):
    /// records are then appended, growing the file with each write.
    reserving: bool,
    /// Zeros are being written ahead, a piece at a time, up to a whole
    /// [`RESERVE`] ahead of the records.
    filling: bool,
}

impl Segment {
    /// Opens segment `first_lsn` for writing after the records it holds
    /// (none, unless the last run ended before writing past a snapshot).
    fn open(dir: &Path, first_lsn: u64) -> std::io::Result<Segment> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(dir.join(segment_name(first_lsn)))?;
        sync_dir(dir)?;
        let mut held = Vec::new();
        (&file).read_to_end(&mut held)?;
        let mut end = 0;
        while let Decoded::Record(_, used) = decode_record(&held[end..]) {
            end += used;
        }
        let mut s = Segment {
            file: Arc::new(file),
            end: end as u64,
            reserved: held.len() as u64,
            reserving: true,
            filling: false,
        };
        while s.reserve_ahead() {}
        Ok(s)
    }

    /// Writes `buf` after the records (into zeros written ahead, or
    /// growing the file past them).
    fn append(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(buf, self.end)?;
        self.end += buf.len() as u64;
        Ok(())
    }

    /// Whether fewer than half a [`RESERVE`] of zeros are left ahead, or
    /// zeros are being written up to a whole one.
    fn wants_reserve(&self) -> bool {
        self.reserving && (self.filling || self.end + RESERVE / 2 > self.reserved)
    }

    /// Writes up to [`RESERVE_PIECE`] of zeros ahead of the records if it
    /// [`wants_reserve`](Self::wants_reserve), up to a [`RESERVE`] ahead;
    /// returns whether it wants more. The flusher thread does, a piece at
    /// a time, letting go of the segment between pieces, so that a request
    /// waits for one piece at most.
    fn reserve_ahead(&mut self) -> bool {
        if !self.wants_reserve() {
            return false;
        }
        let from = self.reserved.max(self.end);
        let to = (self.end + RESERVE).min(from + RESERVE_PIECE);
        if let Err(e) = self.reserve(from, to) {
            tracing::warn!("metadata log: cannot write space ahead ({e}); appending instead");
            self.reserving = false;
        }
        self.filling = self.reserving && self.reserved < self.end + RESERVE;
        self.filling
    }

    /// Writes zeros from `from` to `to` and starts their writeback, so
    /// that they are mostly on disk before records overwrite them.
    fn reserve(&mut self, from: u64, to: u64) -> std::io::Result<()> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZEROS.len() as u64) as usize;
            self.file.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        self.reserved = to;
        // SAFETY: a plain system call on a descriptor this segment owns.
        let r = unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), from as i64, (to - from) as i64, libc::SYNC_FILE_RANGE_WRITE)
        };
        if r != 0 {
            tracing::debug!("metadata log: writeback of space ahead not started: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }
}

fn replay_segment(path: &Path, last: bool, state: &mut MetaState, lsn: &mut u64) -> Result<u64> {
    let buf = std::fs::read(path).map_err(|e| Error::from(e).context(path.display()))?;
    let mut off = 0usize;
    let mut n = 0;
    loop {
        match decode_record(&buf[off..]) {
            Decoded::End => return Ok(n),
            Decoded::Record(rec, used) => {
                off += used;
                if rec.lsn <= *lsn {
                    continue;
                }
                if rec.lsn != *lsn + 1 {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("{}: log jumps from lsn {} to {}", path.display(), lsn, rec.lsn),
                    ));
                }
                state.execute_as(&rec.op, rec.owner, rec.time).map_err(|e| {
                    Error::new(
                        ErrorKind::Corrupt,
                        format!("{}: replay of lsn {} failed: {}", path.display(), rec.lsn, e),
                    )
                })?;
                *lsn = rec.lsn;
                n += 1;
            }
            // Space allocated ahead that no record reached.
            Decoded::Torn(_) if buf[off..].iter().all(|&b| b == 0) => return Ok(n),
            Decoded::Unusable(e) => {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("{}: record at byte {off}: {}", path.display(), e.message),
                ))
            }
            Decoded::Torn(why) if last => {
                tracing::warn!("{}: cutting torn tail at byte {off}: {why}", path.display());
                let f = OpenOptions::new().write(true).open(path)?;
                f.set_len(off as u64)?;
                f.sync_all()?;
                return Ok(n);
            }
            Decoded::Torn(why) => {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("{}: corrupt record at byte {off} in a sealed segment: {why}", path.display()),
                ))
            }
        }
    }
}

fn write_snapshot(dir: &Path, _lsn: u64, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join("snapshot.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join("snapshot"))?;
    sync_dir(dir)
}

struct Flusher {
    dir: PathBuf,
    segment: Segment,
    syncs: Arc<AtomicU64>,
    sync: LogSync,
    lsns: Arc<Lsns>,
    /// To the syncer: records up to an lsn are written in a file.
    syncer: ToSyncer,
    /// An fsync the caller writing now claimed, for it to issue once it
    /// lets go of the segment.
    fsync_here: Option<ToSync>,
    /// The last lsn written since the flusher last fsynced itself (the
    /// syncer may have fsynced it since: see `fsync`).
    unsynced: Option<u64>,
    /// Records gathered for one write.
    buf: Vec<u8>,
    /// A snapshot whose segment was started, for the flusher thread to
    /// hand to a snapshot thread.
    snapshot: Option<(u64, Box<MetaState>)>,
}

/// The lsns the threads publish (see the module's documentation).
struct Lsns {
    written: watch::Sender<u64>,
    durable: watch::Sender<u64>,
    synced: watch::Sender<u64>,
    /// fsyncs under way (the syncer's, callers'): a caller fsyncs itself
    /// only when there is none.
    fsyncing: AtomicUsize,
    /// When (µs after `opened`) a writer last met another waiting for an
    /// fsync, or one under way: for [`QUIET`] after that, writers leave
    /// the fsync to the syncer.
    contended_at: AtomicU64,
    opened: Instant,
    /// fsyncs issued by writers themselves.
    by_writers: AtomicU64,
    /// The last lsn written among records no one waited to see fsynced,
    /// and the last one an fsync at once was asked for (each set before
    /// it is published as written).
    lazy: AtomicU64,
    eager: AtomicU64,
}

/// How long after writers last met each other one fsyncs itself again
/// (see `Lsns::contended_at`). Under load they meet all the time, and a
/// runtime thread sitting in an fsync is one less serving requests.
const QUIET: Duration = Duration::from_millis(10);

impl Lsns {
    fn contended(&self) {
        self.contended_at.store(self.opened.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// No writers met within [`QUIET`].
    fn quiet(&self) -> bool {
        let now = self.opened.elapsed().as_micros() as u64;
        now >= self.contended_at.load(Ordering::Relaxed) + QUIET.as_micros() as u64
    }

    /// Publishes `lsn` as fsynced (and so durable), never moving back
    /// (durable first: synced never passes it).
    fn synced(&self, lsn: u64) {
        for w in [&self.durable, &self.synced] {
            w.send_if_modified(|at| std::mem::replace(at, (*at).max(lsn)) < lsn);
        }
    }
}

/// fdatasyncs what `t` names, on this thread, and publishes it; the
/// fsync was counted in `Lsns::fsyncing`, and is no longer once a writer
/// woken by the publish may look.
fn sync_data(t: &ToSync, syncs: &AtomicU64, lsns: &Lsns) {
    t.file.sync_data().unwrap_or_else(|e| fatal("fdatasync", e));
    lsns.fsyncing.fetch_sub(1, Ordering::AcqRel);
    syncs.fetch_add(1, Ordering::Relaxed);
    lsns.synced(t.lsn);
}

/// Records up to `lsn` are written in `file`; with `now`, fsync them
/// whatever the period; `lazy` if no caller waits for their fsync (under
/// [`LogSync::Always`]: fsynced within [`LAZY`]).
struct ToSync {
    lsn: u64,
    file: Arc<File>,
    now: bool,
    lazy: bool,
}

impl ToSync {
    /// Whether its fsync may wait (for [`LAZY`], or a period), so the
    /// syncer already waiting for one that may needs no waking for it.
    fn may_wait(&self, sync: LogSync) -> bool {
        match sync {
            _ if self.now => false,
            LogSync::Always => self.lazy,
            LogSync::Every(period) => period > Duration::ZERO,
        }
    }

    /// One request for both: up to the higher lsn, in its file (only the
    /// newest file matters: a segment left for a new one was fsynced
    /// first). Either may be the older: a parked request is joined last
    /// though a later one came through the channel.
    fn join(self, other: ToSync) -> ToSync {
        let (now, lazy) = (self.now || other.now, self.lazy && other.lazy);
        let newest = if other.lsn >= self.lsn { other } else { self };
        ToSync { now, lazy, ..newest }
    }
}

/// The way to the syncer. A send wakes it, so a burst of records that may
/// wait for their fsync (a file system's changes: fsynced within
/// [`LAZY`]) would wake it once per write just to be noted: while it
/// waits for one that may wait, such records are parked for it to take
/// when it fsyncs instead.
struct ToSyncer {
    tx: mpsc::Sender<ToSync>,
    parked: Arc<Mutex<Parked>>,
}

/// What writers left the syncer without waking it.
#[derive(Default)]
struct Parked {
    /// The syncer waits for an fsync that may wait (set and cleared by it).
    armed: bool,
    latest: Option<ToSync>,
}

impl ToSyncer {
    fn send(&self, t: ToSync, sync: LogSync) {
        if t.may_wait(sync) {
            let mut p = self.parked.lock();
            if p.armed {
                p.latest = Some(match p.latest.take() {
                    Some(before) => before.join(t),
                    None => t,
                });
                return;
            }
        }
        let _ = self.tx.send(t);
    }
}

/// The flusher thread: writes what is queued when called (a snapshot
/// waits for it) or every [`TICK`]; when the writer is gone, writes what
/// is left, fsyncs it and ends.
fn flusher_thread(shared: &Shared) {
    loop {
        let stop = {
            let mut c = shared.call.lock();
            if !c.now && !c.stop {
                shared.wake.wait_for(&mut c, TICK);
            }
            c.now = false;
            c.stop
        };
        let mut f = shared.flusher.lock();
        f.drain(&shared.queue, Drainer::Thread);
        if let Some((lsn, state)) = f.snapshot.take() {
            let (dir, busy) = (f.dir.clone(), shared.snapshotting.clone());
            let t = std::thread::Builder::new()
                .name("meta-snapshot".into())
                .spawn(move || {
                    background_priority();
                    // A snapshot that cannot be made leaves segments to pile
                    // up unseen: the process stops instead, as on a failed write.
                    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let started = Instant::now();
                        let bytes = encode_snapshot(lsn, &state);
                        drop(state);
                        write_snapshot(&dir, lsn, &bytes).unwrap_or_else(|e| fatal("writing snapshot", e));
                        drop_covered_segments(&dir, lsn);
                        tracing::debug!(
                            "metadata snapshot at lsn {lsn}: {} bytes in {:?}",
                            bytes.len(),
                            started.elapsed()
                        );
                    }));
                    if let Err(panic) = made {
                        fatal("making a snapshot", std::io::Error::other(tierpool_types::panic_message(&*panic)));
                    }
                    busy.store(false, Ordering::Release);
                })
                .unwrap_or_else(|e| fatal("starting the snapshot thread", e));
            if let Some(before) = shared.snapshot_thread.lock().replace(t) {
                let _ = before.join(); // finished: `snapshotting` was clear
            }
        }
        if stop {
            // The process is exiting: what was written goes to disk.
            f.fsync();
            return;
        }
        while f.segment.reserve_ahead() {
            // Requests may write between the pieces.
            drop(f);
            f = shared.flusher.lock();
        }
        drop(f);
        // Callers that found the segment held left their records to it.
        shared.write_queued(u64::MAX, false);
    }
}

/// Who drains the queue: the flusher thread, or a caller (one that will
/// wait for the fsync, or not).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drainer {
    Thread,
    Caller { fsync: bool },
}

impl Flusher {
    /// Writes what is queued: the flusher thread until nothing is, a
    /// caller what is queued now, short of a snapshot (left with
    /// what follows it to the flusher thread). Returns whether the
    /// flusher thread has work left: a snapshot, or zeros to write ahead.
    fn drain(&mut self, queue: &Mutex<Vec<Item>>, by: Drainer) -> bool {
        let thread = by == Drainer::Thread;
        loop {
            let items = {
                let mut q = queue.lock();
                let upto = match thread {
                    true => q.len(),
                    false => q.iter().position(|i| matches!(i, Item::Snapshot { .. })).unwrap_or(q.len()),
                };
                if upto == 0 {
                    return !q.is_empty() || self.segment.wants_reserve();
                }
                q.drain(..upto).collect::<Vec<_>>()
            };
            // A caller that will wait for the fsync waits for these records'.
            let (mut top, mut asked, mut awaited) = (None, false, by == Drainer::Caller { fsync: true });
            for item in items {
                match item {
                    Item::Records { bytes, last_lsn, awaited: a } => {
                        self.buf.extend_from_slice(&bytes);
                        top = Some(last_lsn);
                        awaited |= a;
                    }
                    Item::Snapshot { lsn, state } => {
                        self.write(top.take());
                        self.fsync();
                        self.rotate(lsn);
                        self.snapshot = Some((lsn, state));
                    }
                    Item::Sync => asked = true,
                }
            }
            let lazy = self.sync == LogSync::Always && !asked && !awaited;
            // Before it is published as written: see `wait_synced`.
            let (marks, upto) = match lazy {
                true => (&self.lsns.lazy, top),
                false => (&self.lsns.eager, top.or(self.unsynced)),
            };
            if let Some(lsn) = upto {
                marks.fetch_max(lsn, Ordering::AcqRel);
            }
            self.write(top);
            if let Some(lsn) = self.unsynced.filter(|_| asked || top.is_some()) {
                let t = ToSync { lsn, file: self.segment.file.clone(), now: asked, lazy };
                let alone = || {
                    let free = self.lsns.fsyncing.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_ok();
                    if !free {
                        self.lsns.contended();
                    }
                    free
                };
                if by == (Drainer::Caller { fsync: true }) && !asked && alone() {
                    // A lone writer, and no fsync under way: it issues the
                    // fsync itself (`write_queued`).
                    self.fsync_here = Some(t);
                } else {
                    // The syncer fsyncs while writers go on.
                    self.syncer.send(t, self.sync);
                }
            }
            if thread {
                self.segment.reserve_ahead();
            } else {
                let q = queue.lock();
                return q.first().is_some_and(|i| matches!(i, Item::Snapshot { .. })) || self.segment.wants_reserve();
            }
        }
    }

    /// Appends the records gathered, up to `top`: they survive the
    /// process now, and under [`LogSync::Every`] may be acknowledged.
    fn write(&mut self, top: Option<u64>) {
        let Some(top) = top.filter(|_| !self.buf.is_empty()) else { return };
        self.segment.append(&self.buf).unwrap_or_else(|e| fatal("append", e));
        self.buf.clear();
        self.unsynced = Some(top);
        self.lsns.written.send_replace(top);
        if matches!(self.sync, LogSync::Every(_)) {
            self.lsns.durable.send_replace(top);
        }
    }

    /// fdatasyncs what was written, here and now, and publishes it.
    fn fsync(&mut self) {
        let Some(top) = self.unsynced.take() else { return };
        if *self.lsns.synced.borrow() >= top {
            return; // the syncer did
        }
        self.segment.file.sync_data().unwrap_or_else(|e| fatal("fdatasync", e));
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.lsns.synced(top);
    }

    /// Starts segment `lsn + 1` (the one before it is fsynced).
    fn rotate(&mut self, lsn: u64) {
        self.segment = Segment::open(&self.dir, lsn + 1).unwrap_or_else(|e| fatal("opening segment", e));
    }
}

/// Drops the segments a snapshot at `lsn`, written, holds: those before
/// segment `lsn + 1`.
fn drop_covered_segments(dir: &Path, lsn: u64) {
    for (first, p) in segments(dir).unwrap_or_default() {
        if first <= lsn {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The syncer thread: fdatasyncs what the flusher wrote (one fsync for
/// everything written meanwhile), at once under [`LogSync::Always`] (within
/// `lazy` of the first record waiting if no caller waits for any), at most
/// a period after the first record waiting under [`LogSync::Every`], and
/// publishes it as synced and durable. A segment left for a new one was
/// fsynced by the flusher first, so only the newest file named matters.
fn syncer(
    rx: mpsc::Receiver<ToSync>,
    parked: Arc<Mutex<Parked>>,
    sync: LogSync,
    lazy: Duration,
    lsns: Arc<Lsns>,
    syncs: Arc<AtomicU64>,
) {
    let mut waiting: Option<(ToSync, Instant)> = None;
    // How long what is waiting may wait, from its first record.
    let within = |w: &ToSync| match sync {
        _ if !w.may_wait(sync) => Duration::ZERO,
        LogSync::Always => lazy,
        LogSync::Every(period) => period,
    };
    loop {
        let next = match &waiting {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some((w, since)) if within(w) > Duration::ZERO => {
                rx.recv_timeout(within(w).saturating_sub(since.elapsed()))
            }
            // Due now: only what else is queued joins it.
            Some(_) => Err(mpsc::RecvTimeoutError::Timeout),
        };
        let stop = matches!(next, Err(mpsc::RecvTimeoutError::Disconnected));
        for t in next.ok().into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            waiting = Some(match waiting.take() {
                Some((w, since)) => (w.join(t), since),
                None => (t, Instant::now()),
            });
        }
        let due = waiting.as_ref().is_some_and(|(w, since)| stop || since.elapsed() >= within(w));
        // Writers park what may wait while this waits for what may too.
        parked.lock().armed = !due && waiting.as_ref().is_some_and(|(w, _)| w.may_wait(sync));
        if due {
            let (mut w, _) = waiting.take().expect("due only when waiting");
            if let Some(later) = parked.lock().latest.take() {
                w = w.join(later);
            }
            // Not if a writer's fsync took it meanwhile (one waiting for `lazy`).
            if *lsns.synced.borrow() < w.lsn {
                lsns.fsyncing.fetch_add(1, Ordering::AcqRel);
                sync_data(&w, &syncs, &lsns);
            }
        }
        if stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{encode_record, LogRecord};
    use tierpool_meta::{MetaOp, Owner};

    #[test]
    fn background_priority_lowers_the_calling_thread_alone() {
        let nice = || {
            // SAFETY: plain system calls on the calling thread.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            background_priority();
            nice()
        });
        assert_eq!(lowered.join().unwrap(), 19);
        assert_eq!(nice(), before, "only the calling thread is lowered");
    }

    fn record(lsn: u64) -> Vec<u8> {
        let op = match lsn {
            1 => MetaOp::Init { partitions: 16 },
            _ => MetaOp::AllocInodes { count: 1 },
        };
        let mut bytes = Vec::new();
        encode_record(&LogRecord { lsn, time: 1, owner: Owner::default(), op }, &mut bytes);
        bytes
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// Writes records `lsns` one at a time, each waited for until
    /// durable, with no writers met between them.
    async fn lone_writes(log: &LogWriter, lsns: std::ops::RangeInclusive<u64>) {
        for lsn in lsns {
            log.append(record(lsn), lsn);
            log.wait_durable(lsn).await.unwrap();
            // Writers met: not within `QUIET` before the next one.
            tokio::time::sleep(QUIET + Duration::from_millis(5)).await;
        }
    }

    /// A log opened in `tmp` where no writers were met for `QUIET`, with
    /// its fsyncs and its writers' fsyncs so far.
    fn quiet_log(tmp: &Path) -> (LogWriter, u64, u64) {
        let (_, _, log) = open(tmp).unwrap();
        std::thread::sleep(QUIET + Duration::from_millis(5));
        let (syncs, by_writers) = (log.syncs(), log.writer_syncs());
        (log, syncs, by_writers)
    }

    #[test]
    fn a_lone_writer_fsyncs_its_own_records_before_it_is_answered() {
        let tmp = tempfile::tempdir().unwrap();
        let (log, syncs, by_writers) = quiet_log(tmp.path());
        runtime().block_on(lone_writes(&log, 1..=20));
        assert_eq!(log.syncs() - syncs, 20, "one fsync each");
        let own = log.writer_syncs() - by_writers;
        // The flusher thread may take a record before its writer does (it
        // writes every `TICK` what no one waits for): rarely.
        assert!(own >= 15, "the writer issued {own} of 20 fsyncs itself");
    }

    #[test]
    fn a_lone_writer_on_a_runtime_of_one_thread_leaves_the_fsync_to_the_syncer() {
        let tmp = tempfile::tempdir().unwrap();
        let (log, syncs, by_writers) = quiet_log(tmp.path());
        for one in [
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap(),
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
        ] {
            let base = log.synced();
            one.block_on(lone_writes(&log, base + 1..=base + 5));
        }
        assert_eq!((log.syncs() - syncs, log.writer_syncs() - by_writers), (10, 0), "each by the syncer");
    }

    #[test]
    fn changes_answered_once_written_are_fsynced_later_unless_a_caller_waits_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (_, _, log) = open_lazy(tmp.path(), LogSync::Always, Duration::from_secs(600)).unwrap();
        let syncs = log.syncs();
        runtime().block_on(async {
            for lsn in 1..=20 {
                log.append_answered_written(record(lsn), lsn);
                log.wait_written(lsn).await.unwrap();
            }
            assert_eq!((log.syncs() - syncs, log.synced()), (0, 0), "left for `lazy`");
            // A caller that comes to wait for the fsync of one asks for it now.
            // Work that may wait does not ask.
            let later = log.wait_synced_later(12);
            assert!(tokio::time::timeout(Duration::from_millis(200), later).await.is_err());
            let asked = tokio::time::timeout(Duration::from_secs(30), log.wait_synced(12)).await;
            asked.expect("fsynced at once, not within `lazy`").unwrap();
            log.wait_synced_later(20).await.unwrap();
        });
        assert_eq!((log.syncs() - syncs, log.synced()), (1, 20), "one fsync for all");
        drop(log);
        assert_eq!(open(tmp.path()).unwrap().1, 20);

        // With the default `LAZY`, no one asks: they are fsynced all the same.
        let tmp = tempfile::tempdir().unwrap();
        let (_, _, log) = open(tmp.path()).unwrap();
        runtime().block_on(async {
            for lsn in 1..=5 {
                log.append_answered_written(record(lsn), lsn);
                log.wait_written(lsn).await.unwrap();
            }
            let later = tokio::time::timeout(Duration::from_secs(30), wait_for(&log.synced, 5)).await;
            later.expect("fsynced within `LAZY`").unwrap();
        });
    }

    #[test]
    fn records_that_may_wait_are_parked_for_the_waiting_syncer_and_fsynced_with_it() {
        for sync in [LogSync::Always, LogSync::Every(Duration::from_secs(2))] {
            let tmp = tempfile::tempdir().unwrap();
            let (_, _, log) = open_lazy(tmp.path(), sync, Duration::from_secs(2)).unwrap();
            let parked = log.shared.flusher.lock().syncer.parked.clone();
            let armed = |lsn: u64| {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !parked.lock().armed && log.synced() < lsn {
                    assert!(Instant::now() < deadline, "the syncer waits for record {lsn}");
                    std::thread::sleep(Duration::from_millis(1));
                }
            };
            let syncs = log.syncs();
            runtime().block_on(async {
                log.append_answered_written(record(1), 1);
                log.wait_written(1).await.unwrap();
                armed(1);
                for lsn in 2..=5 {
                    log.append_answered_written(record(lsn), lsn);
                    log.wait_written(lsn).await.unwrap();
                }
                {
                    let p = parked.lock();
                    if p.armed {
                        // Not sent: the syncer was not woken for them.
                        assert_eq!(p.latest.as_ref().map(|t| t.lsn), Some(5));
                    }
                }
                let all = tokio::time::timeout(Duration::from_secs(30), wait_for(&log.synced, 5)).await;
                all.expect("the parked records fsynced with the first").unwrap();
            });
            assert_eq!(log.syncs() - syncs, 1, "one fsync for all five");
            assert!(parked.lock().latest.is_none());
            // A record parked before one sent after it (a caller asks for
            // its fsync now): the fsync covers the later one too.
            runtime().block_on(async {
                log.append_answered_written(record(6), 6);
                log.wait_written(6).await.unwrap();
                armed(6);
                log.append_answered_written(record(7), 7);
                log.wait_written(7).await.unwrap();
                log.append(record(8), 8);
                let now = tokio::time::timeout(Duration::from_secs(30), log.sync_now(8)).await;
                now.expect("record 8 fsynced at once, the parked 7 with it").unwrap();
            });
            assert_eq!(log.synced(), 8);
        }
    }

    #[test]
    fn writers_that_meet_share_fsyncs_and_every_change_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (_, _, log) = open(tmp.path()).unwrap();
        let log = Arc::new(log);
        let next = Arc::new(Mutex::new(0u64));
        let rt = runtime();
        rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..32 {
                let (log, next) = (log.clone(), next.clone());
                tasks.spawn(async move {
                    for _ in 0..25 {
                        // Appended in lsn order, as under the coordinator's lock.
                        let lsn = {
                            let mut n = next.lock();
                            *n += 1;
                            log.append(record(*n), *n);
                            *n
                        };
                        log.wait_durable(lsn).await.unwrap();
                    }
                });
            }
            while let Some(r) = tasks.join_next().await {
                r.unwrap();
            }
        });
        assert!(log.syncs() < 800, "800 changes from 32 writers took {} fsyncs", log.syncs());
        drop(rt);
        drop(Arc::into_inner(log).expect("the tasks are done"));
        let (_, lsn, _) = open(tmp.path()).unwrap();
        assert_eq!(lsn, 800, "every change is kept");
    }
}
