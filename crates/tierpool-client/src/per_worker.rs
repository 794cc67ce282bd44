//! Requests of many small chunks to each worker: how `get_many` and
//! `put_many` (`read_many.rs`, `write_many.rs`) cut their chunks into
//! `GetChunks` and `PutChunks`.

use crate::client::{unexpected, WorkerPool};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use tierpool_proto::{WorkerRequest, WorkerResponse};
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, Result, WorkerId};

/// Files at most this large (and of one chunk) are stored and read many
/// to a request.
pub(crate) const SMALL_MANY_MAX: u64 = 1 << 20;
/// Chunks one request carries at most.
pub(crate) const REQUEST_CHUNKS: usize = 64;
/// Bytes one request carries at most (a chunk alone may be larger).
pub(crate) const REQUEST_BYTES: u64 = 8 << 20;
/// Requests of one batch in flight at once (other calls of the client to
/// the same workers keep connections to go on with).
pub(crate) const REQUESTS_AT_ONCE: usize = 8;

/// `items`, each for a worker and of so many bytes, cut into requests:
/// per worker, in the order given, at most [`REQUEST_CHUNKS`] items and
/// [`REQUEST_BYTES`] bytes each (an item alone may be larger).
pub(crate) fn requests<T>(items: impl IntoIterator<Item = (WorkerId, u64, T)>) -> Vec<(WorkerId, Vec<T>)> {
    let mut per: BTreeMap<WorkerId, Vec<(u64, Vec<T>)>> = BTreeMap::new();
    for (w, bytes, item) in items {
        let requests = per.entry(w).or_default();
        match requests.last_mut() {
            Some((b, r)) if r.len() < REQUEST_CHUNKS && *b + bytes <= REQUEST_BYTES => {
                *b += bytes;
                r.push(item);
            }
            _ => requests.push((bytes, vec![item])),
        }
    }
    per.into_iter().flat_map(|(w, rs)| rs.into_iter().map(move |(_, r)| (w, r))).collect()
}

/// One `PutChunks` of `chunks` (each key, checksum and bytes; all with
/// `attrs`, chosen by the table of version `table`) to the worker `pool`
/// reaches: whether each was stored, in order. An answer of another shape
/// is an error.
pub(crate) async fn put_chunks(
    pool: &WorkerPool,
    chunks: &[(ChunkKey, Checksum, &Bytes)],
    attrs: ChunkAttrs,
    table: u64,
) -> Result<Vec<bool>> {
    let mut payload = BytesMut::with_capacity(chunks.iter().map(|(_, _, d)| d.len()).sum());
    for (_, _, data) in chunks {
        payload.extend_from_slice(data);
    }
    let list = chunks.iter().map(|(key, sum, data)| (*key, *sum, data.len() as u64)).collect();
    match pool.call(&WorkerRequest::PutChunks { chunks: list, attrs, table }, &payload, true).await? {
        (WorkerResponse::Stored(s), _) if s.len() == chunks.len() => Ok(s),
        (other, _) => Err(unexpected(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_each_workers_items_in_order_within_both_limits() {
        let (a, b) = (WorkerId(1), WorkerId(2));
        let mut items = Vec::new();
        for i in 0..150u64 {
            items.push((if i % 3 == 0 { b } else { a }, 1000, i));
        }
        // Large ones: two fill a request by bytes; one past the limit goes alone.
        items.extend([(a, 5 << 20, 1000), (a, 5 << 20, 1001), (a, 9 << 20, 1002), (a, 1, 1003)]);
        let got = requests(items);
        let of = |w: WorkerId| got.iter().filter(|(x, _)| *x == w).map(|(_, r)| r.clone()).collect::<Vec<_>>();
        let a_small: Vec<u64> = (0..150).filter(|i| i % 3 != 0).collect();
        let b_small: Vec<u64> = (0..150).filter(|i| i % 3 == 0).collect();
        assert_eq!(of(b), vec![b_small[..50].to_vec()]);
        assert_eq!(
            of(a),
            vec![a_small[..64].to_vec(), [&a_small[64..], &[1000][..]].concat(), vec![1001], vec![1002], vec![1003]]
        );
    }
}
