//! Real servers for tests, and the conformance suite of every store.
//!
//! S3: s3s-fs, started per test on a free loopback port over a fresh
//! temporary directory, stopped when dropped. HDFS: Hadoop's minicluster,
//! one per test process, a directory per test (see `hdfs_server.rs`).
//!
//! Both self-contained (std and tempfile only): copy `s3_server.rs` or
//! `hdfs_server.rs` into another crate's `tests/common/` to use it there.
//! The S3 binary comes from `TIERPOOL_S3S_FS`, the HDFS jars from
//! `TIERPOOL_HDFS_LIB` (scripts/test.sh sets both), else from
//! `scripts/s3-server.sh` / `scripts/hdfs-server.sh`, which install them
//! once; the tests never skip.
//!
//! s3s-fs keeps each bucket as a subdirectory of its root and each object as
//! a file; `create_bucket` makes the subdirectory.

#![allow(dead_code)]

pub mod hdfs_server;
pub mod s3_server;
pub mod suite;

#[allow(unused_imports)]
pub use hdfs_server::HdfsServer;
#[allow(unused_imports)]
pub use s3_server::S3Server;
