//! The coordinator's durable formats: log records and snapshots.
//!
//! Every version of a format has record types of its own (`log_v1`,
//! `snapshot_v1`, `snapshot_v2`): plain structs that exist only to be
//! stored, with explicit conversions from and to the state machine's types.
//! So the state machine and the wire can change freely, and a stored byte
//! changes only by adding a version here, together with a golden file
//! (`tests/golden/`) and a migration from the versions before it. Released
//! record types never change: `tests/golden/formats/` holds the traced
//! shape of each, and a test fails when one differs.
//!
//! Log segment: records `len u32 | crc32c u32 | body`, where body =
//! `version u8 | postcard(record)` and the CRC covers the body. A torn or
//! corrupt tail is detected by length or CRC and ends the replay there; a
//! record whose CRC holds but whose version is unknown or whose content is
//! impossible is an error, never a tail to cut.
//!
//! Snapshot: `magic "TPSNAP" | version u8 | crc32c u32 | len u64 | postcard(snapshot)`.
//!
//! Writers use the newest version of each format; readers take every
//! version listed here.

pub mod frozen;
pub mod log_v1;
pub mod log_v10;
pub mod log_v11;
pub mod log_v12;
pub mod log_v13;
pub mod log_v14;
pub mod log_v15;
pub mod log_v16;
pub mod log_v17;
pub mod log_v2;
pub mod log_v3;
pub mod log_v4;
pub mod log_v5;
pub mod log_v6;
pub mod log_v7;
pub mod log_v8;
pub mod log_v9;
pub mod snapshot_v1;
pub mod snapshot_v10;
pub mod snapshot_v11;
pub mod snapshot_v12;
pub mod snapshot_v13;
pub mod snapshot_v14;
pub mod snapshot_v2;
pub mod snapshot_v3;
pub mod snapshot_v4;
pub mod snapshot_v5;
pub mod snapshot_v6;
pub mod snapshot_v7;
pub mod snapshot_v8;
pub mod snapshot_v9;
#[cfg(test)]
mod tests;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tierpool_meta::{MetaOp, MetaState, Owner};
use tierpool_types::{Error, ErrorKind, Result};

/// The version new log records are written in.
pub const LOG_RECORD_VERSION: u8 = 17;
/// The version new snapshots are written in.
pub const SNAPSHOT_VERSION: u8 = 14;
const SNAPSHOT_MAGIC: &[u8; 6] = b"TPSNAP";
const SNAPSHOT_HEADER: usize = 19;
const MAX_RECORD_LEN: u32 = 512 << 20;

/// One logged metadata change: the op, the owner it ran as, its sequence
/// number and the time it ran at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub lsn: u64,
    pub time: u64,
    pub owner: Owner,
    pub op: MetaOp,
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_stdvec(v).expect("in-memory serialisation of a record cannot fail")
}

fn decode<T: DeserializeOwned>(b: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(b).map_err(|e| Error::new(ErrorKind::Corrupt, format!("{what} does not decode: {e}")))
}

/// Appends the framed record to `out`, in the newest version.
pub fn encode_record(rec: &LogRecord, out: &mut Vec<u8>) {
    let record = log_v17::RecordV17::try_from(rec).expect("version 17 holds every op");
    frame_record(LOG_RECORD_VERSION, &encode(&record), out);
}

/// Appends the framed record to `out` in an older `version` (to check that
/// golden files of released versions still encode as they did).
pub fn encode_record_in(version: u8, rec: &LogRecord, out: &mut Vec<u8>) -> Result<()> {
    if version < 17 && log_v17::made_file(&rec.op) {
        return Err(Error::invalid(format!("a file made with a reserved id has no log record version {version} form")));
    }
    if version < 16 && log_v16::region_pages(&rec.op) {
        return Err(Error::invalid(format!("region pages of a transaction have no log record version {version} form")));
    }
    if version < 15 && log_v15::inline_update(&rec.op) {
        return Err(Error::invalid(format!(
            "small contents given to a file have no log record version {version} form"
        )));
    }
    if version < 14 && log_v14::write_mode(&rec.op) {
        return Err(Error::invalid(format!("a file's own write mode has no log record version {version} form")));
    }
    if version < 13 && log_v13::namespace_steps(&rec.op) {
        return Err(Error::invalid(format!(
            "a transaction that changed the namespace has no log record version {version} form"
        )));
    }
    if version < 12 && log_v12::transaction(&rec.op) {
        return Err(Error::invalid(format!("a transaction's commit has no log record version {version} form")));
    }
    if version < 11 && log_v11::checkpoint(&rec.op) {
        return Err(Error::invalid(format!("a checkpoint op has no log record version {version} form")));
    }
    if version < 10 && log_v10::snapshot(&rec.op) {
        return Err(Error::invalid(format!("a snapshot op has no log record version {version} form")));
    }
    if version < 9 && log_v9::inline(&rec.op) {
        return Err(Error::invalid(format!("a file held inline has no log record version {version} form")));
    }
    if version < 8 && log_v8::keyed(&rec.op) {
        return Err(Error::invalid(format!("a persisted file's key has no log record version {version} form")));
    }
    if version < 7 && log_v7::under(&rec.op) {
        return Err(Error::invalid(format!("an op of an under-store has no log record version {version} form")));
    }
    if version < 6 && log_v6::placed(&rec.op) {
        return Err(Error::invalid(format!("an op with placement has no log record version {version} form")));
    }
    match version {
        1 => frame_record(1, &encode(&log_v1::RecordV1::try_from(rec)?), out),
        2 => frame_record(2, &encode(&log_v2::RecordV2::try_from(rec)?), out),
        3 => frame_record(3, &encode(&log_v3::RecordV3::try_from(rec)?), out),
        4 => frame_record(4, &encode(&log_v4::RecordV4::try_from(rec)?), out),
        5 => frame_record(5, &encode(&log_v5::RecordV5::try_from(rec)?), out),
        6 => frame_record(6, &encode(&log_v6::RecordV6::try_from(rec)?), out),
        7 => frame_record(7, &encode(&log_v7::RecordV7::try_from(rec)?), out),
        8 => frame_record(8, &encode(&log_v8::RecordV8::try_from(rec)?), out),
        9 => frame_record(9, &encode(&log_v9::RecordV9::try_from(rec)?), out),
        10 => frame_record(10, &encode(&log_v10::RecordV10::try_from(rec)?), out),
        11 => frame_record(11, &encode(&log_v11::RecordV11::try_from(rec)?), out),
        12 => frame_record(12, &encode(&log_v12::RecordV12::try_from(rec)?), out),
        13 => frame_record(13, &encode(&log_v13::RecordV13::try_from(rec)?), out),
        14 => frame_record(14, &encode(&log_v14::RecordV14::try_from(rec)?), out),
        15 => frame_record(15, &encode(&log_v15::RecordV15::try_from(rec)?), out),
        16 => frame_record(16, &encode(&log_v16::RecordV16::try_from(rec)?), out),
        17 => encode_record(rec, out),
        v => return Err(Error::invalid(format!("no log record version {v}"))),
    }
    Ok(())
}

fn frame_record(version: u8, record: &[u8], out: &mut Vec<u8>) {
    let mut body = vec![version];
    body.extend_from_slice(record);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

/// Outcome of decoding one record from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A record and the number of bytes it used.
    Record(LogRecord, usize),
    /// Clean end of the buffer.
    End,
    /// A torn or corrupt record starts here: replay ends, the tail is discarded.
    Torn(String),
    /// A whole record (its CRC holds) that cannot be used: a version this
    /// build does not know, or impossible content. Never cut off.
    Unusable(Error),
}

pub fn decode_record(buf: &[u8]) -> Decoded {
    if buf.is_empty() {
        return Decoded::End;
    }
    if buf.len() < 8 {
        return Decoded::Torn(format!("{} trailing bytes, shorter than a record header", buf.len()));
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len == 0 || len > MAX_RECORD_LEN || buf.len() < 8 + len as usize {
        return Decoded::Torn(format!("record length {len} does not fit the {} remaining bytes", buf.len() - 8));
    }
    let body = &buf[8..8 + len as usize];
    if crc32c::crc32c(body) != crc {
        return Decoded::Torn("record checksum mismatch".into());
    }
    let rec = match body[0] {
        1 => decode::<log_v1::RecordV1>(&body[1..], "log record").and_then(LogRecord::try_from),
        2 => decode::<log_v2::RecordV2>(&body[1..], "log record").and_then(LogRecord::try_from),
        3 => decode::<log_v3::RecordV3>(&body[1..], "log record").and_then(LogRecord::try_from),
        4 => decode::<log_v4::RecordV4>(&body[1..], "log record").and_then(LogRecord::try_from),
        5 => decode::<log_v5::RecordV5>(&body[1..], "log record").and_then(LogRecord::try_from),
        6 => decode::<log_v6::RecordV6>(&body[1..], "log record").and_then(LogRecord::try_from),
        7 => decode::<log_v7::RecordV7>(&body[1..], "log record").and_then(LogRecord::try_from),
        8 => decode::<log_v8::RecordV8>(&body[1..], "log record").and_then(LogRecord::try_from),
        9 => decode::<log_v9::RecordV9>(&body[1..], "log record").and_then(LogRecord::try_from),
        10 => decode::<log_v10::RecordV10>(&body[1..], "log record").and_then(LogRecord::try_from),
        11 => decode::<log_v11::RecordV11>(&body[1..], "log record").and_then(LogRecord::try_from),
        12 => decode::<log_v12::RecordV12>(&body[1..], "log record").and_then(LogRecord::try_from),
        13 => decode::<log_v13::RecordV13>(&body[1..], "log record").and_then(LogRecord::try_from),
        14 => decode::<log_v14::RecordV14>(&body[1..], "log record").and_then(LogRecord::try_from),
        15 => decode::<log_v15::RecordV15>(&body[1..], "log record").and_then(LogRecord::try_from),
        16 => decode::<log_v16::RecordV16>(&body[1..], "log record").and_then(LogRecord::try_from),
        17 => decode::<log_v17::RecordV17>(&body[1..], "log record").and_then(LogRecord::try_from),
        v => Err(Error::new(
            ErrorKind::Corrupt,
            format!("log record version {v} is not known to this build (it reads up to {LOG_RECORD_VERSION})"),
        )),
    };
    match rec {
        Ok(r) => Decoded::Record(r, 8 + len as usize),
        Err(e) => Decoded::Unusable(e),
    }
}

/// The snapshot of `state` after record `lsn`, in the newest version.
pub fn encode_snapshot(lsn: u64, state: &MetaState) -> Vec<u8> {
    let snap = snapshot_v14::SnapshotV14 { lsn, state: snapshot_v14::StateV14::from_view(&state.view()) };
    frame_snapshot(SNAPSHOT_VERSION, &encode(&snap))
}

/// The snapshot in an older `version` (to check that golden files of
/// released versions still encode as they did).
pub fn encode_snapshot_in(version: u8, lsn: u64, state: &MetaState) -> Result<Vec<u8>> {
    if version < 6 {
        unreplicated(&state.view(), version)?;
    }
    if version < 14 && snapshot_v14::pending(&state.view()) {
        return Err(Error::invalid(format!(
            "a state with region pages pending has no snapshot version {version} form"
        )));
    }
    if version < 13 && snapshot_v13::own_modes(&state.view()) {
        return Err(Error::invalid(format!(
            "a state with files of their own write mode has no snapshot version {version} form"
        )));
    }
    if version < 12 && snapshot_v12::tasks(&state.view()) {
        return Err(Error::invalid(format!("a state with task ids has no snapshot version {version} form")));
    }
    if version < 11 && snapshot_v11::checkpoints(&state.view()) {
        return Err(Error::invalid(format!("a state with checkpoints has no snapshot version {version} form")));
    }
    if version < 10 && snapshot_v10::snapshots(&state.view()) {
        return Err(Error::invalid(format!("a state with snapshots has no snapshot version {version} form")));
    }
    if version < 9 && snapshot_v9::inline(&state.view()) {
        return Err(Error::invalid(format!("a state with inline files has no snapshot version {version} form")));
    }
    if version < 8 && snapshot_v8::attached(&state.view()) {
        return Err(Error::invalid(format!("a state with under-stores has no snapshot version {version} form")));
    }
    if version < 7 && snapshot_v7::placed(&state.view()) {
        return Err(Error::invalid(format!("a state with placement has no snapshot version {version} form")));
    }
    match version {
        2 => {
            let snap = snapshot_v2::SnapshotV2 { lsn, state: snapshot_v2::StateV2::from_view(&state.view())? };
            Ok(frame_snapshot(2, &encode(&snap)))
        }
        3 => {
            let snap = snapshot_v3::SnapshotV3 { lsn, state: snapshot_v3::StateV3::from_view(&state.view())? };
            Ok(frame_snapshot(3, &encode(&snap)))
        }
        4 => {
            let view = state.view();
            if !view.speeds.is_empty() {
                return Err(Error::invalid("snapshot version 4 has no speeds of workers"));
            }
            let snap = snapshot_v4::SnapshotV4 { lsn, state: snapshot_v4::StateV4::from_view(&view) };
            Ok(frame_snapshot(4, &encode(&snap)))
        }
        5 => {
            let snap = snapshot_v5::SnapshotV5 { lsn, state: snapshot_v5::StateV5::from_view(&state.view()) };
            Ok(frame_snapshot(5, &encode(&snap)))
        }
        6 => {
            let snap = snapshot_v6::SnapshotV6 { lsn, state: snapshot_v6::StateV6::from_view(&state.view()) };
            Ok(frame_snapshot(6, &encode(&snap)))
        }
        7 => {
            let snap = snapshot_v7::SnapshotV7 { lsn, state: snapshot_v7::StateV7::from_view(&state.view()) };
            Ok(frame_snapshot(7, &encode(&snap)))
        }
        8 => {
            let snap = snapshot_v8::SnapshotV8 { lsn, state: snapshot_v8::StateV8::from_view(&state.view()) };
            Ok(frame_snapshot(8, &encode(&snap)))
        }
        9 => {
            let snap = snapshot_v9::SnapshotV9 { lsn, state: snapshot_v9::StateV9::from_view(&state.view()) };
            Ok(frame_snapshot(9, &encode(&snap)))
        }
        10 => {
            let snap = snapshot_v10::SnapshotV10 { lsn, state: snapshot_v10::StateV10::from_view(&state.view()) };
            Ok(frame_snapshot(10, &encode(&snap)))
        }
        11 => {
            let snap = snapshot_v11::SnapshotV11 { lsn, state: snapshot_v11::StateV11::from_view(&state.view()) };
            Ok(frame_snapshot(11, &encode(&snap)))
        }
        12 => {
            let snap = snapshot_v12::SnapshotV12 { lsn, state: snapshot_v12::StateV12::from_view(&state.view()) };
            Ok(frame_snapshot(12, &encode(&snap)))
        }
        13 => {
            let snap = snapshot_v13::SnapshotV13 { lsn, state: snapshot_v13::StateV13::from_view(&state.view()) };
            Ok(frame_snapshot(13, &encode(&snap)))
        }
        14 => Ok(encode_snapshot(lsn, state)),
        v => Err(Error::invalid(format!("no snapshot version {v} is written"))),
    }
}

/// Versions before 6 hold one replica per partition, no worker down and no
/// copies per path: a state with any has no form in them (it would decode
/// as another state).
fn unreplicated(s: &tierpool_meta::StateView<'_>, version: u8) -> Result<()> {
    if s.table.replicas() > 1 || !s.down.is_empty() || s.inodes.values().any(|n| n.replicas != 0) {
        return Err(Error::invalid(format!("a state with replication has no snapshot version {version} form")));
    }
    Ok(())
}

fn frame_snapshot(version: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + SNAPSHOT_HEADER);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.push(version);
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// A snapshot of any known version: the lsn it was taken after and the state.
pub fn decode_snapshot(buf: &[u8]) -> Result<(u64, MetaState)> {
    let corrupt = |m: &str| Error::new(ErrorKind::Corrupt, format!("metadata snapshot: {m}"));
    if buf.len() < SNAPSHOT_HEADER || &buf[0..6] != SNAPSHOT_MAGIC {
        return Err(corrupt("bad header"));
    }
    let version = buf[6];
    let crc = u32::from_le_bytes([buf[7], buf[8], buf[9], buf[10]]);
    let mut lenb = [0u8; 8];
    lenb.copy_from_slice(&buf[11..19]);
    let body = &buf[SNAPSHOT_HEADER..];
    if body.len() as u64 != u64::from_le_bytes(lenb) {
        return Err(corrupt("truncated"));
    }
    if crc32c::crc32c(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let what = "metadata snapshot";
    match version {
        1 => {
            let s: snapshot_v1::SnapshotV1 = decode(body, what)?;
            Ok((s.lsn, s.state.migrate().map_err(|e| e.context(what))?))
        }
        2 => {
            let s: snapshot_v2::SnapshotV2 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        3 => {
            let s: snapshot_v3::SnapshotV3 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        4 => {
            let s: snapshot_v4::SnapshotV4 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        5 => {
            let s: snapshot_v5::SnapshotV5 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        6 => {
            let s: snapshot_v6::SnapshotV6 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        7 => {
            let s: snapshot_v7::SnapshotV7 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        8 => {
            let s: snapshot_v8::SnapshotV8 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        9 => {
            let s: snapshot_v9::SnapshotV9 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        10 => {
            let s: snapshot_v10::SnapshotV10 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        11 => {
            let s: snapshot_v11::SnapshotV11 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        12 => {
            let s: snapshot_v12::SnapshotV12 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        13 => {
            let s: snapshot_v13::SnapshotV13 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        14 => {
            let s: snapshot_v14::SnapshotV14 = decode(body, what)?;
            Ok((s.lsn, s.state.into_state().map_err(|e| e.context(what))?))
        }
        v => Err(corrupt(&format!("version {v} is not known to this build (it reads up to {SNAPSHOT_VERSION})"))),
    }
}
