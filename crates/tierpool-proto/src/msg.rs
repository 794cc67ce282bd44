//! Requests and responses. One enum each for both planes: the coordinator
//! answers the control requests, workers the data requests; a process that
//! gets a request meant for the other role answers `InvalidArgument`.

use serde::{Deserialize, Serialize};
use tierpool_meta::{DirEntry, DirName, InodeInfo, MetaOp, MetaReply, WorkerRecord};
use tierpool_placement::PartitionTable;
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, Error, InodeId, WorkerId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Liveness check; both roles answer `Pong`.
    Ping,
    // ---- control plane (coordinator) ----
    /// A metadata change; answered once durable.
    Meta(MetaOp),
    Stat {
        path: String,
    },
    List {
        path: String,
    },
    /// The partition table and worker addresses.
    Layout,
    Status,
    Heartbeat {
        id: WorkerId,
        stats: WorkerStats,
    },
    // ---- data plane (worker) ----
    /// Payload: the chunk's bytes, whose CRC-32C is `checksum`.
    PutChunk {
        key: ChunkKey,
        checksum: Checksum,
        attrs: ChunkAttrs,
    },
    GetChunk {
        key: ChunkKey,
    },
    DeleteInodes {
        inodes: Vec<InodeId>,
    },
    SetAttrs {
        changes: Vec<(InodeId, ChunkAttrs)>,
    },
    WorkerStats,
    /// A zero-filled chunk of `len` bytes, unless it exists (a region's space).
    CreateChunk {
        key: ChunkKey,
        len: u64,
        attrs: ChunkAttrs,
    },
    /// `len` bytes of a chunk from `offset`; answered by `Range`.
    ReadRange {
        key: ChunkKey,
        offset: u64,
        len: u64,
    },
    /// Overwrites ranges `(offset, len)` of a chunk in place, all or none.
    /// Payload: the ranges' bytes, concatenated; `checksum` is their CRC-32C.
    WriteRanges {
        key: ChunkKey,
        ranges: Vec<(u64, u64)>,
        checksum: Checksum,
    },
    // ---- control plane, by inode (for file systems) ----
    /// Entry `name` of directory `parent`, without a file's chunk list.
    Lookup {
        parent: InodeId,
        name: String,
    },
    /// The live inode `id`; with `chunks`, a file's chunk list too.
    StatInode {
        id: InodeId,
        chunks: bool,
    },
    /// The entries of directory `id`; answered by `Names`.
    ReadDir {
        id: InodeId,
    },
    /// Client `session` has these inodes open: their chunks must outlive
    /// their names. Replaces the session's earlier set; lapses unless
    /// renewed within the hold period (see the coordinator's `gc`).
    Hold {
        session: u64,
        inodes: Vec<InodeId>,
    },
    // ---- data plane (worker) ----
    /// Deletes these chunk versions (replaced versions of live files).
    DeleteChunks {
        keys: Vec<ChunkKey>,
    },
    /// Which tier holds each of these chunks; answered by `Located`.
    Locate {
        keys: Vec<ChunkKey>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Pong {
        role: String,
    },
    Ok,
    Error(Error),
    Meta(MetaReply),
    Info(InodeInfo),
    Entries(Vec<DirEntry>),
    Layout(Layout),
    Status(PoolStatus),
    /// `known == false` asks the worker to register again.
    HeartbeatAck {
        known: bool,
    },
    /// Payload: the chunk's bytes.
    Chunk,
    Deleted {
        chunks: u64,
    },
    WorkerStats(WorkerStats),
    /// Payload: the bytes of a `ReadRange`, whose CRC-32C is `checksum`.
    Range {
        checksum: Checksum,
    },
    /// A directory's entries and the directory holding it.
    Names {
        parent: InodeId,
        entries: Vec<DirName>,
    },
    /// One place per key asked, in order.
    Located(Vec<ChunkPlace>),
}

/// Where a worker holds a chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChunkPlace {
    Mem,
    Disk,
    /// This worker does not hold it.
    Absent,
}

/// Where chunks live: the partition table and how to reach each worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub table: PartitionTable,
    pub workers: Vec<WorkerRecord>,
}

impl Layout {
    pub fn worker(&self, id: WorkerId) -> Option<&WorkerRecord> {
        self.workers.iter().find(|w| w.id == id)
    }
}

/// What a worker reports with each heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    pub mem_capacity: u64,
    pub mem_used: u64,
    pub mem_chunks: u64,
    pub disk_capacity: u64,
    pub disk_used: u64,
    pub disk_chunks: u64,
    pub demotions: u64,
    pub promotions: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub record: WorkerRecord,
    pub alive: bool,
    /// Partitions this worker owns.
    pub partitions: u32,
    /// Last reported statistics; `None` if it has not reported since the coordinator started.
    pub stats: Option<WorkerStats>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub partitions: u32,
    pub table_epoch: u64,
    pub inodes: u64,
    pub pending_gc: u64,
    pub workers: Vec<WorkerStatus>,
    /// Replaced chunk versions awaiting deletion.
    pub pending_chunks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let r = Request::PutChunk {
            key: ChunkKey { inode: InodeId(7), index: 3, version: 1 },
            checksum: 0xdead_beef,
            attrs: ChunkAttrs::default(),
        };
        assert_eq!(crate::decode::<Request>(&crate::encode(&r)).unwrap(), r);
        let e = Response::Error(Error::not_found("/x"));
        assert_eq!(crate::decode::<Response>(&crate::encode(&e)).unwrap(), e);
    }

    #[test]
    fn malformed_bodies_are_protocol_errors() {
        for junk in [&b""[..], b"\xff\xff\xff\xff\xff", b"\x02\x99"] {
            let e = crate::decode::<Request>(junk).unwrap_err();
            assert_eq!(e.kind, tierpool_types::ErrorKind::Protocol);
        }
    }
}
