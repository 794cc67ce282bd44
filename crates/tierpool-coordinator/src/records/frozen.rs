//! Leaf types shared by several record versions. Each is frozen: its shape
//! is part of every format that uses it, so it never changes. A format that
//! needs another shape defines a new type (`...V2`) in its own module.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierpool_meta::{InodeKind, WorkerRecord};
use tierpool_placement::PartitionTable;
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Priority, Result, WorkerId};

/// A record that decoded but holds an impossible value.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Corrupt, format!("metadata record: {what}"))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrsV1 {
    pub priority: u8,
    pub pinned: bool,
}

impl From<ChunkAttrs> for AttrsV1 {
    fn from(a: ChunkAttrs) -> Self {
        AttrsV1 { priority: a.priority.get(), pinned: a.pinned }
    }
}

impl TryFrom<AttrsV1> for ChunkAttrs {
    type Error = Error;
    fn try_from(a: AttrsV1) -> Result<Self> {
        Ok(ChunkAttrs { priority: priority(a.priority)?, pinned: a.pinned })
    }
}

pub(crate) fn priority(p: u8) -> Result<Priority> {
    Priority::new(p).map_err(corrupt)
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRefV1 {
    pub version: u64,
    pub len: u64,
    pub checksum: u32,
}

impl From<ChunkRef> for ChunkRefV1 {
    fn from(r: ChunkRef) -> Self {
        ChunkRefV1 { version: r.version, len: r.len, checksum: r.checksum }
    }
}

impl From<ChunkRefV1> for ChunkRef {
    fn from(r: ChunkRefV1) -> Self {
        ChunkRef { version: r.version, len: r.len, checksum: r.checksum, home: None }
    }
}

/// Ordered as [`ChunkKey`] is (inode, index, version), so sets of keys keep their order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkKeyV1 {
    pub inode: u64,
    pub index: u64,
    pub version: u64,
}

impl From<ChunkKey> for ChunkKeyV1 {
    fn from(k: ChunkKey) -> Self {
        ChunkKeyV1 { inode: k.inode.0, index: k.index, version: k.version }
    }
}

impl From<ChunkKeyV1> for ChunkKey {
    fn from(k: ChunkKeyV1) -> Self {
        ChunkKey::hashed(InodeId(k.inode), k.index, k.version)
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KindV1 {
    File,
    Dir,
    Region,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl From<InodeKind> for KindV1 {
    fn from(k: InodeKind) -> Self {
        match k {
            InodeKind::File => KindV1::File,
            InodeKind::Dir => KindV1::Dir,
            InodeKind::Region => KindV1::Region,
            InodeKind::Symlink => KindV1::Symlink,
            InodeKind::Fifo => KindV1::Fifo,
            InodeKind::Socket => KindV1::Socket,
            InodeKind::CharDevice => KindV1::CharDevice,
            InodeKind::BlockDevice => KindV1::BlockDevice,
        }
    }
}

impl From<KindV1> for InodeKind {
    fn from(k: KindV1) -> Self {
        match k {
            KindV1::File => InodeKind::File,
            KindV1::Dir => InodeKind::Dir,
            KindV1::Region => InodeKind::Region,
            KindV1::Symlink => InodeKind::Symlink,
            KindV1::Fifo => InodeKind::Fifo,
            KindV1::Socket => InodeKind::Socket,
            KindV1::CharDevice => InodeKind::CharDevice,
            KindV1::BlockDevice => InodeKind::BlockDevice,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecordV1 {
    pub id: u32,
    pub addr: String,
    pub host: String,
    pub rack: String,
    pub mem_capacity: u64,
    pub disk_capacity: u64,
}

impl From<&WorkerRecord> for WorkerRecordV1 {
    fn from(w: &WorkerRecord) -> Self {
        WorkerRecordV1 {
            id: w.id.0,
            addr: w.addr.clone(),
            host: w.host.clone(),
            rack: w.rack.clone(),
            mem_capacity: w.mem_capacity,
            disk_capacity: w.disk_capacity,
        }
    }
}

impl From<WorkerRecordV1> for WorkerRecord {
    fn from(w: WorkerRecordV1) -> Self {
        WorkerRecord {
            id: WorkerId(w.id),
            addr: w.addr,
            host: w.host,
            rack: w.rack,
            mem_capacity: w.mem_capacity,
            disk_capacity: w.disk_capacity,
        }
    }
}

pub(crate) fn workers_to_v1(ws: &BTreeMap<WorkerId, WorkerRecord>) -> BTreeMap<u32, WorkerRecordV1> {
    ws.iter().map(|(id, w)| (id.0, w.into())).collect()
}

pub(crate) fn workers_from_v1(ws: BTreeMap<u32, WorkerRecordV1>) -> BTreeMap<WorkerId, WorkerRecord> {
    ws.into_iter().map(|(id, w)| (WorkerId(id), w.into())).collect()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableV1 {
    pub epoch: u64,
    pub owners: Vec<Option<u32>>,
}

impl From<&PartitionTable> for TableV1 {
    fn from(t: &PartitionTable) -> Self {
        TableV1 { epoch: t.epoch(), owners: t.owners().iter().map(|o| o.map(|w| w.0)).collect() }
    }
}

impl TryFrom<TableV1> for PartitionTable {
    type Error = Error;
    fn try_from(t: TableV1) -> Result<Self> {
        let owners = t.owners.into_iter().map(|o| o.map(WorkerId)).collect();
        PartitionTable::from_parts(t.epoch, owners).ok_or_else(|| corrupt("a partition table without partitions"))
    }
}
