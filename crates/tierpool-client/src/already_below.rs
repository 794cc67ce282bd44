//! Whether a file's bytes are below already, though the pool never
//! recorded them there: a write to the under-store that finished just
//! before a crash kept `Persisted` from being logged. Writing them again
//! would be harmless (the object ends the same) but not exactly once, so
//! the write-back and `sync` look first and only record what is there.

use tierpool_meta::{InodeInfo, Origin};
use tierpool_types::Result;
use tierpool_under::{UnderEntry, UnderStore};

/// The object of file `info` (at `origin`'s key), if it holds exactly the
/// file's bytes and is not the object the pool last recorded. The file's
/// chunk checksums decide, so only a file whose every chunk the pool holds
/// (stored, inline or a hole) is compared; the object is read only when its
/// size is the file's and it changed since it was last recorded.
pub(crate) async fn already_below(store: &UnderStore, origin: &Origin, info: &InodeInfo) -> Result<Option<UnderEntry>> {
    if info.chunks.iter().any(|r| r.is_below()) || info.chunk_size == 0 {
        return Ok(None);
    }
    let Some(e) = store.stat(&origin.key).await? else { return Ok(None) };
    if e.is_dir || e.size != info.size || origin.same_object(e.size, e.mtime_ns, &e.etag) {
        return Ok(None);
    }
    let bytes = store.read(&origin.key, 0, e.size, Some(&e.etag)).await?;
    Ok(holds(&bytes, info).then_some(e))
}

/// Whether `bytes` are the file `info`'s, chunk by chunk: each chunk's
/// stored bytes (their CRC-32C), then zeros to the end of its share.
fn holds(bytes: &[u8], info: &InodeInfo) -> bool {
    let cs = info.chunk_size as usize;
    if bytes.len() as u64 != info.size || info.chunks.len() != bytes.len().div_ceil(cs) {
        return false;
    }
    info.chunks.iter().zip(bytes.chunks(cs)).all(|(r, piece)| {
        let n = r.len as usize;
        n <= piece.len() && crc32c::crc32c(&piece[..n]) == r.checksum && piece[n..].iter().all(|b| *b == 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::{ChunkRef, InodeId};

    /// A file of chunks of 4 bytes.
    fn file(size: u64, chunks: Vec<ChunkRef>) -> InodeInfo {
        crate::test_files::file(InodeId(3), size, 4, chunks)
    }

    fn stored(data: &[u8]) -> ChunkRef {
        ChunkRef { version: 9, len: data.len() as u64, checksum: crc32c::crc32c(data), home: None }
    }

    #[test]
    fn bytes_match_chunk_by_chunk_with_holes_and_short_chunks() {
        let f = file(10, vec![stored(b"abcd"), ChunkRef::HOLE, stored(b"xy")]);
        assert!(holds(b"abcd\0\0\0\0xy", &f));
        assert!(!holds(b"abcd\0\0\0\0xz", &f), "another byte");
        assert!(!holds(b"abcd\0\0\x01\0xy", &f), "a hole that is not zeros");
        assert!(!holds(b"abcd\0\0\0\0x", &f), "shorter");
        // A chunk stored short of its share reads as zeros past its bytes.
        let short = file(8, vec![stored(b"ab"), stored(b"cdef")]);
        assert!(holds(b"ab\0\0cdef", &short));
        assert!(!holds(b"abz\0cdef", &short));
        assert!(holds(b"", &file(0, vec![])));
        let inline = file(3, vec![ChunkRef::inline(b"hey")]);
        assert!(holds(b"hey", &inline) && !holds(b"hez", &inline));
    }
}
