//! Operations, replies and the views of inodes handed to clients.
//!
//! These are the state machine's vocabulary and travel on the wire (whose
//! frames carry a protocol version); the coordinator's log stores its own
//! versioned record types converted from these, so changing a type here can
//! never change bytes on disk. An op is executed on behalf of an [`Owner`]
//! (see `MetaState::execute_as`): the inodes it creates belong to them.

use crate::{Attachment, Origin, Timestamp, WriteMode};
use serde::{Deserialize, Serialize};
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, ChunkRef, InodeId, Placement, Priority, Spread, WorkerId};

/// A change to the metadata. Paths are as the user typed them; the state
/// machine normalises them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOp {
    /// First op of a pool: fixes the partition count. Fails if already initialised.
    Init { partitions: u32 },
    /// Create a directory; with `parents`, create missing ancestors and succeed if it exists.
    Mkdir { path: String, parents: bool, mode: u32 },
    /// Reserve `count` (>= 1) fresh inode ids for a writer. Reply: [`MetaReply::Inodes`].
    AllocInodes { count: u64 },
    /// Publish a file whose chunks (version 1 of each index) are already on the workers.
    /// `inode` must have been reserved and never used. With `overwrite`, an existing
    /// file at `path` is atomically replaced and its inode queued for garbage collection.
    /// `homes`: empty (every chunk in its hashed partition) or one entry per
    /// chunk, the partition a placement policy put it in.
    /// Reply: [`MetaReply::Info`] of the new file.
    CommitFile {
        path: String,
        inode: InodeId,
        size: u64,
        chunk_size: u64,
        checksums: Vec<Checksum>,
        homes: Vec<Option<u32>>,
        attrs: ChunkAttrs,
        mode: u32,
        overwrite: bool,
    },
    /// Publish a small file written whole, its bytes held by the metadata
    /// (see `state/inline.rs`): as `CommitFile` of one chunk, which no
    /// worker stores. At most `INLINE_MAX` and `chunk_size` bytes.
    /// Reply: [`MetaReply::Info`] of the new file, with its bytes (the
    /// coordinator sends it without them: the writer has them).
    CommitInline {
        path: String,
        inode: InodeId,
        data: bytes::Bytes,
        chunk_size: u64,
        attrs: ChunkAttrs,
        mode: u32,
        overwrite: bool,
    },
    /// Remove a file, or a directory (empty, or any with `recursive`).
    /// Removed file inodes are queued for garbage collection. Reply: [`MetaReply::Removed`].
    Remove { path: String, recursive: bool },
    /// Atomic rename with POSIX rules (see `state.rs`). Reply:
    /// [`MetaReply::Renamed`].
    Rename { from: String, to: String },
    /// Change priority and/or pinning of a file, or of every file under a directory.
    /// Reply: [`MetaReply::Attrs`] listing each file inode and its new attributes.
    SetAttrs { path: String, priority: Option<Priority>, pinned: Option<bool> },
    /// A worker joins (id `None` or unknown) or comes back (known id: address and labels
    /// are updated, capacity is updated but the partition table is kept). A new worker
    /// takes the partitions no one owns at once; otherwise the goal becomes a table
    /// that gives it its share by capacity, reached by moves (see `state/workers.rs`).
    /// `at_once`: the newcomer takes its share at once, without a copy, as pools
    /// did before log version 3 (only the replay of such logs sets it: what the
    /// old owners hold becomes unreachable). Of a known worker, `at_once` says
    /// its process stopped cleanly and kept every chunk it held (it wrote its
    /// memory to disk): it keeps its partitions as a worker silent for a while
    /// does, instead of being taken down and up again to be refilled by its
    /// siblings, as a restarted process that lost its memory is.
    /// Reply: [`MetaReply::Worker`].
    RegisterWorker {
        id: Option<WorkerId>,
        addr: String,
        host: String,
        rack: String,
        mem_capacity: u64,
        disk_capacity: u64,
        at_once: bool,
    },
    /// The chunks of these inodes were deleted from every worker: forget them.
    GcDone { inodes: Vec<InodeId> },
    /// Publish a region of `size` bytes whose chunks (version 1 of each
    /// index, zero-filled or already written) exist on the workers: its space
    /// is taken. `inode` must have been reserved and never used; an existing
    /// entry at `path` is an error. Reply: [`MetaReply::Info`].
    CommitRegion { path: String, inode: InodeId, size: u64, chunk_size: u64, attrs: ChunkAttrs, mode: u32 },
    /// Change the permission bits (`chmod`; only the bits of `0o7777` are
    /// kept) and/or the modification time (`utimens`) of one inode; its
    /// `ctime` becomes `now`. Reply: [`MetaReply::Info`].
    SetMeta { path: String, mode: Option<u32>, mtime: Option<Timestamp> },
    /// Creates entry `name` in directory `parent`: an empty file, a
    /// directory, a symbolic link or a special file, with id taken from
    /// `next_inode`, owned by the op's owner. An existing entry is `AlreadyExists`. In a directory
    /// with the set-group-id bit, the new inode takes the directory's group
    /// (and a new directory the bit). Reply: [`MetaReply::Info`].
    MakeAt { parent: InodeId, name: String, node: NewNode, mode: u32 },
    /// As `MakeAt` of an empty file whose chunks will be `chunk_size`
    /// bytes, with the id `inode`, which must have been reserved
    /// (`AllocInodes`) and never used: a writer that answered a create
    /// itself makes the file with its first publish, in one `MetaMany`.
    /// Reply: [`MetaReply::Info`].
    MakeFileAt { parent: InodeId, name: String, inode: InodeId, chunk_size: u64, mode: u32 },
    /// Gives the non-directory `inode` another name (a hard link).
    /// Reply: [`MetaReply::Info`] of the inode.
    LinkAt { inode: InodeId, parent: InodeId, name: String },
    /// Removes entry `name` of `parent`: with `dir`, an empty directory
    /// (`rmdir`), otherwise a non-directory (`unlink`). An inode whose last
    /// name goes is forgotten and its chunks queued for garbage collection.
    /// Reply: [`MetaReply::Removed`].
    RemoveAt { parent: InodeId, name: String, dir: bool },
    /// Atomic rename with the rules of `Rename`; with `noreplace` an
    /// existing target is `AlreadyExists`. Reply: [`MetaReply::Renamed`].
    RenameAt { parent: InodeId, name: String, new_parent: InodeId, new_name: String, noreplace: bool },
    /// Changes the owner, permission bits and times of one inode; `ctime`
    /// becomes `now`. Reply: [`MetaReply::Info`].
    SetInode {
        inode: InodeId,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<Timestamp>,
        mtime: Option<Timestamp>,
    },
    /// Publishes new versions of some chunks of a file, whose objects are
    /// already on the workers, and its new size. Without `truncate` the
    /// file never shrinks (the size becomes the larger of the two), so
    /// writers of different chunks do not undo each other. With
    /// `truncate: Some(t)` (the smallest size the writer cut the file to,
    /// `t <= size`) the file is first cut to `t` (chunks past it dropped)
    /// and then takes `size` exactly, any new room being holes. A chunk's
    /// object must fit its share of the file, so a cut through a chunk must
    /// come with a shortened version of it. Replaced versions are queued for
    /// garbage collection; `mtime` and `ctime` become `now`.
    /// Reply: [`MetaReply::Info`].
    UpdateFile { inode: InodeId, size: u64, truncate: Option<u64>, chunks: Vec<(u64, ChunkRef)> },
    /// The whole contents of file `inode` become `data`, held by the
    /// metadata as its chunk 0 (see `state/inline.rs`), at version
    /// `ChunkRef::INLINE_BIT | version` (`version` fresh: caches key a
    /// chunk by its version). As `UpdateFile` cutting the file to
    /// `data.len()` with that chunk: every stored chunk it had is replaced.
    /// At most `INLINE_MAX` and `chunk_size` bytes; not of a region, nor of
    /// a file of an under-store. Reply: [`MetaReply::Info`], with the bytes.
    UpdateInline { inode: InodeId, version: u64, data: bytes::Bytes },
    /// These replaced chunk versions were deleted from every worker: forget them.
    GcChunksDone { keys: Vec<ChunkKey> },
    /// `SetAttrs` of the inode `inode` (and everything beneath it, for a directory).
    SetAttrsAt { inode: InodeId, priority: Option<Priority>, pinned: Option<bool> },
    /// These reserved ids (inodes or chunk versions) were found stored but
    /// unused with no writer left to use them: their chunks are deleted and
    /// they can never be published (a late `CommitFile`, `CommitRegion` or
    /// `UpdateFile` naming one fails with `Stale`). Each id must have been
    /// reserved and not be a live inode. Reply: [`MetaReply::Done`].
    Retire { ids: Vec<u64> },
    /// Starts copying partitions to other workers: `(partition, to)`, each
    /// owned by another worker and not moving already. Owners stay owners
    /// until `FinishMoves`. Reply: [`MetaReply::Done`].
    BeginMoves { moves: Vec<(u32, WorkerId)> },
    /// The copies of these moving partitions are complete: their new
    /// workers own them (the table's epoch grows). Reply: [`MetaReply::Done`].
    FinishMoves { partitions: Vec<u32> },
    /// These moves are given up (a worker died or refused): the owners stay.
    /// Reply: [`MetaReply::Done`].
    AbortMoves { partitions: Vec<u32> },
    /// Worker `id` is to be emptied: every partition it owns goes to the
    /// others, by weight, a few at a time; it receives none. Reply:
    /// [`MetaReply::Done`].
    DrainWorker { id: WorkerId },
    /// Forgets worker `id` at once: its partitions go to the others without
    /// a copy (what only it held is lost). Reply: [`MetaReply::WorkerRemoved`].
    RemoveWorker { id: WorkerId },
    /// Sets the goal to the table the workers' weights ask for, moving as
    /// few partitions as it takes. Reply: [`MetaReply::Done`].
    Rebalance,
    /// Worker `id` delivers `percent` (1..=100) of the bandwidth a healthy
    /// worker does, as the coordinator measured it: its weight is its
    /// capacity times that share, and the goal is set again (moving as few
    /// partitions as it takes). Reply: [`MetaReply::Done`].
    SetSpeed { id: WorkerId, percent: u8 },
    /// Sets how many copies of each chunk the pool keeps at most (its
    /// replication, the default of every path) and what its replicas are
    /// kept apart by: only before any worker joined (right after `Init`).
    SetReplication { replicas: u8, spread: Spread },
    /// Worker `id` has been silent for its grace period: the slots it owns
    /// whose partition has a replica on a live worker are let go, to be
    /// filled again from that replica (repair). Only in a replicated pool.
    WorkerDown { id: WorkerId },
    /// Worker `id`, down, is heard from again: it takes its share again
    /// (copied in by moves).
    WorkerUp { id: WorkerId },
    /// Sets the copies per chunk of the inode at `path` (1..=the pool's
    /// replication), with `recursive` of everything beneath a directory.
    /// New entries inherit their directory's. Reply: [`MetaReply::Replicas`].
    SetReplicas { path: String, replicas: u8, recursive: bool },
    /// Sets the placement policy of the inode at `path`, with `recursive`
    /// of everything beneath a directory. New entries inherit their
    /// directory's; chunks already written stay where they are. A
    /// `local-only` path keeps one copy of each chunk. Reply:
    /// [`MetaReply::Placed`].
    SetPlacement { path: String, placement: Placement, recursive: bool },
    /// Attaches an under-store at the directory `path`: empty, not the
    /// root, neither inside nor above another attachment. Its entries are
    /// then adopted one by one (`MakeAt` for directories, `AdoptFile`).
    /// Reply: [`MetaReply::Done`].
    Attach { path: String, attachment: Attachment },
    /// Detaches the directory at `path`: the attachment goes, with every
    /// entry beneath it (the under-store keeps its data; the pool's copies
    /// are collected). Reply: [`MetaReply::Removed`].
    Detach { path: String },
    /// Entry `name` of directory `parent` (beneath an attachment) mirrors
    /// the under-store object described by `size`, `mtime`, `etag`: a new
    /// file whose chunks are all below, or, for a clean file mirroring an
    /// older object there, the same file mirroring the new one (its pool
    /// copies dropped, its size and mtime the object's). A dirty file there
    /// is `Stale` (the pool's changes are not below yet); a file already
    /// mirroring this object is left alone. Reply: [`MetaReply::Info`].
    AdoptFile { parent: InodeId, name: String, size: u64, chunk_size: u64, mtime: u64, etag: String, mode: u32 },
    /// Directory `name` of directory `parent` (beneath an attachment)
    /// mirrors a directory of the under-store: made if missing (also
    /// beneath a read-only attachment). Reply: [`MetaReply::Info`].
    AdoptDir { parent: InodeId, name: String, mode: u32 },
    /// Entry `name` of directory `parent` (beneath an attachment) is gone
    /// from the under-store: a clean file or an empty directory goes (also
    /// beneath a read-only attachment); a file with changes not yet below
    /// is `Stale`. Reply: [`MetaReply::Removed`].
    Disown { parent: InodeId, name: String },
    /// File `inode` was written below as the object `(size, mtime, etag)`
    /// at `key` from exactly the chunks `chunks`: if it still has those
    /// chunks and that key, it is clean and mirrors that object; if it
    /// changed or was renamed meanwhile, `Stale` (persist it again). `key`
    /// is `None` only in records logged before keys were checked.
    /// Reply: [`MetaReply::Info`].
    Persisted { inode: InodeId, chunks: Vec<ChunkRef>, size: u64, mtime: u64, etag: String, key: Option<String> },
    /// Chunks of file `inode` loaded from below, now stored on the workers:
    /// each replaces its chunk if that is still below (nothing else
    /// changes, times included); a version arriving for a chunk no longer
    /// below is garbage at once. Reply: [`MetaReply::Info`].
    LoadChunks { inode: InodeId, chunks: Vec<(u64, ChunkRef)> },
    /// The pool lets go of its copies of clean file `inode`: every stored
    /// chunk goes below again. A dirty file, or one with no origin, is
    /// `Stale`. Reply: [`MetaReply::Info`].
    Unload { inode: InodeId },
    /// Takes snapshot `name` of the file or tree at `path`: its metadata
    /// is copied and every chunk version it names is kept until the
    /// snapshot is removed. `AlreadyExists` if `path` has one of that
    /// name. Reply: [`MetaReply::Done`].
    SnapshotCreate { path: String, name: String },
    /// Removes snapshot `name` of `path`; the versions only it kept become
    /// garbage. Reply: [`MetaReply::Done`].
    SnapshotRemove { path: String, name: String },
    /// Puts snapshot `name` back at `path`, replacing what is there, in
    /// one step. Reply: [`MetaReply::Info`] of the restored root.
    SnapshotRestore { path: String, name: String },
    /// Takes checkpoint `name` of the region `inode` at `path`: a snapshot
    /// whose chunks are the versions in `chunks`, one per chunk of the
    /// region, copied from it on the workers beforehand (each of version
    /// `version`, reserved for this checkpoint, or one an earlier
    /// checkpoint of the region keeps now, when that chunk did not change
    /// since). `AlreadyExists` if `path` has a snapshot of that name;
    /// `Stale` if `path` is no longer that region, `version` was given up
    /// meanwhile, or a shared copy is no longer kept (its checkpoint was
    /// removed). Reply: [`MetaReply::Done`].
    Checkpoint { path: String, name: String, inode: InodeId, version: u64, chunks: Vec<ChunkRef> },
    /// Marks the region at `path` as being restored to its checkpoint
    /// `name` (`done: false`, before its chunks are copied back on the
    /// workers), or the restore as finished (`done: true`, after). A
    /// region marked stays marked until a restore of the same checkpoint
    /// finishes (found through the mark, wherever the region moved since).
    /// Reply: [`MetaReply::Info`]: with `done: false` of the checkpoint
    /// (its chunk versions), with `done: true` of the region.
    RegionRestore { path: String, name: String, done: bool },
    /// Commits a transaction's writes of files and its changes of the
    /// namespace, all or none (see `state/transact.rs`): each of `files`
    /// is an `UpdateFile` of a distinct file that existed before; then the
    /// steps of `ns` run in order, as the ops they name would. With
    /// `task`, fails `AlreadyExists` if a transaction of that task id
    /// committed before, and records it otherwise. `regions` are pages of
    /// memory regions, written in place on the workers once the op is
    /// durable: the op keeps them as pending until `RegionPagesWritten`.
    /// Write-write conflicts are the engine's to check before it runs
    /// this. Reply: [`MetaReply::Done`].
    Transact { task: Option<String>, files: Vec<TxFile>, ns: Vec<TxNs>, regions: Vec<TxRegion> },
    /// The pages of the committed transaction pending as `id` (see
    /// `MetaState::pending_pages`) are on the workers: they are forgotten.
    /// Reply: [`MetaReply::Done`].
    RegionPagesWritten { id: u64 },
    /// Gives the file at `path`, beneath an attachment, its own write mode
    /// (`None`: its attachment's again); with `recursive`, every file
    /// beneath the directory at `path`. A file replaced at its path
    /// hands its mode to the new one. Reply: [`MetaReply::WriteModes`].
    SetWriteMode { path: String, mode: Option<WriteMode>, recursive: bool },
}

impl MetaOp {
    /// Whether the op may change the partition table or the goal it moves
    /// toward (workers must then be given the table again).
    pub fn changes_placement(&self) -> bool {
        matches!(
            self,
            MetaOp::Init { .. }
                | MetaOp::RegisterWorker { .. }
                | MetaOp::BeginMoves { .. }
                | MetaOp::FinishMoves { .. }
                | MetaOp::AbortMoves { .. }
                | MetaOp::DrainWorker { .. }
                | MetaOp::RemoveWorker { .. }
                | MetaOp::Rebalance
                | MetaOp::SetSpeed { .. }
                | MetaOp::SetReplication { .. }
                | MetaOp::WorkerDown { .. }
                | MetaOp::WorkerUp { .. }
        )
    }
}

/// A page of a memory region as transactions see it: they read, write
/// and conflict by whole pages.
pub const REGION_PAGE: u64 = 4096;

/// Pages a transaction wrote in one memory region: each `(index, bytes)`
/// is page `index` whole ([`REGION_PAGE`] bytes, fewer only for the last
/// page of a region whose size is not a multiple of it), indexes rising.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxRegion {
    pub inode: InodeId,
    pub pages: Vec<(u64, bytes::Bytes)>,
}

/// One file a transaction wrote: as `UpdateFile`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxFile {
    pub inode: InodeId,
    pub size: u64,
    pub truncate: Option<u64>,
    pub chunks: Vec<(u64, ChunkRef)>,
}

/// One change of the namespace made in a transaction, by path in the
/// namespace as the transaction's earlier steps left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxNs {
    /// `Mkdir` of one directory (its parent exists).
    Mkdir { path: String, mode: u32 },
    /// A new file at a free path, with the reserved id `file.inode`, made
    /// of `file`'s chunks (as `UpdateFile` of an empty file).
    Create { path: String, mode: u32, chunk_size: u64, file: TxFile },
    /// `Remove`.
    Remove { path: String, recursive: bool },
    /// `Rename`.
    Rename { from: String, to: String },
}

impl TxNs {
    /// The paths the step names (its source first).
    pub fn paths(&self) -> Vec<&str> {
        match self {
            TxNs::Mkdir { path, .. } | TxNs::Create { path, .. } | TxNs::Remove { path, .. } => vec![path],
            TxNs::Rename { from, to } => vec![from, to],
        }
    }
}

/// What `MakeAt` creates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewNode {
    /// An empty file whose chunks will be `chunk_size` bytes.
    File {
        chunk_size: u64,
    },
    Dir,
    Symlink {
        target: String,
    },
    /// A named pipe, socket or device node: metadata only, served by the
    /// kernel of the machine that opens it.
    Special {
        kind: InodeKind,
        rdev: u64,
    },
}

/// The result of a successful op.
// Replies are made one per op and moved on, never held in bulk: an inode's
// stat inline costs less than a box per reply.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaReply {
    Done,
    Inodes {
        first: InodeId,
        count: u64,
    },
    Info(InodeInfo),
    Removed {
        /// How many inodes went.
        inodes: u64,
        /// The inode the removed name named, when it went with it (it had
        /// no other name); `None` when it stays, and for a detach.
        gone: Option<InodeId>,
    },
    Attrs {
        changed: Vec<(InodeId, ChunkAttrs)>,
    },
    /// A rename: the inode moved and the `ctime` it was left with (as
    /// before when nothing moved), and the inode the replaced name named
    /// when it went with it (it had no other name).
    Renamed {
        moved: InodeId,
        ctime: Timestamp,
        gone: Option<InodeId>,
    },
    Worker {
        id: WorkerId,
    },
    /// The partitions a removed worker owned, now owned by others (their
    /// chunks were only on it), and the paths of the files and regions that
    /// had chunks in them (lost).
    WorkerRemoved {
        partitions: Vec<u32>,
        lost: Vec<String>,
    },
    /// The files and regions whose copies per chunk changed: `(inode,
    /// before, after)` (their chunks need copying up to it, or the extra
    /// copies dropping).
    Replicas {
        changed: Vec<(InodeId, u8, u8)>,
    },
    /// How many inodes took the placement policy.
    Placed {
        inodes: u64,
    },
    /// The files whose write mode was set.
    WriteModes {
        files: Vec<InodeId>,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InodeKind {
    File,
    Dir,
    /// Memory allocated from the pool: written in place, page by page.
    Region,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl InodeKind {
    /// A named pipe, socket or device node.
    pub fn is_special(self) -> bool {
        matches!(self, InodeKind::Fifo | InodeKind::Socket | InodeKind::CharDevice | InodeKind::BlockDevice)
    }
}

/// What `stat` shows of an inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeInfo {
    pub id: InodeId,
    pub kind: InodeKind,
    /// Bytes for a file or region; number of entries for a directory.
    pub size: u64,
    /// 0 for directories.
    pub chunk_size: u64,
    /// Permission bits (e.g. 0o644).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Names of a non-directory; 2 + number of subdirectories for a directory.
    pub nlink: u32,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    pub attrs: ChunkAttrs,
    /// Copies of each chunk the pool keeps (of a directory: what new files
    /// in it keep): its own setting, capped by the pool's replication.
    pub replicas: u8,
    /// Where its chunks are put (of a directory: what new entries inherit).
    pub placement: Placement,
    /// One entry per chunk of a file (`ceil(size / chunk_size)` entries),
    /// unless the query left them out; empty for every other kind (a
    /// region's chunks change in place and workers check them).
    pub chunks: Vec<ChunkRef>,
    /// Where a symbolic link points; empty for other kinds.
    pub target: String,
    /// Device number of a device node, else 0.
    pub rdev: u64,
    /// Of a file beneath an attachment: the under-store object it mirrors
    /// (none for a file made in the pool and not yet persisted).
    pub origin: Option<Origin>,
    /// Of a small file held inline, with its chunk list: the bytes of
    /// chunk 0 (whose version is inline, see `ChunkRef::is_inline`).
    pub inline: Option<bytes::Bytes>,
    /// Of a region: the checkpoint a restore that has not finished is
    /// bringing back (its bytes are partly old, partly restored until the
    /// restore is run again to its end).
    pub restoring: Option<String>,
}

impl InodeInfo {
    /// Whether `chunks` lists every chunk of the file (queries may leave them out).
    pub fn has_chunks(&self) -> bool {
        self.kind != InodeKind::File || self.chunks.len() as u64 == self.size.div_ceil(self.chunk_size.max(1))
    }
}

/// One directory entry as `readdir` needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirName {
    pub name: String,
    pub id: InodeId,
    pub kind: InodeKind,
}

/// One directory entry as `ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub info: InodeInfo,
}

/// A worker as the coordinator remembers it across restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub id: WorkerId,
    pub addr: String,
    pub host: String,
    pub rack: String,
    pub mem_capacity: u64,
    pub disk_capacity: u64,
}
