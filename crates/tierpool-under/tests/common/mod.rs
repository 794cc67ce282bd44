//! A real S3 server for tests: s3s-fs, started per test on a free loopback
//! port over a fresh temporary directory, stopped when dropped.
//!
//! Self-contained (std and tempfile only): copy `s3_server.rs` into another
//! crate's `tests/common/` to use it there. The binary comes from
//! `TIERPOOL_S3S_FS` (scripts/test.sh sets it), else from
//! `scripts/s3-server.sh`, which installs it once; the tests never skip.
//!
//! s3s-fs keeps each bucket as a subdirectory of its root and each object as
//! a file; `create_bucket` makes the subdirectory.

#![allow(dead_code)]

pub mod s3_server;
pub mod suite;

#[allow(unused_imports)]
pub use s3_server::S3Server;
