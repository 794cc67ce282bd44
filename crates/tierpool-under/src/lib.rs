//! The pool's under-stores: the durable stores below the pool, a directory
//! tree (`file:///abs/dir`), the keys of an S3 bucket below a prefix
//! (`s3://bucket/prefix`) or a directory of HDFS
//! (`hdfs://namenode:port/dir`), reached through OpenDAL.
//!
//! An [`UnderStore`] names everything by a path relative to its root,
//! '/'-separated, with no leading or trailing '/' ("" is the root). Every
//! error is a `tierpool_types::Error` whose one-line message starts with the
//! store's URI and the path (`error.rs` maps OpenDAL's errors, once).
//!
//! Versions: every file has a tag ([`UnderEntry::etag`]): the S3 ETag, or
//! "{size}-{mtime_ns}" in a directory or HDFS store (HDFS times are in
//! milliseconds). A read given a tag fails with
//! `Stale` instead of returning bytes of another version. In a directory store
//! the tag is only as fine as the file system's timestamps: two same-size
//! writes within one timestamp tick (a few milliseconds on Linux) share a tag.
//!
//! What the kinds of store do differently (HDFS behaves as a directory
//! store except where said; `hdfs.rs` has what it does beside OpenDAL):
//! - directories: S3 has none, only keys; a directory there is a common prefix
//!   of keys or an empty `dir/` marker object (`mkdir` writes one). If an
//!   object and keys below it share a name, the directory wins.
//! - writes: S3 objects appear whole when written (multipart above 8 MiB);
//!   a directory store writes the file in place, so a reader of the file
//!   during a `write` may see part of it.
//! - renames: atomic in a directory store and in HDFS; in S3 a copy then a
//!   delete of each object, so a failure part-way leaves some objects at
//!   both names.
//! - a directory store lists regular files and directories only (symbolic
//!   links and special files are skipped).
//!
//! Options: see [`UnderStore::resolve_options`] and `options.rs`.

mod aws_files;
mod connect;
mod error;
mod hdfs;
mod home;
mod io;
mod location;
mod options;
mod store;
mod tree;

pub use options::{redact, KEYS};
pub use store::UnderStore;

/// One file or directory of an under-store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnderEntry {
    /// Relative to the store's root, '/'-separated, no leading or trailing '/'.
    pub path: String,
    pub is_dir: bool,
    /// Bytes of a file; 0 for directories.
    pub size: u64,
    /// Last modification, nanoseconds since the Unix epoch (0 if the store has none).
    pub mtime_ns: u64,
    /// The store's version tag of the object (S3 ETag without quotes; for a directory
    /// store: "{size}-{mtime_ns}"); "" for directories.
    pub etag: String,
}
