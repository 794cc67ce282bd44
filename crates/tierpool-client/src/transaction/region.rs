//! Pages of memory regions in a transaction.
//!
//! A region's chunks change in place, so a transaction reads and writes
//! them by page ([`REGION_PAGE`] bytes; the coordinator's rules are in
//! `tierpool_meta::engine::transactions`). A read takes the bytes the
//! workers hold, then asks the coordinator which of those pages a commit
//! wrote since the transaction began and what they held then (in that
//! order: the coordinator keeps a page's earlier bytes from before the
//! commit is written, so whichever the workers gave, the answer mends
//! it). The lookup of a region waits until pages committed before the
//! transaction began are on the workers. Writes stay here, whole pages,
//! each page read as the view has it at its first write, and told to the
//! coordinator in the same request (so a lost conflict is learnt at once); the
//! commit carries them with those earlier bytes (so it reads nothing),
//! and is answered once they are on the workers.
//!
//! A region's size is fixed: a write past its end is refused.

use super::namespace::{shown, Found};
use super::Transaction;
use crate::client::unexpected;
use bytes::Bytes;
use std::collections::BTreeMap;
use tierpool_meta::overlay::{trace, Traced};
use tierpool_meta::{normalize, InodeInfo, InodeKind, TxRegion, REGION_PAGE};
use tierpool_proto::{CoordRequest, CoordResponse, MAX_PAGES_ASKED};
use tierpool_types::{Error, ErrorKind, InodeId, Result};

/// A region as this transaction sees it.
pub(super) struct TxRegionState {
    /// The path it was first reached by (named in its errors).
    path: String,
    /// As the view has it.
    view: InodeInfo,
    /// Pages this transaction wrote, whole.
    pages: BTreeMap<u64, Vec<u8>>,
    /// What the pages it wrote held in its view.
    before: BTreeMap<u64, Bytes>,
}

/// Bytes of page `p` of a region of `size` bytes.
fn page_len(size: u64, p: u64) -> usize {
    (size - p * REGION_PAGE).min(REGION_PAGE) as usize
}

impl Transaction {
    /// The region at `path` as this transaction sees it (looked up once).
    async fn region_at(&mut self, path: &str) -> Result<InodeId> {
        self.ensure_open()?;
        let comps = normalize(path)?;
        if let Traced::Before(q) = trace(&self.steps, &comps)? {
            if let Some(id) = self.region_paths.get(&shown(&q)) {
                return Ok(*id);
            }
        }
        let key = shown(&comps);
        let view = match self.find(&comps).await? {
            Found::Viewed(i) if i.kind == InodeKind::Region => *i,
            Found::Viewed(i) if i.kind == InodeKind::Dir => {
                return Err(Error::new(ErrorKind::IsADirectory, format!("{key}: is a directory")))
            }
            Found::NewDir => return Err(Error::new(ErrorKind::IsADirectory, format!("{key}: is a directory"))),
            Found::Viewed(_) | Found::NewFile(_) => {
                return Err(Error::invalid(format!("{key}: is not a region")));
            }
            Found::Missing(kind) => {
                return Err(Error::new(kind, format!("{key}: no such region in this transaction")));
            }
        };
        let id = view.id;
        let (pages, before) = (BTreeMap::new(), BTreeMap::new());
        self.regions.entry(id).or_insert_with(|| TxRegionState { path: key, view, pages, before });
        if let Traced::Before(q) = trace(&self.steps, &comps)? {
            self.region_paths.insert(shown(&q), id);
        }
        Ok(id)
    }

    /// The size of the region at `path`.
    pub async fn region_size(&mut self, path: &str) -> Result<u64> {
        let id = self.region_at(path).await?;
        Ok(self.regions[&id].view.size)
    }

    /// Up to `len` bytes of the region at `path` from `offset`, as this
    /// transaction sees them (its own writes included).
    pub async fn region_read(&mut self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let id = self.region_at(path).await?;
        let size = self.regions[&id].view.size;
        let end = offset.saturating_add(len).min(size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let (first, last) = (offset / REGION_PAGE, (end - 1) / REGION_PAGE);
        // Pages it wrote are here; only the others are read.
        let viewed = self.unwritten_pages(id, first, last, false).await?;
        let r = &self.regions[&id];
        let mut out = Vec::with_capacity((end - offset) as usize);
        for p in first..=last {
            let page = r.pages.get(&p).or_else(|| viewed.get(&p)).expect("every page read");
            let from = (offset.max(p * REGION_PAGE) - p * REGION_PAGE) as usize;
            let to = (end.min((p + 1) * REGION_PAGE) - p * REGION_PAGE) as usize;
            out.extend_from_slice(&page[from..to]);
        }
        // Abandoned meanwhile: what it read may not be its snapshot's.
        self.ensure_open()?;
        Ok(out)
    }

    /// Writes `data` at `offset` of the region at `path`; it must fit the region.
    pub async fn region_write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        let id = self.region_at(path).await?;
        let size = self.regions[&id].view.size;
        let end = offset.checked_add(data.len() as u64).filter(|e| *e <= size).ok_or_else(|| {
            let key = &self.regions[&id].path;
            Error::invalid(format!("{key}: a write of {} bytes at {offset} ends past the region's {size}", data.len()))
        })?;
        if data.is_empty() {
            return Ok(());
        }
        let (first, last) = (offset / REGION_PAGE, (end - 1) / REGION_PAGE);
        // A page starts as the view has it (kept for the commit, too); the
        // coordinator hears of the write as it is asked for the page.
        let bases = self.unwritten_pages(id, first, last, true).await?;
        let r = self.regions.get_mut(&id).expect("looked up above");
        for (p, base) in bases {
            r.before.insert(p, Bytes::copy_from_slice(&base));
            r.pages.insert(p, base);
        }
        for p in first..=last {
            let page = r.pages.get_mut(&p).expect("every page written is here");
            let (from, to) = (offset.max(p * REGION_PAGE), end.min((p + 1) * REGION_PAGE));
            let src = &data[(from - offset) as usize..(to - offset) as usize];
            page[(from - p * REGION_PAGE) as usize..(to - p * REGION_PAGE) as usize].copy_from_slice(src);
        }
        Ok(())
    }

    /// Those of pages `first..=last` of region `id` this transaction has
    /// not written, as its view has them, a run at a time (see `viewed_pages`).
    async fn unwritten_pages(
        &mut self,
        id: InodeId,
        first: u64,
        last: u64,
        write: bool,
    ) -> Result<BTreeMap<u64, Vec<u8>>> {
        let unwritten: Vec<u64> = (first..=last).filter(|p| !self.regions[&id].pages.contains_key(p)).collect();
        let mut pages = BTreeMap::new();
        for (from, to) in runs(&unwritten) {
            pages.extend(self.viewed_pages(id, from, to, write).await?);
        }
        Ok(pages)
    }

    /// Pages `first..=last` of region `id` as this transaction's view has
    /// them (its own writes left out); with `write`, the coordinator hears
    /// that this transaction writes them (and refuses if it lost them).
    async fn viewed_pages(
        &mut self,
        id: InodeId,
        first: u64,
        last: u64,
        write: bool,
    ) -> Result<BTreeMap<u64, Vec<u8>>> {
        let (path, view) = {
            let r = &self.regions[&id];
            (r.path.clone(), r.view.clone())
        };
        let (start, end) = (first * REGION_PAGE, ((last + 1) * REGION_PAGE).min(view.size));
        // The workers' bytes first, chunk by chunk.
        let cs = view.chunk_size.max(1);
        let mut bytes = Vec::with_capacity((end - start) as usize);
        let mut at = start;
        while at < end {
            let (chunk, off) = (at / cs, at % cs);
            let n = (cs - off).min(end - at);
            bytes.extend_from_slice(&self.client.read_region(&path, &view, chunk, off, n).await?);
            at += n;
        }
        let mut pages: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for p in first..=last {
            let from = ((p - first) * REGION_PAGE) as usize;
            pages.insert(p, bytes[from..from + page_len(view.size, p)].to_vec());
        }
        // Then what pages that a commit wrote since the begin held then.
        let mut p = first;
        while p <= last {
            let count = (last + 1 - p).min(MAX_PAGES_ASKED);
            let (session, tx, named) = (self.session(), self.id, path.clone());
            let req = CoordRequest::TxPages { session, tx, inode: id, path: named, first: p, count, write };
            match self.call(req).await? {
                CoordResponse::Pages(then) => {
                    for (i, b) in then {
                        match pages.get_mut(&i) {
                            Some(page) if page.len() == b.len() => page.copy_from_slice(&b),
                            _ => return Err(Error::internal(format!("{path}: page {i} came back malformed"))),
                        }
                    }
                }
                other => return Err(unexpected(other)),
            }
            p += count;
        }
        Ok(pages)
    }

    /// The region pages this transaction wrote, and what they held in its
    /// view, for its commit.
    pub(super) fn regions_to_commit(&self) -> (Vec<TxRegion>, Vec<TxRegion>) {
        let (mut regions, mut before) = (Vec::new(), Vec::new());
        for (id, r) in self.regions.iter().filter(|(_, r)| !r.pages.is_empty()) {
            let pages = r.pages.iter().map(|(p, b)| (*p, Bytes::copy_from_slice(b))).collect();
            regions.push(TxRegion { inode: *id, pages });
            before.push(TxRegion { inode: *id, pages: r.before.iter().map(|(p, b)| (*p, b.clone())).collect() });
        }
        (regions, before)
    }
}

/// Runs of consecutive numbers in `sorted`: (first, last) each.
fn runs(sorted: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in sorted {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == p => *last = p,
            _ => out.push((p, p)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_of_pages() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[3]), vec![(3, 3)]);
        assert_eq!(runs(&[0, 1, 2, 5, 7, 8]), vec![(0, 2), (5, 5), (7, 8)]);
    }
}
