//! The on-disk format of a DISK chunk file: a fixed header, then the data.
//!
//! Version 1 header, 56 bytes, little-endian:
//!
//! | offset | size | field                                   |
//! |--------|------|-----------------------------------------|
//! | 0      | 4    | magic `TPCK`                            |
//! | 4      | 1    | format version (1)                      |
//! | 5      | 3    | reserved, zero                          |
//! | 8      | 4    | CRC-32C of the data                     |
//! | 12     | 8    | data length                             |
//! | 20     | 8    | key: inode                              |
//! | 28     | 8    | key: index                              |
//! | 36     | 8    | key: version                            |
//! | 44     | 8    | generation (unique per file written)    |
//! | 52     | 4    | CRC-32C of bytes 0..52                  |
//!
//! Version 2 is version 1 with bytes 5..8 holding the key's home partition
//! plus one (24 bits; see `ChunkKey::home`). A chunk without a home is
//! still written as version 1, byte for byte, so version 2 appears only
//! where a placement policy put a chunk; a reserved byte that is not zero in
//! a version 1 header is refused.
//!
//! The header checksum means a garbled key or length is detected instead of
//! being indexed under a wrong key. A new format gets a new version number and
//! a decoder of its own here; version 1 files must stay readable.
//!
//! Golden files: `tests/golden/chunk-v1.chunk` and `chunk-v2.chunk` were
//! written by this crate, are decoded by the tests below and read back whole
//! by `tests::golden`. They are never edited or regenerated. A new format
//! version must add a new golden file of its own beside them (with tests
//! decoding it), and the old ones stay: they are the proof that old files
//! still read.

use tierpool_types::{Checksum, ChunkKey, InodeId};

pub const MAGIC: [u8; 4] = *b"TPCK";
pub const VERSION_1: u8 = 1;
pub const VERSION_2: u8 = 2;
pub const HEADER_LEN: usize = 56;

/// The decoded header of a chunk file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: ChunkKey,
    /// Generation: files of one key are told apart (newest wins) by it.
    pub gen: u64,
    pub len: u64,
    pub checksum: Checksum,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        match self.key.home {
            None => b[4] = VERSION_1,
            Some(p) => {
                assert!(p <= ChunkKey::MAX_HOME, "home partition {p} does not fit a chunk header");
                b[4] = VERSION_2;
                b[5..8].copy_from_slice(&(p + 1).to_le_bytes()[..3]);
            }
        }
        b[8..12].copy_from_slice(&self.checksum.to_le_bytes());
        b[12..20].copy_from_slice(&self.len.to_le_bytes());
        b[20..28].copy_from_slice(&self.key.inode.0.to_le_bytes());
        b[28..36].copy_from_slice(&self.key.index.to_le_bytes());
        b[36..44].copy_from_slice(&self.key.version.to_le_bytes());
        b[44..52].copy_from_slice(&self.gen.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..52]);
        b[52..56].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header; the error says what is wrong with it.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, String> {
        if b[0..4] != MAGIC {
            return Err("bad magic bytes".into());
        }
        let stored = u32_at(b, 52);
        let crc = crc32c::crc32c(&b[0..52]);
        if stored != crc {
            return Err(format!("header checksum mismatch (stored {stored:08x}, computed {crc:08x})"));
        }
        let home = u32::from_le_bytes([b[5], b[6], b[7], 0]);
        let home = match (b[4], home) {
            (VERSION_1, 0) => None,
            (VERSION_1, _) => return Err("reserved bytes of a version 1 header are not zero".into()),
            (VERSION_2, 0) => return Err("a version 2 header without a home partition".into()),
            (VERSION_2, h) => Some(h - 1),
            (v, _) => return Err(format!("unknown chunk format version {v}")),
        };
        let key = ChunkKey { inode: InodeId(u64_at(b, 20)), index: u64_at(b, 28), version: u64_at(b, 36), home };
        Ok(Header { key, gen: u64_at(b, 44), len: u64_at(b, 12), checksum: u32_at(b, 8) })
    }
}

fn u64_at(b: &[u8; HEADER_LEN], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> Header {
        let key = ChunkKey::hashed(InodeId(7), 3, 9);
        Header { key, gen: 42, len: 4096, checksum: 0xdead_beef }
    }

    #[test]
    fn version_1_layout_is_stable() {
        let b = header().encode();
        assert_eq!(&b[0..5], b"TPCK\x01");
        assert_eq!(&b[8..12], &0xdead_beefu32.to_le_bytes());
        assert_eq!(&b[20..28], &7u64.to_le_bytes());
    }

    #[test]
    fn rejects_unknown_version_and_bad_magic() {
        let mut b = header().encode();
        b[4] = 3;
        let crc = crc32c::crc32c(&b[0..52]);
        b[52..56].copy_from_slice(&crc.to_le_bytes());
        assert!(Header::decode(&b).unwrap_err().contains("version 3"));
        let mut b = header().encode();
        b[0] = b'X';
        assert!(Header::decode(&b).unwrap_err().contains("magic"));
    }

    /// `tests/golden/chunk-v1.chunk`: key 42:3@7, generation 1, 5000 bytes.
    const GOLDEN_V1: &[u8] = include_bytes!("../../tests/golden/chunk-v1.chunk");

    #[test]
    fn decodes_the_golden_version_1_header() {
        let Some(head) = GOLDEN_V1.first_chunk::<HEADER_LEN>() else { panic!("golden file shorter than a header") };
        let want = Header { key: ChunkKey::hashed(InodeId(42), 3, 7), gen: 1, len: 5000, checksum: 0x1e33_c15e };
        assert_eq!(Header::decode(head), Ok(want));
        assert_eq!(&head[0..8], b"TPCK\x01\0\0\0", "magic, version 1, reserved zeros");
        assert_eq!(want.encode(), *head, "encoding version 1 still gives the same bytes");
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        assert_eq!(GOLDEN_V1.len(), HEADER_LEN + 5000);
        assert_eq!(crc32c::crc32c(&data), 0x1e33_c15e, "the header's checksum is that of the data");
    }

    /// `tests/golden/chunk-v2.chunk`: key 42:5@9 placed in partition 300,
    /// generation 2, the 3000 bytes `i * 7 % 253`.
    const GOLDEN_V2: &[u8] = include_bytes!("../../tests/golden/chunk-v2.chunk");

    #[test]
    fn decodes_the_golden_version_2_header() {
        let Some(head) = GOLDEN_V2.first_chunk::<HEADER_LEN>() else { panic!("golden file shorter than a header") };
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 253) as u8).collect();
        let want = Header {
            key: ChunkKey { inode: InodeId(42), index: 5, version: 9, home: Some(300) },
            gen: 2,
            len: 3000,
            checksum: crc32c::crc32c(&data),
        };
        assert_eq!(Header::decode(head), Ok(want));
        assert_eq!(&head[0..8], b"TPCK\x02\x2d\x01\0", "magic, version 2, home 300 + 1");
        assert_eq!(want.encode(), *head, "encoding version 2 still gives the same bytes");
        assert_eq!(&GOLDEN_V2[HEADER_LEN..], &data[..]);
    }

    #[test]
    fn a_version_1_header_with_reserved_bytes_set_is_refused() {
        let mut b = header().encode();
        b[6] = 1;
        let crc = crc32c::crc32c(&b[0..52]);
        b[52..56].copy_from_slice(&crc.to_le_bytes());
        assert!(Header::decode(&b).unwrap_err().contains("reserved"));
    }

    proptest! {
        #[test]
        fn round_trips(
            inode: u64, index: u64, version: u64, home in proptest::option::of(0..=ChunkKey::MAX_HOME),
            gen: u64, len: u64, checksum: u32,
        ) {
            let h = Header { key: ChunkKey { inode: InodeId(inode), index, version, home }, gen, len, checksum };
            prop_assert_eq!(Header::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn detects_any_flipped_header_byte(at in 0usize..HEADER_LEN, bit in 0u8..8) {
            let mut b = header().encode();
            b[at] ^= 1 << bit;
            prop_assert!(Header::decode(&b).is_err());
        }
    }
}
