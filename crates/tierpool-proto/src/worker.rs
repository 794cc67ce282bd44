//! A worker's requests and responses: chunk bytes in and out, deletion,
//! attributes, where chunks are, and the moving of partitions between
//! workers. Chunk bytes travel as the frame's raw payload, never through
//! the serialiser.
//!
//! Chunk requests (`PutChunk`, `GetChunk`, `CreateChunk`, `ReadRange`,
//! `WriteRanges`, and each chunk of `PutChunks` and `GetChunks`) are
//! served only by the worker owning the chunk's
//! partition in the newest table it was given; others answer `Moved` or
//! `Busy` (see the worker's `routing`).
//!
//! A move of partitions from worker S to worker T: the coordinator gives
//! every worker the table saying they move (`Table`), then asks T to
//! `Copy` them from S. T asks S to `Track` them, lists and fetches their
//! chunks (`MovingChunks`, `Fetch`), fetches again what changed meanwhile
//! (`TakeChanges`) until little does, `Freeze`s them on S and fetches the
//! last changes. Once T answers `Copied`, the coordinator logs that T owns
//! them and gives every worker the new table.

use serde::{Deserialize, Serialize};
use tierpool_placement::PartitionTable;
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, Error, ErrorKind, InodeId, Result};

use crate::status::WorkerStats;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerRequest {
    /// Liveness check: `Pong`.
    Ping,
    /// Stores a chunk version. Payload: its bytes, whose CRC-32C is `checksum`. `Done`.
    /// `table`: the version of the table the writer chose its workers by
    /// (0: none); a writer whose table predates the last change of the
    /// partition's replicas is answered `Moved` (it would miss a replica).
    PutChunk { key: ChunkKey, checksum: Checksum, attrs: ChunkAttrs, table: u64 },
    /// A chunk's bytes: `Chunk` with them as payload. With `mem_only`, a
    /// chunk this worker holds on DISK only is not read: `OnDisk` (a
    /// reader first asks the replicas that may have it in memory).
    GetChunk { key: ChunkKey, mem_only: bool },
    /// Deletes every chunk of these inodes: `Deleted`.
    DeleteInodes { inodes: Vec<InodeId> },
    /// Deletes these chunk versions: `Deleted`.
    DeleteChunks { keys: Vec<ChunkKey> },
    /// New eviction attributes of every chunk of these inodes. With
    /// `replace`, every inode not listed goes back to the default ones (the
    /// first request of a full sync). `Done`.
    SetAttrs { changes: Vec<(InodeId, ChunkAttrs)>, replace: bool },
    /// Current figures: `Stats`.
    Stats,
    /// A zero-filled chunk of `len` bytes, unless it exists (a region's space). `Done`.
    CreateChunk { key: ChunkKey, len: u64, attrs: ChunkAttrs, table: u64 },
    /// `len` bytes of a chunk from `offset`: `Range` with them as payload.
    ReadRange { key: ChunkKey, offset: u64, len: u64 },
    /// Overwrites ranges `(offset, len)` of a chunk in place, all or none.
    /// Payload: the ranges' bytes, concatenated; `checksum` is their CRC-32C. `Done`.
    WriteRanges { key: ChunkKey, ranges: Vec<(u64, u64)>, checksum: Checksum, table: u64 },
    /// Which tier holds each of these chunks: `Located`.
    Locate { keys: Vec<ChunkKey> },
    /// These chunks (of these inodes, as stored now) are garbage: still
    /// readable, but dropped first whenever room is needed. `Done`.
    Reclaim { inodes: Vec<InodeId>, keys: Vec<ChunkKey> },
    /// What the worker stores, a page at a time: up to `limit` keys after
    /// `after` (from the first without it), in key order: `Inventory`.
    Inventory { after: Option<ChunkKey>, limit: u32 },
    /// The partition table as of the coordinator's `version` (tables are
    /// applied in version order, an older one is ignored). `Done`.
    Table { version: u64, table: PartitionTable },
    /// The tracking ids of these partitions moving away from this worker,
    /// which name them in the requests below: `Tracking`.
    Track { partitions: Vec<u32> },
    /// The chunks of these moving partitions (with their tracking ids), a
    /// page at a time: up to `limit` after `after`, in key order: `Chunks`.
    MovingChunks { moves: Vec<(u32, u64)>, after: Option<ChunkKey>, limit: u32 },
    /// The bytes of these chunks of moving partitions, as many of the
    /// first ones as fit in one answer: `Fetched`.
    Fetch { moves: Vec<(u32, u64)>, keys: Vec<ChunkKey> },
    /// The keys written or deleted in these moving partitions since the
    /// last `TakeChanges` (or since they started moving): `Changes`.
    TakeChanges { moves: Vec<(u32, u64)> },
    /// Stops serving these moving partitions until a table ends their
    /// moves: `Done` once no write to them is in progress.
    Freeze { moves: Vec<(u32, u64)> },
    /// Copies these partitions, which the table says move here, from the
    /// worker at `from`, at most `rate` bytes a second (0: no limit):
    /// `Copied` once this worker holds all of them as they are (frozen) on it.
    Copy { from: String, partitions: Vec<u32>, rate: u64 },
    /// Moves a chunk this worker holds in MEM to its DISK tier (a chunk on
    /// DISK already stays): it then outlives a kill of the worker process.
    /// `Done`; `NotFound` if absent; `PoolFull` if DISK has no room.
    KeepOnDisk { key: ChunkKey },
    /// How long ago a client last read or wrote a chunk of each of these
    /// inodes on this worker: `LastUsed`.
    LastUse { inodes: Vec<InodeId> },
    /// Copies chunk `from` to `to` on this worker (a region's checkpoint,
    /// or its restore): both are versions of the same chunk of the same
    /// inode, so they live on the same workers. With `unless`, nothing is
    /// copied when the chunk stored at `unless` has the same bytes as
    /// `from` (same length and checksum). `to` is replaced if it exists.
    /// `ChunkCopied`; `NotFound` if `from` is absent.
    CopyChunk { from: ChunkKey, to: ChunkKey, unless: Option<ChunkKey>, table: u64 },
    /// The bytes of many chunks at once (small files read many to a
    /// request), each as a `GetChunk` would give it: `Fetched`, for as many
    /// of the first keys as fit in one answer, `None` for a key this worker
    /// does not serve now (not stored, moved, handed over, damaged, or with
    /// `mem_only` held on DISK only). At most [`crate::MAX_BATCH`] keys.
    GetChunks { keys: Vec<ChunkKey>, mem_only: bool },
    /// Stores many chunk versions at once (small files written many to a
    /// request), each as a `PutChunk` of its `(key, checksum, length)` with
    /// `attrs` and `table` would: `Stored`, one per chunk in order. Payload:
    /// their bytes, concatenated in this order. At most
    /// [`crate::MAX_BATCH`] chunks.
    PutChunks { chunks: Vec<(ChunkKey, Checksum, u64)>, attrs: ChunkAttrs, table: u64 },
}

impl WorkerRequest {
    /// This write request as chosen by the table of `version` (see
    /// `PutChunk`); other requests unchanged.
    pub fn fenced(&self, version: u64) -> WorkerRequest {
        let mut r = self.clone();
        if let WorkerRequest::PutChunk { table, .. }
        | WorkerRequest::PutChunks { table, .. }
        | WorkerRequest::CreateChunk { table, .. }
        | WorkerRequest::WriteRanges { table, .. }
        | WorkerRequest::CopyChunk { table, .. } = &mut r
        {
            *table = version;
        }
        r
    }
}

/// A chunk of a `Fetched` answer: its key, and its bytes and checksum if
/// they came.
pub type FetchedChunk = (ChunkKey, Option<(bytes::Bytes, Checksum)>);

/// `payload` cut into pieces of `lens` bytes, in order; `Protocol` if
/// they run past it, or (`whole`) do not cover all of it.
pub fn split_payload(
    lens: impl IntoIterator<Item = u64>,
    payload: &bytes::Bytes,
    whole: bool,
) -> Result<Vec<bytes::Bytes>> {
    let mut at = 0usize;
    let pieces = (lens.into_iter())
        .map(|len| {
            let end = (usize::try_from(len).ok().and_then(|n| at.checked_add(n)).filter(|e| *e <= payload.len()))
                .ok_or_else(|| Error::new(ErrorKind::Protocol, "chunks run past the payload"))?;
            let piece = payload.slice(at..end);
            at = end;
            Ok(piece)
        })
        .collect::<Result<Vec<_>>>()?;
    if whole && at != payload.len() {
        let rest = payload.len() - at;
        return Err(Error::new(ErrorKind::Protocol, format!("{rest} bytes of the payload belong to no chunk")));
    }
    Ok(pieces)
}

/// The chunks of a `Fetched` answer with their bytes, cut from `payload`
/// in order (`None` for a key not stored or not served there), each with
/// the checksum the answer gives; `Protocol` if one runs past the payload.
pub fn fetched_bytes(
    chunks: &[(ChunkKey, Option<(u64, Checksum)>)],
    payload: &bytes::Bytes,
) -> Result<Vec<FetchedChunk>> {
    let lens = chunks.iter().filter_map(|(_, stored)| stored.map(|(len, _)| len));
    let mut pieces = split_payload(lens, payload, false)?.into_iter();
    let chunk = |(key, stored): &(ChunkKey, Option<(u64, Checksum)>)| {
        (*key, stored.map(|(_, sum)| (pieces.next().expect("one piece per stored chunk"), sum)))
    };
    Ok(chunks.iter().map(chunk).collect())
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerResponse {
    Pong,
    Done,
    /// Payload: the chunk's bytes.
    Chunk,
    Deleted {
        chunks: u64,
    },
    /// Boxed: far larger than the other answers.
    Stats(Box<WorkerStats>),
    /// Payload: the bytes of a `ReadRange`, whose CRC-32C is `checksum`.
    Range {
        checksum: Checksum,
    },
    /// One place per key asked, in order.
    Located(Vec<ChunkPlace>),
    /// Stored chunks and their lengths, in key order.
    Inventory {
        chunks: Vec<(ChunkKey, u64)>,
    },
    /// Not this worker's chunk: the epoch of the table it serves by.
    Moved {
        epoch: u64,
    },
    /// The chunk's partition is being handed over (or this worker has no
    /// table yet): ask again shortly.
    Busy,
    Tracking {
        ids: Vec<u64>,
    },
    /// Chunks of moving partitions and their lengths, in key order; `next`
    /// is where the following page starts after, `None` at the end.
    Chunks {
        chunks: Vec<(ChunkKey, u64)>,
        next: Option<ChunkKey>,
    },
    /// The first keys asked for (by `Fetch` or `GetChunks`), each with its
    /// length and checksum, or `None` if it is not stored (deleted
    /// meanwhile) or, for `GetChunks`, not served here now. Payload: the
    /// stored chunks' bytes, concatenated in this order.
    Fetched {
        chunks: Vec<(ChunkKey, Option<(u64, Checksum)>)>,
    },
    Changes {
        keys: Vec<ChunkKey>,
    },
    Copied {
        chunks: u64,
        bytes: u64,
    },
    /// A `GetChunk` with `mem_only` of a chunk held on DISK only.
    OnDisk,
    /// One per inode asked, in order: milliseconds since its last use
    /// here, `None` if not since the worker started.
    LastUsed(Vec<Option<u64>>),
    /// A `CopyChunk`: the length and CRC-32C of the bytes at `from`, and
    /// whether they were copied (`false`: `unless` held them already).
    ChunkCopied {
        len: u64,
        checksum: Checksum,
        copied: bool,
    },
    /// A `PutChunks`: per chunk in order, whether it is stored (`Done`);
    /// `false` for one that a `PutChunk` would not have been answered
    /// `Done` for (moved, handed over, pool full, a bad checksum...): its
    /// writer stores it alone and learns why.
    Stored(Vec<bool>),
}

/// Where a worker holds a chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChunkPlace {
    Mem,
    Disk,
    /// This worker does not hold it.
    Absent,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::{Error, ErrorKind, InodeId};

    #[test]
    fn messages_round_trip() {
        let r = WorkerRequest::PutChunk {
            key: ChunkKey::hashed(InodeId(7), 3, 1),
            checksum: 0xdead_beef,
            attrs: ChunkAttrs::default(),
            table: 12,
        };
        assert_eq!(crate::decode::<WorkerRequest>(&crate::encode(&r)).unwrap(), r);
        let e: Result<WorkerResponse, Error> = Err(Error::not_found("/x"));
        assert_eq!(crate::decode::<Result<WorkerResponse, Error>>(&crate::encode(&e)).unwrap(), e);
    }

    /// Priorities outside 1..=5 do not decode: no worker ever sees one.
    #[test]
    fn out_of_range_priorities_are_refused_on_decode() {
        #[derive(serde::Serialize)]
        enum Mirror {
            _Ping,
            PutChunk { key: ChunkKey, checksum: u32, attrs: (u8, bool), table: u64 },
        }
        let key = ChunkKey::hashed(InodeId(7), 0, 1);
        for p in [0u8, 6, 255] {
            let bytes = crate::encode(&Mirror::PutChunk { key, checksum: 1, attrs: (p, false), table: 0 });
            let e = crate::decode::<WorkerRequest>(&bytes).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Protocol, "priority {p}");
        }
        let ok = crate::encode(&Mirror::PutChunk { key, checksum: 1, attrs: (5, true), table: 0 });
        assert!(crate::decode::<WorkerRequest>(&ok).is_ok());
    }

    #[test]
    fn malformed_bodies_are_protocol_errors() {
        for junk in [&b""[..], b"\xff\xff\xff\xff\xff", b"\x02\x99"] {
            let e = crate::decode::<WorkerRequest>(junk).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Protocol);
        }
    }
}
