//! Reading and changing what an under-store holds.
//!
//! Reads given a tag never return bytes of another version: S3 reads send
//! `If-Match` and also compare the ETag of the answer (some S3-compatible
//! servers ignore `If-Match` on GET); directory-store reads compare the tag of
//! a stat before and after reading. A read past the end returns the bytes up
//! to the end: S3 reads first ask for the range as given and, only if the
//! object is shorter, stat it and ask again for what exists. An HDFS read
//! that a DataNode failed to serve is asked again, a few times at most.
//!
//! Writes stream the pieces through an OpenDAL writer that buffers
//! `WRITE_CHUNK` bytes: S3 objects up to that size are one PUT, larger ones a
//! multipart upload of `WRITE_CHUNK` parts, `WRITE_PARTS_IN_FLIGHT` at a time.
//! A failed write aborts the upload (S3); a directory or HDFS store may keep
//! the part written.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use opendal::{ErrorKind as O, Reader};
use tierpool_types::{Error, ErrorKind, Result};

use crate::connect::RETRIES;
use crate::error::datanode_failed;
use crate::home;
use crate::store::{Kind, UnderStore};
use crate::tree;
use crate::UnderEntry;

/// Bytes buffered before a part is sent (S3 needs at least 5 MiB per part).
const WRITE_CHUNK: usize = 8 << 20;
/// Parts of one multipart upload in flight.
const WRITE_PARTS_IN_FLIGHT: usize = 2;
/// The largest range end a request names: S3 servers refuse byte positions
/// beyond `i64::MAX`.
const MAX_END: u64 = i64::MAX as u64;
/// The first pause before a failed HDFS read is asked again.
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
/// Objects copied at once by an S3 directory rename.
const RENAME_COPIES_IN_FLIGHT: usize = 8;

impl UnderStore {
    /// `len` bytes of the file at `path` from `offset` (fewer at its end, none
    /// past it). If `etag` is given and the file's current tag differs, or
    /// the file is gone, fails with `Stale`; without a tag a missing file is
    /// `NotFound`.
    pub async fn read(&self, path: &str, offset: u64, len: u64, etag: Option<&str>) -> Result<Bytes> {
        let (s, path, etag) = (self.clone(), path.to_owned(), etag.map(str::to_owned));
        home::run(async move { s.read_here(&path, offset, len, etag.as_deref()).await }).await
    }

    async fn read_here(&self, path: &str, offset: u64, len: u64, etag: Option<&str>) -> Result<Bytes> {
        let rel = tree::clean(path)?;
        if rel.is_empty() {
            return Err(Error::new(ErrorKind::IsADirectory, format!("{}: is a directory", self.inner.uri)));
        }
        if self.inner.kind == Kind::S3 && len > 0 && offset < MAX_END {
            let end = offset.saturating_add(len).min(MAX_END);
            match self.read_s3(&rel, offset, end, etag).await {
                Err(e) if is_short(&e) => {}
                other => return self.s3_outcome(&rel, etag, other),
            }
        }
        let Some(found) = self.stat_file(&rel).await? else {
            return Err(self.gone(&rel, etag));
        };
        if found.is_dir {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{}: is a directory", self.inner.describe.at(&rel)),
            ));
        }
        self.check_tag(&rel, etag, &found.etag)?;
        let end = offset.saturating_add(len).min(found.size);
        if offset >= end {
            return Ok(Bytes::new());
        }
        if self.inner.kind == Kind::S3 {
            let outcome = self.read_s3(&rel, offset, end, Some(&found.etag)).await;
            return self.s3_outcome(&rel, Some(&found.etag), outcome);
        }
        let read = self.read_range(&rel, offset..end).await;
        if etag.is_some() {
            // Changed while read (or cut short by a change): that is the error to report.
            let now = self.stat_file(&rel).await?.ok_or_else(|| self.gone(&rel, etag))?;
            self.check_tag(&rel, etag, &now.etag)?;
        }
        read.map(|buf| buf.to_bytes()).map_err(|e| self.read_error(&rel, etag, &e))
    }

    /// One ranged read of a directory or HDFS store. On HDFS, a read that
    /// a DataNode failed to serve (refused, reset, cut short) is asked again,
    /// [`RETRIES`] times at most after a pause that doubles from
    /// [`RETRY_PAUSE`]: HDFS's client tries each DataNode holding the block
    /// once, and a DataNode under load can fail a read it serves a moment
    /// later. Reads change nothing, so asking again is safe.
    async fn read_range(&self, rel: &str, range: std::ops::Range<u64>) -> opendal::Result<opendal::Buffer> {
        let key = self.inner.key(rel);
        let mut pause = RETRY_PAUSE;
        for _ in 0..RETRIES {
            match self.inner.op.read_with(&key).range(range.clone()).await {
                Err(e) if self.inner.kind == Kind::Hdfs && datanode_failed(&e) => {
                    tracing::debug!("{}: read again in {pause:?}: {e}", self.inner.describe.at(rel));
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => return other,
            }
        }
        self.inner.op.read_with(&key).range(range).await
    }

    /// One ranged GET, conditional on `etag`; checks the ETag of the answer too.
    async fn read_s3(&self, rel: &str, offset: u64, end: u64, etag: Option<&str>) -> opendal::Result<ReadOrStale> {
        let key = self.inner.key(rel);
        let mut reader = self.inner.op.reader_with(&key);
        if let Some(tag) = etag {
            reader = reader.if_match(&format!("\"{tag}\""));
        }
        let reader: Reader = reader.await?;
        let buf = reader.read(offset..end).await?;
        let answered = reader.metadata().and_then(|m| m.etag()).map(tree::s3_tag);
        match (etag, answered) {
            (Some(want), Some(got)) if want != got => Ok(ReadOrStale::Stale(got)),
            _ => Ok(ReadOrStale::Read(buf.to_bytes())),
        }
    }

    fn s3_outcome(&self, rel: &str, etag: Option<&str>, outcome: opendal::Result<ReadOrStale>) -> Result<Bytes> {
        match outcome {
            Ok(ReadOrStale::Read(bytes)) => Ok(bytes),
            Ok(ReadOrStale::Stale(now)) => Err(self.stale(rel, etag.unwrap_or_default(), Some(&now))),
            Err(e) => Err(self.read_error(rel, etag, &e)),
        }
    }

    fn read_error(&self, rel: &str, etag: Option<&str>, e: &opendal::Error) -> Error {
        match (e.kind(), etag) {
            (O::NotFound, Some(_)) => self.gone(rel, etag),
            (O::ConditionNotMatch, Some(want)) => self.stale(rel, want, None),
            _ => self.inner.describe.error(rel, e),
        }
    }

    fn check_tag(&self, rel: &str, etag: Option<&str>, now: &str) -> Result<()> {
        match etag {
            Some(want) if want != now => Err(self.stale(rel, want, Some(now))),
            _ => Ok(()),
        }
    }

    fn stale(&self, rel: &str, want: &str, now: Option<&str>) -> Error {
        let now = now.map(|n| format!(", now {n}")).unwrap_or_default();
        let at = self.inner.describe.at(rel);
        Error::new(ErrorKind::Stale, format!("{at}: changed in the under-store (was version {want}{now})"))
    }

    fn gone(&self, rel: &str, etag: Option<&str>) -> Error {
        let at = self.inner.describe.at(rel);
        match etag {
            Some(_) => Error::new(ErrorKind::Stale, format!("{at}: removed from the under-store")),
            None => Error::new(ErrorKind::NotFound, format!("{at}: no such file")),
        }
    }

    /// Writes the whole file at `path` from `pieces` in order, creating
    /// parent directories in a directory store, and returns its entry as
    /// stored afterwards.
    pub async fn write(&self, path: &str, pieces: Vec<Bytes>) -> Result<UnderEntry> {
        let (s, path) = (self.clone(), path.to_owned());
        home::run(async move { s.write_here(&path, pieces).await }).await
    }

    async fn write_here(&self, path: &str, pieces: Vec<Bytes>) -> Result<UnderEntry> {
        let rel = tree::clean(path)?;
        if rel.is_empty() {
            return Err(Error::invalid(format!("{}: cannot write the root of the store", self.inner.uri)));
        }
        let (op, err) = (&self.inner.op, |e: &opendal::Error| self.inner.describe.error(&rel, e));
        let key = self.inner.key(&rel);
        let mut writer =
            op.writer_with(&key).chunk(WRITE_CHUNK).concurrent(WRITE_PARTS_IN_FLIGHT).await.map_err(|e| err(&e))?;
        for piece in pieces {
            if let Err(e) = writer.write(piece).await {
                let _ = writer.abort().await;
                return Err(err(&e));
            }
        }
        if let Err(e) = writer.close().await {
            let _ = writer.abort().await;
            return Err(err(&e));
        }
        self.stat_file(&rel).await?.filter(|e| !e.is_dir).ok_or_else(|| {
            Error::new(ErrorKind::Lost, format!("{}: gone right after it was written", self.inner.describe.at(&rel)))
        })
    }

    /// Removes the file, or the empty directory (`recursive`: the tree).
    /// Absent is Ok. The root cannot be removed.
    pub async fn delete(&self, path: &str, recursive: bool) -> Result<()> {
        let (s, path) = (self.clone(), path.to_owned());
        home::run(async move { s.delete_here(&path, recursive).await }).await
    }

    async fn delete_here(&self, path: &str, recursive: bool) -> Result<()> {
        let rel = tree::clean(path)?;
        if rel.is_empty() {
            return Err(Error::invalid(format!("{}: refusing to delete the root of the store", self.inner.uri)));
        }
        let (op, err) = (&self.inner.op, |e: &opendal::Error| self.inner.describe.error(&rel, e));
        let key = self.inner.key(&rel);
        let Some(found) = self.stat(&rel).await? else { return Ok(()) };
        if !found.is_dir {
            return op.delete(&key).await.map_err(|e| err(&e));
        }
        let dir = format!("{key}/");
        if recursive {
            return op.delete_with(&dir).recursive(true).await.map_err(|e| err(&e));
        }
        if self.inner.kind == Kind::Hdfs {
            return self.hdfs_delete_empty_dir(&rel).await;
        }
        if self.inner.kind == Kind::S3 {
            let below = self.inner.first_entries(&dir, 2, &rel).await?;
            if below.iter().any(|e| e.path() != dir) {
                let at = self.inner.describe.at(&rel);
                return Err(Error::new(ErrorKind::DirectoryNotEmpty, format!("{at}: directory not empty")));
            }
        }
        op.delete(&dir).await.map_err(|e| err(&e))
    }

    /// Creates a directory and its parents (S3: a "path/" marker object).
    /// Existing is Ok; a file there is `AlreadyExists`.
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let (s, path) = (self.clone(), path.to_owned());
        home::run(async move { s.mkdir_here(&path).await }).await
    }

    async fn mkdir_here(&self, path: &str) -> Result<()> {
        let rel = tree::clean(path)?;
        if rel.is_empty() {
            return Ok(());
        }
        match self.stat(&rel).await? {
            Some(e) if e.is_dir => return Ok(()),
            Some(_) => {
                let at = self.inner.describe.at(&rel);
                return Err(Error::new(ErrorKind::AlreadyExists, format!("{at}: a file is there")));
            }
            None => {}
        }
        let dir = format!("{}/", self.inner.key(&rel));
        self.inner.op.create_dir(&dir).await.map_err(|e| self.inner.describe.error(&rel, &e))
    }

    /// Renames a file or a directory tree; a file at `to` is replaced.
    /// Directory and HDFS stores: one atomic rename (a non-empty directory at
    /// `to` is an error). S3: copy then delete, object by object; objects already at
    /// `to/...` stay unless replaced.
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (s, from, to) = (self.clone(), from.to_owned(), to.to_owned());
        home::run(async move { s.rename_here(&from, &to).await }).await
    }

    async fn rename_here(&self, from: &str, to: &str) -> Result<()> {
        let (from, to) = (tree::clean(from)?, tree::clean(to)?);
        if from.is_empty() || to.is_empty() {
            return Err(Error::invalid(format!("{}: cannot rename the root of the store", self.inner.uri)));
        }
        if from == to {
            return Ok(());
        }
        if to.starts_with(&format!("{from}/")) {
            return Err(Error::invalid(format!("{}: cannot move {from:?} into itself", self.inner.uri)));
        }
        let Some(found) = self.stat(&from).await? else {
            let at = self.inner.describe.at(&from);
            return Err(Error::new(ErrorKind::NotFound, format!("{at}: no such file or directory")));
        };
        let (op, inner) = (&self.inner.op, &self.inner);
        let (from_key, to_key) = (inner.key(&from), inner.key(&to));
        match inner.kind {
            Kind::Dir => return op.rename(&from_key, &to_key).await.map_err(|e| inner.describe.error(&from, &e)),
            Kind::Hdfs => return self.hdfs_rename(&from, &to).await,
            Kind::S3 => {}
        }
        if !found.is_dir {
            op.copy(&from_key, &to_key).await.map_err(|e| inner.describe.error(&from, &e))?;
            return op.delete(&from_key).await.map_err(|e| inner.describe.error(&from, &e));
        }
        let from_dir = format!("{from_key}/");
        let listing = op.list_with(&from_dir).recursive(true).await.map_err(|e| inner.describe.error(&from, &e))?;
        futures::stream::iter(listing)
            .map(|entry| {
                let rest = entry.path().strip_prefix(&from_dir).unwrap_or_default().to_string();
                let (source, target) = (entry.path().to_string(), format!("{to_key}/{rest}"));
                async move {
                    let done = if source.ends_with('/') {
                        op.create_dir(&target).await
                    } else {
                        op.copy(&source, &target).await.map(|_| ())
                    };
                    done.map_err(|e| inner.describe.error(source.strip_prefix(&inner.base).unwrap_or(&source), &e))
                }
            })
            .buffer_unordered(RENAME_COPIES_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        op.delete_with(&from_dir).recursive(true).await.map_err(|e| inner.describe.error(&from, &e))
    }
}

/// What a conditional S3 read found: the bytes, or another version's ETag.
enum ReadOrStale {
    Read(Bytes),
    Stale(String),
}

/// The requested range runs past the end of the object: the server says so,
/// or OpenDAL's completeness check got fewer bytes than asked ("reader got
/// too little data" in 0.59; `ranged_reads_are_byte_exact` covers it).
fn is_short(e: &opendal::Error) -> bool {
    e.kind() == O::RangeNotSatisfied || (e.kind() == O::Unexpected && e.message().contains("got too little data"))
}
