//! Requests of many small chunks to each worker: how `get_many` and
//! `put_many` (`read_many.rs`, `write_many.rs`) cut their chunks into
//! `GetChunks` and `PutChunks`.

use std::collections::BTreeMap;
use tierpool_types::WorkerId;

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
