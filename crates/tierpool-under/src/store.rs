//! `UnderStore`: opening a store, checking it, and looking at what it holds
//! (`walk`, `stat`). Reads and changes are in `io.rs`.
//!
//! A store is an OpenDAL operator rooted at "/" of its namespace plus `base`,
//! the store's directory or prefix as a key prefix ("" or ending in '/');
//! `key` is the only place a store path becomes an operator path. Cloning a
//! store shares the operator (and its connections).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use opendal::{Entry, ErrorKind as O, Metadata, Operator};
use tierpool_types::{Error, ErrorKind, Result};

use crate::connect;
use crate::error::Describe;
use crate::home;
use crate::location::Location;
use crate::options;
use crate::tree::{self, Listed};
use crate::UnderEntry;

/// How many object stats a walk has in flight when a listing lacks ETags.
const WALK_STATS_IN_FLIGHT: usize = 16;

/// One under-store: a directory tree or an object-store prefix.
#[derive(Clone)]
pub struct UnderStore {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for UnderStore {
    /// The URI only: the options may hold secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnderStore").field("uri", &self.inner.uri).finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) uri: String,
    pub(crate) op: Operator,
    /// The store's root as a key prefix: "" or ending in '/'.
    pub(crate) base: String,
    pub(crate) kind: Kind,
    /// HDFS stores: a client for what OpenDAL's service lacks (`hdfs.rs`).
    pub(crate) hdfs: Option<hdfs_native::Client>,
    pub(crate) describe: Describe,
}

/// The kinds of store: the behaviour that differs between them is chosen by
/// this, nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A local (or NFS) directory tree.
    Dir,
    /// Keys of an S3 bucket: no real directories, no renames, ETags.
    S3,
    /// A directory of HDFS: real directories, no ETags (tags as `Dir`).
    Hdfs,
}

impl UnderStore {
    /// Opens the store at `uri` ("file:///abs/dir", "s3://bucket",
    /// "s3://bucket/prefix" or "hdfs://namenode:port/dir") with `options` (keys: [`crate::KEYS`]); missing
    /// s3 options are filled in as [`UnderStore::resolve_options`] does.
    /// Opening does no I/O: [`UnderStore::check`] says whether the store is usable.
    /// Any other scheme, or an unknown option, is `InvalidArgument`.
    pub fn open(uri: &str, options: &BTreeMap<String, String>) -> Result<UnderStore> {
        let resolved = Self::resolve_options(uri, options)?;
        let uri_shown = uri.trim_end_matches('/').to_string();
        let mut hdfs = None;
        let (op, base, describe, kind) = match Location::parse(uri)? {
            Location::Dir(dir) => {
                let op = connect::fs_operator().map_err(|e| connect::build_error(uri, e))?;
                let rel = dir.to_string_lossy().trim_start_matches('/').to_string();
                let describe = Describe { uri: uri_shown.clone(), bucket: None, endpoint: None };
                (op, with_slash(rel), describe, Kind::Dir)
            }
            Location::Hdfs { namenode, dir } => {
                // The HDFS clients keep the runtime current when they are
                // built for their connections' tasks: the home one.
                let _home = home::enter();
                let op = connect::hdfs_operator(&namenode).map_err(|e| connect::build_error(uri, e))?;
                hdfs = Some(connect::hdfs_client(&namenode).map_err(|e| connect::build_error(uri, e))?);
                let endpoint = Some(format!("the NameNode at {namenode}"));
                let describe = Describe { uri: uri_shown.clone(), bucket: None, endpoint };
                (op, with_slash(dir.trim_start_matches('/').to_string()), describe, Kind::Hdfs)
            }
            Location::S3 { bucket, prefix } => {
                let region = resolved.get("region").cloned().unwrap_or_else(|| "us-east-1".into());
                let endpoint = connect::s3_endpoint(&resolved, &region);
                let op = connect::s3_operator(&bucket, &endpoint, &region, &resolved)
                    .map_err(|e| connect::build_error(uri, e))?;
                let describe = Describe { uri: uri_shown.clone(), bucket: Some(bucket), endpoint: Some(endpoint) };
                (op, with_slash(prefix), describe, Kind::S3)
            }
        };
        tracing::debug!(uri = uri_shown, options = ?options::redact(&resolved), "opened under-store");
        Ok(UnderStore { inner: Arc::new(Inner { uri: uri_shown, op, base, kind, hdfs, describe }) })
    }

    /// The options a client needs to reach the store later, filled in from the
    /// environment and the AWS config files where not given (see `options.rs`
    /// for the order). For file: the options unchanged. Unknown keys are
    /// `InvalidArgument` for both schemes.
    pub fn resolve_options(uri: &str, given: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
        options::resolve(uri, given, &options::ProcessSources)
    }

    /// The URI it was opened with (without a trailing '/').
    pub fn uri(&self) -> &str {
        &self.inner.uri
    }

    /// Fails with a clear error if the store cannot be used: directory missing
    /// or not a directory (`NotFound`, `NotADirectory`), bucket missing
    /// (`NotFound`), credentials refused (`Unauthenticated`), endpoint
    /// unreachable (`Unavailable`).
    /// Gives up after 10 s (`Unavailable`).
    pub async fn check(&self) -> Result<()> {
        let s = self.clone();
        home::run(async move { s.check_here().await }).await
    }

    async fn check_here(&self) -> Result<()> {
        match tokio::time::timeout(connect::CHECK_WITHIN, self.check_now()).await {
            Ok(done) => done,
            Err(_) => {
                let whom = self.inner.describe.endpoint.as_deref().map(|e| format!(" from {e}")).unwrap_or_default();
                let secs = connect::CHECK_WITHIN.as_secs();
                Err(Error::new(ErrorKind::Unavailable, format!("{}: no answer{whom} within {secs} s", self.inner.uri)))
            }
        }
    }

    async fn check_now(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.kind != Kind::S3 {
            // Without the trailing '/': OpenDAL reports a file stat'ed as a directory as missing.
            let dir = if inner.base.is_empty() { "/" } else { inner.base.trim_end_matches('/') };
            match inner.op.stat(dir).await {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Error::new(ErrorKind::NotADirectory, format!("{}: not a directory", inner.uri))),
                Err(e) if e.kind() == O::NotFound => {
                    return Err(Error::new(ErrorKind::NotFound, format!("{}: directory does not exist", inner.uri)))
                }
                Err(e) => return Err(inner.describe.error("", &e)),
            }
        }
        inner.first_entries(&inner.base, 1, "").await.map(|_| ())
    }

    /// Every entry below the root, recursively, sorted by path, directories
    /// included (for S3: the common prefixes of keys and empty `dir/` markers).
    pub async fn walk(&self) -> Result<Vec<UnderEntry>> {
        let s = self.clone();
        home::run(async move { s.walk_here().await }).await
    }

    async fn walk_here(&self) -> Result<Vec<UnderEntry>> {
        let inner = &self.inner;
        if inner.kind != Kind::S3 {
            self.check_now().await?;
        }
        let listing =
            inner.op.list_with(&inner.base).recursive(true).await.map_err(|e| inner.describe.error("", &e))?;
        let mut listed = Vec::with_capacity(listing.len());
        let mut missing_tags = Vec::new();
        for entry in listing {
            let (path, meta) = entry.into_parts();
            let Some(rel) = path.strip_prefix(&inner.base) else { continue };
            if !meta.is_dir() && !meta.is_file() {
                continue;
            }
            let item = inner.listed(rel, &meta);
            if inner.kind == Kind::S3 && !item.is_dir && item.etag.is_empty() && !rel.ends_with('/') {
                missing_tags.push(listed.len());
            }
            listed.push(item);
        }
        // Some S3 servers list keys without their ETags: ask for each.
        let tags: Vec<(usize, String)> = futures::stream::iter(missing_tags)
            .map(|i| {
                let path = listed[i].path.clone();
                async move { self.head_etag(&path).await.map(|tag| (i, tag)) }
            })
            .buffer_unordered(WALK_STATS_IN_FLIGHT)
            .try_collect()
            .await?;
        for (i, tag) in tags {
            listed[i].etag = tag;
        }
        Ok(tree::build_tree(listed))
    }

    /// The entry at `path` (`None` if absent, or if a component of it is a file).
    pub async fn stat(&self, path: &str) -> Result<Option<UnderEntry>> {
        let (s, path) = (self.clone(), path.to_owned());
        home::run(async move { s.stat_here(&path).await }).await
    }

    async fn stat_here(&self, path: &str) -> Result<Option<UnderEntry>> {
        let rel = tree::clean(path)?;
        if rel.is_empty() {
            self.check().await?;
            return Ok(Some(dir_entry(rel)));
        }
        if self.inner.kind == Kind::S3 {
            let prefix = format!("{}/", self.inner.key(&rel));
            if !self.inner.first_entries(&prefix, 1, &rel).await?.is_empty() {
                return Ok(Some(dir_entry(rel)));
            }
        }
        self.stat_file(&rel).await
    }

    /// The file at `rel`; in a directory store also a directory.
    ///
    /// S3 finds the object by listing from its key (the key itself sorts
    /// first): some S3-compatible servers answer a HEAD of a key that is a
    /// prefix of others with a server error.
    pub(crate) async fn stat_file(&self, rel: &str) -> Result<Option<UnderEntry>> {
        let inner = &self.inner;
        let key = inner.key(rel);
        if inner.kind == Kind::S3 {
            let first = inner.first_entries(&key, 1, rel).await?;
            let Some(found) = first.into_iter().find(|e| e.path() == key) else { return Ok(None) };
            let mut item = inner.listed(rel, found.metadata());
            if item.etag.is_empty() {
                item.etag = self.head_etag(rel).await?;
            }
            return Ok(Some(tree::entry(item)));
        }
        match inner.op.stat(&key).await {
            Ok(meta) => Ok(Some(tree::entry(inner.listed(rel, &meta)))),
            Err(e) if e.kind() == O::NotFound => Ok(None),
            Err(e) => match inner.describe.error(rel, &e) {
                err if err.kind == ErrorKind::NotADirectory => Ok(None),
                err => Err(err),
            },
        }
    }

    /// The ETag of the S3 object at `rel`, by a HEAD request.
    async fn head_etag(&self, rel: &str) -> Result<String> {
        let inner = &self.inner;
        let meta = inner.op.stat(&inner.key(rel)).await.map_err(|e| inner.describe.error(rel, &e))?;
        Ok(meta.etag().map(tree::s3_tag).unwrap_or_default())
    }
}

impl Inner {
    /// The first `n` entries of a listing of `path` (a prefix), from one
    /// request: `list_with(..).limit(n)` would page through all of them.
    /// Errors name `at`.
    pub(crate) async fn first_entries(&self, path: &str, n: usize, at: &str) -> Result<Vec<Entry>> {
        let lister = self.op.lister_with(path).limit(n).await.map_err(|e| self.describe.error(at, &e))?;
        lister.take(n).try_collect().await.map_err(|e| self.describe.error(at, &e))
    }

    /// The operator path of a store path.
    pub(crate) fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.base)
    }

    /// A listing item for `rel` with the store's kind of tag.
    pub(crate) fn listed(&self, rel: &str, meta: &Metadata) -> Listed {
        let size = if meta.is_dir() { 0 } else { meta.content_length() };
        let mtime_ns = tree::mtime_ns(meta.last_modified());
        let etag = match (meta.is_dir(), self.kind) {
            (true, _) => String::new(),
            (false, Kind::S3) => meta.etag().map(tree::s3_tag).unwrap_or_default(),
            (false, Kind::Dir | Kind::Hdfs) => tree::dir_tag(size, mtime_ns),
        };
        Listed { path: rel.to_string(), is_dir: meta.is_dir(), size, mtime_ns, etag }
    }
}

fn with_slash(rel: String) -> String {
    if rel.is_empty() {
        rel
    } else {
        format!("{rel}/")
    }
}

fn dir_entry(path: String) -> UnderEntry {
    UnderEntry { path, is_dir: true, size: 0, mtime_ns: 0, etag: String::new() }
}
