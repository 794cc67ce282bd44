//! The coordinator's requests and responses: metadata by path and by inode,
//! membership (heartbeats), the layout clients route chunks by, holds.

use serde::{Deserialize, Serialize};
use tierpool_meta::{DirEntry, DirName, InodeInfo, MetaOp, MetaReply, Owner, TxFile, TxNs, TxRegion, WorkerRecord};
use tierpool_placement::PartitionTable;
use tierpool_types::{InodeId, Result, WorkerId};

use crate::status::{OwedStatus, PoolStatus, PoolUsage, WorkerStats};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordRequest {
    /// Liveness check: `Pong`.
    Ping,
    /// A metadata change run as `owner` (who owns the inodes it creates);
    /// answered once durable.
    Meta { op: MetaOp, owner: Owner },
    /// The inode at `path`, with a file's chunk list: `Info`.
    Stat { path: String },
    /// A directory's entries, or a file as its own entry: `Entries`.
    List { path: String },
    /// The partition table and worker addresses: `Layout`.
    Layout,
    /// Workers, tiers, capacity: `Status`.
    Status,
    /// A worker's sign of life and current figures: `HeartbeatAck`.
    Heartbeat { id: WorkerId, stats: WorkerStats },
    /// Entry `name` of directory `parent`, without a file's chunk list: `Info`.
    Lookup { parent: InodeId, name: String },
    /// The live inode `id`; with `chunks`, a file's chunk list too: `Info`.
    StatInode { id: InodeId, chunks: bool },
    /// The entries of directory `id` and the directory holding it: `Names`.
    ReadDir { id: InodeId },
    /// The live inodes `ids` as `StatInode` gives them without chunk
    /// lists, read at one moment: `Infos`, one result per inode in order
    /// (`NotFound` for one with no name left). At most [`MAX_BATCH`]. A
    /// file system hands them to the kernel with a listing's names,
    /// sparing a lookup of each.
    StatInodes { ids: Vec<InodeId> },
    /// Client `session` has these inodes open: their chunks must outlive
    /// their names. Replaces the session's earlier set; lapses unless
    /// renewed within the hold period. `Done`.
    Hold { session: u64, inodes: Vec<InodeId> },
    /// Client `session` is writing these inodes (not yet committed): what
    /// it stored must not be taken for a dead writer's orphans. Replaces the
    /// session's earlier set; lapses like a hold. Unlike a hold it does not
    /// keep a removed or replaced file's chunks. `Done`.
    Lease { session: u64, inodes: Vec<InodeId> },
    /// Files and regions at or under `path` with chunks short of copies
    /// (or with none left), as the metadata and the workers alive now say: `Fsck`.
    Fsck { path: String },
    /// The directories attached to under-stores: `Attachments`.
    Attachments,
    /// Independent metadata changes, run one after another as `owner`,
    /// each succeeding or failing on its own (a failure neither stops nor
    /// undoes the others); answered once all are durable: `MetaMany`, one
    /// result per op in order. At most [`MAX_BATCH`] ops.
    MetaMany { ops: Vec<MetaOp>, owner: Owner },
    /// `Meta`, and the live inodes `stat` (at most [`MAX_BATCH`]) as the op
    /// left them, without chunk lists, in one answer once the op is
    /// durable: `MetaStat`. A file system asks so for the directories a
    /// namespace change touched, whose attributes the kernel reads next.
    MetaStat { op: MetaOp, owner: Owner, stat: Vec<InodeId> },
    /// `MetaMany` (at most [`MAX_BATCH`] ops), and the live inodes `stat`
    /// (as many at most) as the ops left them, without chunk lists, read
    /// with no other op between: `MetaManyStat`, once all are durable. A
    /// file system's publish that makes its file too asks so for the
    /// file's directory.
    MetaManyStat { ops: Vec<MetaOp>, owner: Owner, stat: Vec<InodeId> },
    /// The inode at each of `paths`, as `Stat` gives it: `Infos`, one result
    /// per path in order. At most [`MAX_BATCH`] paths.
    StatMany { paths: Vec<String> },
    /// The snapshots of `path` (of every path: `None`), by path and name:
    /// `Snapshots`.
    Snapshots { path: Option<String> },
    /// Starts restoring the region at `path` to its checkpoint `name`
    /// (`MetaOp::RegionRestore` with `done: false`), as `owner`, unless a
    /// client session other than `session` has the region open: `Meta`.
    RestoreRegion { session: u64, path: String, name: String, owner: Owner },
    /// Opens a transaction for client `session`, reading the pool as it is
    /// now: `TxBegun`. Renew it with `TxRenew` within the hold period.
    /// Only the session that began a transaction may use it.
    TxBegin { session: u64 },
    /// The inode at `path` as transaction `tx` sees it (a file's chunks
    /// and inline bytes included): `Info`. A transaction that lost a
    /// conflict already fails here (`Conflict`) and ends.
    TxStat { session: u64, tx: u64, path: String },
    /// Transaction `tx` will write chunks `chunks` of the file `inode`, or
    /// pages `chunks` (of [`tierpool_meta::REGION_PAGE`] bytes) of the
    /// region `inode` (at `path`, for errors): `Done`, or `Conflict` (and
    /// it ends) if a commit changed them since it began.
    TxWrite { session: u64, tx: u64, inode: InodeId, path: String, chunks: Vec<u64> },
    /// Commits transaction `tx`, as `owner`: its writes (chunk versions
    /// already stored), its namespace steps in order, task id, the region
    /// pages it wrote (`regions`) and what they held in its view
    /// (`before`). `TxCommitted` once durable and the pages are on the
    /// workers, or `Conflict`; either way the transaction ends.
    TxCommit {
        session: u64,
        tx: u64,
        task: Option<String>,
        files: Vec<TxFile>,
        ns: Vec<TxNs>,
        regions: Vec<TxRegion>,
        before: Vec<TxRegion>,
        owner: Owner,
    },
    /// Ends transaction `tx` without committing: `Done`.
    TxAbort { session: u64, tx: u64 },
    /// Client `session` still runs transactions `txs`: `Done`, or
    /// `Conflict` naming one that is not open (any more).
    TxRenew { session: u64, txs: Vec<u64> },
    /// What changed since position `since` of change feed `feed` (`None`:
    /// only where the feed is now), waiting up to `wait_ms` (at most
    /// [`MAX_CHANGES_WAIT_MS`]) for a change when there is none yet:
    /// `Changes`. For clients that keep copies of names and attributes.
    Changes { feed: u64, since: Option<u64>, wait_ms: u32 },
    /// Of pages `first..first + count` (at most [`MAX_PAGES_ASKED`]) of
    /// the region `inode` (at `path`, for errors), those a commit wrote
    /// since transaction `tx` began, with what they held then: `Pages`.
    /// Read the others from the workers, first. With `write`, the
    /// transaction also writes those pages, as with `TxWrite` (told first).
    TxPages { session: u64, tx: u64, inode: InodeId, path: String, first: u64, count: u64, write: bool },
    /// The request encoded in `req` (not itself a `Written`: kept as bytes
    /// so that decoding never nests), answered as soon as what it changed
    /// or saw is written to the coordinator's log (it then survives the
    /// coordinator's process dying, not yet a crash of its machine) rather
    /// than fsynced: what a file system asks, as a local one keeps changes
    /// in memory until an `fsync`, which asks `SyncLog`. Encoded as one
    /// run of bytes (as a `Vec<u8>` was on the wire), never byte by byte:
    /// it carries a publish's inline bytes.
    Written { req: bytes::Bytes },
    /// `LogSynced` once every change made so far is fsynced.
    SyncLog,
    /// Directory `dir` and its ancestors below the root, root side first,
    /// each with its name (empty for the root): `Ancestry`. What a file
    /// system asks to name a directory's path by inode, one request
    /// whatever the depth and the directories' sizes.
    Ancestry { dir: InodeId },
    /// The workers' capacity and use and the inode count, with the
    /// attached under-stores' figures if `attachments` (a walk of the
    /// files under each): `Usage`. With `fresh`, the workers are asked
    /// for their figures first (else they are as of their last
    /// heartbeat). What `statfs` and the pool's upkeep need of `Status`,
    /// without its figures that walk the whole namespace.
    Usage { fresh: bool, attachments: bool },
    /// Every attached under-store with what its files owe it (changes not
    /// below, those the write-back owes among them): `Owed`. A walk of the
    /// files that owe, not of every file attached: what the pool's upkeep
    /// asks each round.
    Owed,
    /// The files at `path` or beneath it with changes not below their
    /// under-store, each with a path naming it and its info (chunks and
    /// small bytes included), in inode order after `after`, at most
    /// `limit`: `OwedFiles`. Found among the files that owe, not by a walk
    /// of every file: what a `sync` and a write-back round write.
    OwedFiles { path: String, after: Option<InodeId>, limit: u32 },
}

/// Most region pages one `TxPages` asks about.
pub const MAX_PAGES_ASKED: u64 = 4096;

/// The longest a `Changes` request waits for a change.
pub const MAX_CHANGES_WAIT_MS: u32 = 10_000;

/// What changed since a position of the coordinator's change feed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesAnswer {
    /// The feed's name (new at each start of the coordinator).
    pub feed: u64,
    /// The position to ask from next.
    pub next: u64,
    /// Changes were lost (too far behind, another feed, too many at once):
    /// drop every copy kept, then go on from `next`.
    pub lost: bool,
    /// Inodes changed, made or removed, each with its `ctime` after (0: gone).
    pub inodes: Vec<(InodeId, u64)>,
    /// Entries added or removed: directory, name, and the directory's
    /// `ctime` after the op that changed it.
    pub entries: Vec<(InodeId, String, u64)>,
}

/// Most ops of a `MetaMany`, paths of a `StatMany` or inodes of a `MetaStat` or `StatInodes`.
pub const MAX_BATCH: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordResponse {
    Pong,
    Done,
    Meta(MetaReply),
    Info(InodeInfo),
    Entries(Vec<DirEntry>),
    Layout(Layout),
    Status(PoolStatus),
    /// `known == false` asks the worker to register again; `table` is the
    /// version of the newest partition table (a worker that has an older
    /// one asks for the layout).
    HeartbeatAck {
        known: bool,
        table: u64,
    },
    Names {
        parent: InodeId,
        entries: Vec<DirName>,
    },
    Fsck(Vec<FsckEntry>),
    Attachments(Vec<AttachedDir>),
    MetaMany(Vec<Result<MetaReply>>),
    /// The op's reply and one result per inode asked for, in order.
    MetaStat {
        reply: MetaReply,
        stats: Vec<Result<InodeInfo>>,
    },
    /// One result per op and one per inode asked for, in order.
    MetaManyStat {
        replies: Vec<Result<MetaReply>>,
        stats: Vec<Result<InodeInfo>>,
    },
    Infos(Vec<Result<InodeInfo>>),
    Snapshots(Vec<tierpool_meta::SnapshotSummary>),
    /// A transaction opened.
    TxBegun {
        tx: u64,
    },
    /// The transaction committed (`already`: no, another of its task id had).
    TxCommitted {
        already: bool,
    },
    Changes(ChangesAnswer),
    /// Region pages as a transaction's view has them: (index, bytes).
    Pages(Vec<(u64, bytes::Bytes)>),
    /// The log is fsynced, by a coordinator on the machine that has been up
    /// since boot `machine` (its kernel's boot id): changes answered once
    /// written under another boot may have been lost with that machine.
    LogSynced {
        machine: String,
    },
    /// An answer whose small files' bytes follow it in the frame's payload,
    /// in order: one length per info it carries, `None` where an info has
    /// none (`payload.rs`). Readers see the answer itself, bytes in place.
    InlineAfter {
        answer: WithInline,
        lens: Vec<Option<u32>>,
    },
    /// Directories, root side first, each with its name.
    Ancestry(Vec<(InodeId, String)>),
    Usage(PoolUsage),
    Owed(Vec<OwedStatus>),
    /// Files and the path naming each; `more`: ask again after the last.
    OwedFiles {
        files: Vec<(String, InodeInfo)>,
        more: bool,
    },
}

/// The answers that may carry small files' bytes, as an `InlineAfter`
/// holds one: never another `InlineAfter` (nothing on the wire nests).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WithInline {
    Info(InodeInfo),
    Infos(Vec<Result<InodeInfo>>),
    MetaStat { reply: MetaReply, stats: Vec<Result<InodeInfo>> },
    Entries(Vec<DirEntry>),
}

/// A directory attached to an under-store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachedDir {
    pub path: String,
    pub inode: InodeId,
    pub attachment: tierpool_meta::Attachment,
}

/// A file or region with chunks short of copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsckEntry {
    pub path: String,
    /// Copies each chunk should have.
    pub replicas: u8,
    /// Chunks that hold data.
    pub chunks: u64,
    /// Chunks with fewer live copies than `replicas` (at least one).
    pub under: u64,
    /// Chunks with no live copy.
    pub lost: u64,
}

/// Where chunks live: the partition table and how to reach each worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub table: PartitionTable,
    pub workers: Vec<WorkerRecord>,
    /// The coordinator's version of the table (grows with every change of
    /// it, moves begun or given up included; the epoch grows only when an
    /// owner changes).
    pub version: u64,
    /// Whether a path may have a placement policy other than `hash`: a
    /// writer must then look up its directory's before writing.
    pub placed: bool,
    /// Files of at most this many bytes, written whole, may be committed
    /// with their bytes (`CommitInline`); 0: none.
    pub inline_max: u64,
}

impl Layout {
    pub fn worker(&self, id: WorkerId) -> Option<&WorkerRecord> {
        self.workers.iter().find(|w| w.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Written` carries its request as one run of bytes, laid out on the
    /// wire exactly as the `Vec<u8>` it once was (a length, then the bytes).
    #[test]
    fn written_is_its_request_bytes_after_a_length() {
        let inner = crate::encode(&CoordRequest::Stat { path: "/a/b".repeat(100) });
        let encoded = crate::encode(&CoordRequest::Written { req: inner.clone().into() });
        let as_vec = postcard::to_stdvec(&inner).unwrap();
        assert_eq!(encoded.len(), 1 + as_vec.len(), "one byte of variant, then the Vec<u8> form");
        assert!(encoded.ends_with(&as_vec));
        assert!(encoded.ends_with(&inner));
        match crate::decode::<CoordRequest>(&encoded).unwrap() {
            CoordRequest::Written { req } => assert_eq!(&req[..], &inner[..]),
            other => panic!("decoded {other:?}"),
        }
    }
}
