//! Small files held on the workers, read many to a request: `get_many`
//! groups the files stored whole in one chunk by the worker holding the
//! first copy of each among the nearest (as `read_replicas` ranks them,
//! without asking first which of equally near ones hold it in memory),
//! and asks each worker for its group in one `GetChunks`, a few requests
//! at once.
//!
//! Invariant: this only saves round trips. A chunk that comes back is
//! checked against the length and checksum its file was committed with,
//! and a file whose chunk does not come back so (not served there now,
//! damaged, the worker out of reach, the answer malformed) is read the
//! ordinary way, with its replicas, repairs and errors (a worker leaves a
//! damaged copy for that read to drop and have written again).

use crate::client::Client;
use crate::per_worker::{requests, REQUESTS_AT_ONCE, SMALL_MANY_MAX};
use bytes::Bytes;
use futures::StreamExt;
use tierpool_meta::{InodeInfo, InodeKind};
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{Checksum, ChunkKey, ChunkRef, Result};

/// One request's files: each file's index, its chunk's key and reference.
type Ask = Vec<(usize, ChunkKey, ChunkRef)>;

/// The one chunk a file is stored whole in on the workers, if it is a
/// file read many to a request.
fn whole_chunk(info: &InodeInfo) -> Option<ChunkRef> {
    match (info.kind, info.chunks.as_slice()) {
        (InodeKind::File, [r]) if info.origin.is_none() && info.size <= SMALL_MANY_MAX => {
            let stored = !(r.is_hole() || r.is_inline() || r.is_below());
            (stored && r.len == info.size).then_some(*r)
        }
        _ => None,
    }
}

impl Client {
    /// For each file (its inode as just stat'ed), its bytes if read many
    /// to a request, `None` if it is to be read the ordinary way.
    pub(crate) async fn read_small_many(&self, files: &[&InodeInfo]) -> Vec<Option<Vec<u8>>> {
        let mut out: Vec<Option<Vec<u8>>> = (0..files.len()).map(|_| None).collect();
        let wanted: Vec<(usize, ChunkRef)> =
            files.iter().enumerate().filter_map(|(i, info)| whole_chunk(info).map(|r| (i, r))).collect();
        if wanted.is_empty() {
            return out;
        }
        let Ok(layout) = self.layout().await else { return out };
        let nearest = |(i, r): (usize, ChunkRef)| {
            let key = r.key(files[i].id, 0);
            let w = self.nearest(&layout, key).first().and_then(|class| class.first()).copied();
            w.map(|w| (w, r.len, (i, key, r)))
        };
        let asks = requests(wanted.into_iter().filter_map(nearest));
        let calls = asks.into_iter().map(|(w, ask)| {
            let layout = layout.clone();
            async move {
                let Some(rec) = layout.worker(w) else { return (ask, None) };
                let req = WorkerRequest::GetChunks { keys: ask.iter().map(|(_, k, _)| *k).collect(), mem_only: false };
                let answer = self.worker_pool(w, &rec.addr).call(&req, &[], true).await;
                if let Err(e) = &answer {
                    tracing::debug!("{} small files from worker {w}: {e}; read one by one", ask.len());
                }
                (ask, answer.ok())
            }
        });
        let mut answers = futures::stream::iter(calls).buffer_unordered(REQUESTS_AT_ONCE);
        let mut read = 0;
        while let Some((ask, answer)) = answers.next().await {
            let Some((WorkerResponse::Fetched { chunks }, payload)) = answer else { continue };
            match verified(&ask, &chunks, &payload) {
                Ok(good) => {
                    for (i, data) in good {
                        out[i] = Some(data.to_vec());
                        read += 1;
                    }
                }
                Err(e) => tracing::debug!("{} small files: {e}; read one by one", ask.len()),
            }
        }
        self.inner.read_many.fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        out
    }
}

/// The chunks of `ask` that came back in `chunks` (and `payload`) with
/// the length and checksum their files were committed with, by index; an
/// error if the answer does not fit its payload.
fn verified(ask: &Ask, chunks: &[(ChunkKey, Option<(u64, Checksum)>)], payload: &Bytes) -> Result<Vec<(usize, Bytes)>> {
    let got = tierpool_proto::fetched_bytes(chunks, payload)?;
    let good = ask.iter().zip(got).filter_map(|((i, key, r), (got, stored))| {
        let (data, _) = stored?;
        let matches = got == *key && data.len() as u64 == r.len && crc32c::crc32c(&data) == r.checksum;
        matches.then_some((*i, data))
    });
    Ok(good.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::InodeId;

    fn chunk(version: u64, bytes: &[u8]) -> ChunkRef {
        ChunkRef { version, len: bytes.len() as u64, checksum: crc32c::crc32c(bytes), home: None }
    }

    #[test]
    fn only_chunks_that_match_their_commit_are_taken_and_a_short_answer_is_refused() {
        let (a, b, c, d) = (&b"alpha"[..], &b"bravo!"[..], &b"charlie"[..], &b"delta"[..]);
        let refs = [chunk(1, a), chunk(2, b), chunk(3, c), chunk(4, d), chunk(5, d)];
        let ask: Vec<(usize, ChunkKey, ChunkRef)> =
            refs.iter().enumerate().map(|(i, r)| (i * 10, r.key(InodeId(i as u64 + 1), 0), *r)).collect();
        let sum = |b: &[u8]| crc32c::crc32c(b);
        let chunks = vec![
            (ask[0].1, Some((5, sum(a)))),
            (ask[1].1, None),
            // Damaged on the way: another length's bytes would shift the rest.
            (ask[2].1, Some((7, sum(c)))),
            // Another key's answer is not taken for this one.
            (ask[0].1, Some((5, sum(d)))),
            // Claims more bytes than its chunk has.
            (ask[4].1, Some((50, sum(d)))),
        ];
        let mut payload = Vec::new();
        payload.extend_from_slice(a);
        payload.extend_from_slice(b"charliX");
        payload.extend_from_slice(d);
        let short = Bytes::from(payload.clone());
        let e = verified(&ask, &chunks, &short).unwrap_err();
        assert_eq!(e.message, "chunks run past the payload");
        // The same answer whole: only the chunk that matches its commit.
        payload.extend_from_slice(&[0; 50]);
        let got = verified(&ask, &chunks, &Bytes::from(payload)).unwrap();
        assert_eq!(got, vec![(0, Bytes::from_static(a))]);
        // Every chunk as committed: all taken, each its own bytes.
        let chunks: Vec<_> =
            ask.iter().zip([a, b, c, d, d]).map(|((_, k, _), x)| (*k, Some((x.len() as u64, sum(x))))).collect();
        let payload = Bytes::from([a, b, c, d, d].concat());
        let got = verified(&ask, &chunks, &payload).unwrap();
        let want: Vec<(usize, Bytes)> =
            [a, b, c, d, d].iter().enumerate().map(|(i, x)| (i * 10, Bytes::copy_from_slice(x))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn only_files_stored_whole_in_one_chunk_on_the_workers_are_read_so() {
        let info = crate::test_files::file(InodeId(9), 5, 1 << 22, vec![chunk(3, b"hello")]);
        assert_eq!(whole_chunk(&info), Some(info.chunks[0]));
        let mut two = info.clone();
        two.chunks.push(chunk(4, b"x"));
        assert_eq!(whole_chunk(&two), None, "two chunks");
        let mut short = info.clone();
        short.size = 9;
        assert_eq!(whole_chunk(&short), None, "a hole after its bytes");
        let mut large = info.clone();
        (large.size, large.chunks[0].len) = (SMALL_MANY_MAX + 1, SMALL_MANY_MAX + 1);
        assert_eq!(whole_chunk(&large), None, "past SMALL_MANY_MAX");
        let mut dir = info.clone();
        dir.kind = InodeKind::Dir;
        assert_eq!(whole_chunk(&dir), None);
    }
}
