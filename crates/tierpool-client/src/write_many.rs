//! Small files stored on the workers, written many to a request: `put_many`
//! makes a writer for each file (as `put_bytes` would: its id, lease and
//! placement), takes its one chunk as that writer would store it, and
//! sends every worker that is to hold a copy of some of them its share in
//! `PutChunks` requests (`per_worker.rs`), a few at once. The files are then
//! closed together, so their commits share requests too.
//!
//! Invariant: this only saves round trips. A file is committed as stored
//! only once every worker that is to hold a copy of its chunk (one at
//! least) said it stored it; any other chunk (refused, moved, the worker
//! full or out of reach, no answer) is stored by its writer the ordinary
//! way, under the same key, with its retries, waits for room and errors,
//! before the commit. A chunk stored twice is the same bytes under the
//! same key.

use crate::batch::IN_FLIGHT;
use crate::client::Client;
use crate::per_worker::{put_chunks, requests, REQUESTS_AT_ONCE};
use crate::write::{FileWriter, PutOptions, WholeChunk};
use bytes::Bytes;
use futures::StreamExt;
use std::collections::BTreeMap;
use tierpool_meta::InodeInfo;
use tierpool_proto::Layout;
use tierpool_types::{Checksum, ChunkAttrs, ChunkKey, InodeId, Result, WorkerId};

/// A chunk as one `PutChunks` carries it.
type Chunk = (ChunkKey, Checksum, Bytes);

/// Whether a chunk that `n` workers stored, of the `of` that are to hold
/// a copy, is stored: by all of them, and by one at least.
fn all_stored((n, of): (usize, usize)) -> bool {
    of > 0 && n == of
}

impl Client {
    /// Writes each `(path, bytes)` (at most a chunk each) as `put_bytes`
    /// would without offering it to the metadata to keep inline, their
    /// chunks many to a request: one result per item, in order.
    pub(crate) async fn put_small_many(
        &self,
        items: Vec<(String, Bytes)>,
        opts: &PutOptions,
    ) -> Vec<Result<InodeInfo>> {
        let mut out: Vec<Option<Result<InodeInfo>>> = (0..items.len()).map(|_| None).collect();
        let starts = items.into_iter().enumerate().map(|(i, (path, data))| async move {
            let started = async {
                let mut writer = self.create(&path, opts).await?;
                writer.inline = false;
                match writer.whole_chunk(data).await {
                    Ok(chunk) => Ok((writer, chunk)),
                    Err(e) => {
                        writer.abort().await;
                        Err(e)
                    }
                }
            };
            (i, started.await)
        });
        let started: Vec<(usize, Result<(FileWriter, WholeChunk)>)> =
            futures::stream::iter(starts).buffered(IN_FLIGHT).collect().await;
        let mut files = Vec::with_capacity(started.len());
        for (i, r) in started {
            match r {
                Ok(file) => files.push((i, file)),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        let stored = self.store_many(files.iter().map(|(_, (_, c))| c), opts.attrs).await;
        let mut written = 0;
        let closes: Vec<_> = (files.into_iter())
            .map(|(i, (mut writer, chunk))| {
                let done = stored.get(&chunk.key.inode).is_some_and(|s| all_stored(*s));
                written += u64::from(done);
                async move {
                    let stored = match done {
                        true => {
                            writer.stored(&chunk);
                            Ok(())
                        }
                        false => writer.unstored(chunk).await,
                    };
                    let r = match stored {
                        Ok(()) => writer.close().await,
                        Err(e) => {
                            writer.abort().await;
                            Err(e)
                        }
                    };
                    (i, r)
                }
            })
            .collect();
        let closed: Vec<(usize, Result<InodeInfo>)> =
            futures::stream::iter(closes).buffer_unordered(IN_FLIGHT).collect().await;
        self.inner.write_many.fetch_add(written, std::sync::atomic::Ordering::Relaxed);
        for (i, r) in closed {
            out[i] = Some(r);
        }
        out.into_iter().map(|r| r.expect("every item has a result")).collect()
    }

    /// Sends each worker the `chunks` (all with `attrs`) it is to hold a
    /// copy of, many to a request: per inode, how many workers stored its
    /// chunk, of how many that are to.
    async fn store_many<'a>(
        &self,
        chunks: impl Iterator<Item = &'a WholeChunk>,
        attrs: ChunkAttrs,
    ) -> BTreeMap<InodeId, (usize, usize)> {
        let mut stored = BTreeMap::new();
        let Ok(layout) = self.layout().await else { return stored };
        let mut items = Vec::new();
        for c in chunks {
            let targets = layout.table.write_targets(c.key, c.copies);
            stored.insert(c.key.inode, (0, targets.len()));
            for w in targets {
                items.push((w, c.data.len() as u64, (c.key, c.checksum, c.data.clone())));
            }
        }
        let calls = requests(items).into_iter().map(|(w, chunks)| {
            let (c, layout) = (self.clone(), layout.clone());
            async move {
                let answer = c.put_chunks(&layout, w, &chunks, attrs).await;
                (chunks.into_iter().map(|(key, _, _)| key.inode).collect::<Vec<_>>(), answer)
            }
        });
        let mut answers = futures::stream::iter(calls).buffer_unordered(REQUESTS_AT_ONCE);
        while let Some((inodes, answer)) = answers.next().await {
            for (inode, ok) in inodes.into_iter().zip(answer.unwrap_or_default()) {
                if let (true, Some((n, _))) = (ok, stored.get_mut(&inode)) {
                    *n += 1;
                }
            }
        }
        stored
    }

    /// One `PutChunks` of `chunks` to worker `w`: whether each is stored,
    /// `None` if the request failed as a whole.
    async fn put_chunks(&self, layout: &Layout, w: WorkerId, chunks: &[Chunk], attrs: ChunkAttrs) -> Option<Vec<bool>> {
        let rec = layout.worker(w)?;
        let chunks: Vec<_> = chunks.iter().map(|(key, sum, data)| (*key, *sum, data)).collect();
        match put_chunks(&self.worker_pool(w, &rec.addr), &chunks, attrs, layout.version).await {
            Ok(stored) => Some(stored),
            Err(e) => {
                tracing::debug!("{} small files to worker {w}: {e}; written one by one", chunks.len());
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chunk_is_stored_only_where_every_copy_is_and_one_at_least() {
        use super::all_stored;
        assert!(all_stored((1, 1)) && all_stored((2, 2)));
        assert!(!all_stored((1, 2)), "one copy of two");
        assert!(!all_stored((0, 0)), "no worker to hold it");
    }
}
