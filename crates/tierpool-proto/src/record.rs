//! The coordinator's durable records.
//!
//! Log segment: a sequence of records, each
//! `len u32 | crc32c u32 | body` where body = `version u8 | postcard(LogRecord)`
//! and the CRC covers the body. A torn or corrupt tail is detected by length
//! or CRC and ends the replay there.
//!
//! Snapshot file: `magic "TPSNAP" | version u8 | crc32c u32 | len u64 | postcard(Snapshot)`.

use serde::{Deserialize, Serialize};
use tierpool_meta::{MetaOp, MetaState};
use tierpool_types::{Error, ErrorKind, Result};

pub const LOG_RECORD_VERSION: u8 = 1;
pub const SNAPSHOT_VERSION: u8 = 1;
const SNAPSHOT_MAGIC: &[u8; 6] = b"TPSNAP";
const MAX_RECORD_LEN: u32 = 512 << 20;

/// One logged metadata change: the op, its sequence number and the time it ran at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    pub lsn: u64,
    pub time: u64,
    pub op: MetaOp,
}

/// The whole state after the record with sequence number `lsn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub lsn: u64,
    pub state: MetaState,
}

/// Appends the framed record to `out`.
pub fn encode_record(rec: &LogRecord, out: &mut Vec<u8>) {
    let mut body = vec![LOG_RECORD_VERSION];
    body.extend_from_slice(&crate::encode(rec));
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
    if body[0] != LOG_RECORD_VERSION {
        return Decoded::Torn(format!("unknown log record version {}", body[0]));
    }
    match crate::decode::<LogRecord>(&body[1..]) {
        Ok(r) => Decoded::Record(r, 8 + len as usize),
        Err(e) => Decoded::Torn(e.message),
    }
}

pub fn encode_snapshot(snap: &Snapshot) -> Vec<u8> {
    let body = crate::encode(snap);
    let mut out = Vec::with_capacity(body.len() + 19);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.push(SNAPSHOT_VERSION);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn decode_snapshot(buf: &[u8]) -> Result<Snapshot> {
    let corrupt = |m: &str| Error::new(ErrorKind::Corrupt, format!("metadata snapshot: {m}"));
    if buf.len() < 19 || &buf[0..6] != SNAPSHOT_MAGIC {
        return Err(corrupt("bad header"));
    }
    if buf[6] != SNAPSHOT_VERSION {
        return Err(corrupt(&format!("unsupported version {}", buf[6])));
    }
    let crc = u32::from_le_bytes([buf[7], buf[8], buf[9], buf[10]]);
    let mut lenb = [0u8; 8];
    lenb.copy_from_slice(&buf[11..19]);
    let len = u64::from_le_bytes(lenb);
    let body = &buf[19..];
    if body.len() as u64 != len {
        return Err(corrupt("truncated"));
    }
    if crc32c::crc32c(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    crate::decode(body).map_err(|e| corrupt(&e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lsn: u64) -> LogRecord {
        LogRecord { lsn, time: 5, op: MetaOp::Mkdir { path: format!("/d{lsn}"), parents: false, mode: 0o755 } }
    }

    #[test]
    fn records_round_trip_and_torn_tails_are_detected() {
        let mut buf = Vec::new();
        encode_record(&rec(1), &mut buf);
        encode_record(&rec(2), &mut buf);
        let Decoded::Record(r1, n1) = decode_record(&buf) else { panic!() };
        assert_eq!(r1, rec(1));
        let Decoded::Record(r2, n2) = decode_record(&buf[n1..]) else { panic!() };
        assert_eq!(r2, rec(2));
        assert_eq!(decode_record(&buf[n1 + n2..]), Decoded::End);
        // Every truncation of the second record is torn, never a wrong record.
        for cut in n1 + 1..n1 + n2 {
            assert!(matches!(decode_record(&buf[n1..cut]), Decoded::Torn(_)), "cut at {cut}");
        }
        let mut bad = buf.clone();
        bad[n1 + 10] ^= 0x40;
        assert!(matches!(decode_record(&bad[n1..]), Decoded::Torn(_)));
    }
}
