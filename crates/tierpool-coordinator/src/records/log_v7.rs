//! Log record version 7: version 6 and under-stores (attaching and
//! detaching one, adopting its objects as files, a file persisted below,
//! chunks loaded from below, a file's copies let go). An op with a version
//! 6 form is stored as it was, inside `OpV7::V6`; the others have variants
//! of their own. A chunk below is a `ChunkRefV1` of version `u64::MAX`.
//!
//! Frozen once released. Versions 1 to 6 are still read. Version 7 holds
//! every op except a `Persisted` naming its key (version 8).

use super::frozen::{corrupt, ChunkRefV1};
use super::log_v6::{OpV6, RecordV6};
use super::snapshot_v2::OwnerV2;
use super::LogRecord;
use serde::{Deserialize, Serialize};
use tierpool_meta::{Attachment, MetaOp, Owner, WriteMode};
use tierpool_types::{ChunkRef, Error, InodeId, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordV7 {
    pub lsn: u64,
    pub time: u64,
    pub owner: OwnerV2,
    pub op: OpV7,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentV7 {
    pub uri: String,
    /// 0: through, 1: pool-only.
    pub mode: u8,
    pub readonly: bool,
    pub options: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpV7 {
    V6(OpV6),
    Attach { path: String, attachment: AttachmentV7 },
    Detach { path: String },
    AdoptFile { parent: u64, name: String, size: u64, chunk_size: u64, mtime: u64, etag: String, mode: u32 },
    AdoptDir { parent: u64, name: String, mode: u32 },
    Disown { parent: u64, name: String },
    Persisted { inode: u64, chunks: Vec<(ChunkRefV1, Option<u32>)>, size: u64, mtime: u64, etag: String },
    LoadChunks { inode: u64, chunks: Vec<(u64, ChunkRefV1, Option<u32>)> },
    Unload { inode: u64 },
}

/// Whether `op` is one version 6 has no form for.
pub(super) fn under(op: &MetaOp) -> bool {
    matches!(
        op,
        MetaOp::Attach { .. }
            | MetaOp::Detach { .. }
            | MetaOp::AdoptFile { .. }
            | MetaOp::AdoptDir { .. }
            | MetaOp::Disown { .. }
            | MetaOp::Persisted { .. }
            | MetaOp::LoadChunks { .. }
            | MetaOp::Unload { .. }
    )
}

pub(super) fn mode_code(m: WriteMode) -> u8 {
    match m {
        WriteMode::Through => 0,
        WriteMode::PoolOnly => 1,
        WriteMode::Back => 2,
    }
}

pub(super) fn mode_of(code: u8) -> Result<WriteMode> {
    (WriteMode::ALL.into_iter().find(|m| mode_code(*m) == code)).ok_or_else(|| corrupt(format!("write mode {code}")))
}

impl From<&Attachment> for AttachmentV7 {
    fn from(a: &Attachment) -> Self {
        AttachmentV7 {
            uri: a.uri.clone(),
            mode: mode_code(a.mode),
            readonly: a.readonly,
            options: a.options.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

impl TryFrom<AttachmentV7> for Attachment {
    type Error = tierpool_types::Error;
    fn try_from(a: AttachmentV7) -> Result<Self> {
        Ok(Attachment {
            uri: a.uri,
            mode: mode_of(a.mode)?,
            readonly: a.readonly,
            options: a.options.into_iter().collect(),
        })
    }
}

fn chunk_of((r, home): (ChunkRefV1, Option<u32>)) -> ChunkRef {
    ChunkRef { home, ..r.into() }
}

impl TryFrom<&LogRecord> for RecordV7 {
    type Error = tierpool_types::Error;
    fn try_from(r: &LogRecord) -> Result<Self> {
        let owner = OwnerV2 { uid: r.owner.uid, gid: r.owner.gid };
        let op = match &r.op {
            op if !under(op) => OpV7::V6(RecordV6::try_from(r)?.op),
            MetaOp::Attach { path, attachment } => OpV7::Attach { path: path.clone(), attachment: attachment.into() },
            MetaOp::Detach { path } => OpV7::Detach { path: path.clone() },
            MetaOp::AdoptFile { parent, name, size, chunk_size, mtime, etag, mode } => OpV7::AdoptFile {
                parent: parent.0,
                name: name.clone(),
                size: *size,
                chunk_size: *chunk_size,
                mtime: *mtime,
                etag: etag.clone(),
                mode: *mode,
            },
            MetaOp::AdoptDir { parent, name, mode } => {
                OpV7::AdoptDir { parent: parent.0, name: name.clone(), mode: *mode }
            }
            MetaOp::Disown { parent, name } => OpV7::Disown { parent: parent.0, name: name.clone() },
            MetaOp::Persisted { key: Some(_), .. } => {
                return Err(Error::invalid("a persisted file's key has no log record version 7 form"))
            }
            MetaOp::Persisted { inode, chunks, size, mtime, etag, key: None } => OpV7::Persisted {
                inode: inode.0,
                chunks: chunks.iter().map(|r| (ChunkRefV1::from(*r), r.home)).collect(),
                size: *size,
                mtime: *mtime,
                etag: etag.clone(),
            },
            MetaOp::LoadChunks { inode, chunks } => OpV7::LoadChunks {
                inode: inode.0,
                chunks: chunks.iter().map(|(i, r)| (*i, ChunkRefV1::from(*r), r.home)).collect(),
            },
            MetaOp::Unload { inode } => OpV7::Unload { inode: inode.0 },
            _ => unreachable!("every op of an under-store has a version 7 form"),
        };
        Ok(RecordV7 { lsn: r.lsn, time: r.time, owner, op })
    }
}

impl TryFrom<RecordV7> for LogRecord {
    type Error = tierpool_types::Error;
    fn try_from(r: RecordV7) -> Result<Self> {
        let op = match r.op {
            OpV7::V6(op) => return LogRecord::try_from(RecordV6 { lsn: r.lsn, time: r.time, owner: r.owner, op }),
            OpV7::Attach { path, attachment } => MetaOp::Attach { path, attachment: attachment.try_into()? },
            OpV7::Detach { path } => MetaOp::Detach { path },
            OpV7::AdoptFile { parent, name, size, chunk_size, mtime, etag, mode } => {
                MetaOp::AdoptFile { parent: InodeId(parent), name, size, chunk_size, mtime, etag, mode }
            }
            OpV7::AdoptDir { parent, name, mode } => MetaOp::AdoptDir { parent: InodeId(parent), name, mode },
            OpV7::Disown { parent, name } => MetaOp::Disown { parent: InodeId(parent), name },
            OpV7::Persisted { inode, chunks, size, mtime, etag } => MetaOp::Persisted {
                inode: InodeId(inode),
                chunks: chunks.into_iter().map(chunk_of).collect(),
                size,
                mtime,
                etag,
                key: None,
            },
            OpV7::LoadChunks { inode, chunks } => MetaOp::LoadChunks {
                inode: InodeId(inode),
                chunks: chunks.into_iter().map(|(i, r, home)| (i, chunk_of((r, home)))).collect(),
            },
            OpV7::Unload { inode } => MetaOp::Unload { inode: InodeId(inode) },
        };
        let owner = Owner { uid: r.owner.uid, gid: r.owner.gid };
        Ok(LogRecord { lsn: r.lsn, time: r.time, owner, op })
    }
}
