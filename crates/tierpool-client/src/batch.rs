//! Many small files in one call: `put_many` and `get_many` keep up to
//! [`IN_FLIGHT`] files moving at once over the client's shared connections,
//! so a caller with many small objects (fsspec's `pipe` and `cat` of many
//! paths, a spill of many keys) pays for round trips in parallel rather than
//! one after another. Each item succeeds or fails on its own: the results
//! come back one per item, in the order given, and a failure in the middle
//! neither stops nor undoes the others.

use crate::client::Client;
use crate::write::PutOptions;
use bytes::Bytes;
use std::future::Future;
use tierpool_meta::InodeInfo;
use tierpool_types::{Error, Result};
use tokio::task::JoinSet;

/// Files a batch works on at once.
pub const IN_FLIGHT: usize = 64;

impl Client {
    /// Writes each `(path, bytes)` as `put_bytes` does, several at once:
    /// one result per item, in the order given.
    pub async fn put_many(&self, items: Vec<(String, Bytes)>, opts: &PutOptions) -> Vec<Result<InodeInfo>> {
        let (c, opts) = (self.clone(), opts.clone());
        each(items, move |(path, data)| {
            let (c, opts) = (c.clone(), opts.clone());
            async move { c.put_bytes(&path, data, &opts).await }
        })
        .await
    }

    /// The whole content of each of `paths`, as `get_bytes` reads it,
    /// several at once: one result per path, in the order given.
    pub async fn get_many(&self, paths: Vec<String>) -> Vec<Result<Vec<u8>>> {
        let c = self.clone();
        each(paths, move |path| {
            let c = c.clone();
            async move { c.get_bytes(&path).await }
        })
        .await
    }
}

/// Runs `work` on every item, up to [`IN_FLIGHT`] at once; the results in
/// the items' order.
async fn each<I, T, F, Fut>(items: Vec<I>, work: F) -> Vec<Result<T>>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let n = items.len();
    let mut out: Vec<Option<Result<T>>> = (0..n).map(|_| None).collect();
    let mut tasks = JoinSet::new();
    let mut items = items.into_iter().enumerate();
    loop {
        while tasks.len() < IN_FLIGHT {
            let Some((i, item)) = items.next() else { break };
            let fut = work(item);
            tasks.spawn(async move { (i, fut.await) });
        }
        match tasks.join_next().await {
            Some(Ok((i, r))) => out[i] = Some(r),
            // A task that panicked: its item is reported below.
            Some(Err(e)) => tracing::error!("a batch item's task failed: {e}"),
            None => break,
        }
    }
    (out.into_iter()).map(|r| r.unwrap_or_else(|| Err(Error::internal("the task of this item failed")))).collect()
}
