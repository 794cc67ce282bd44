//! The pool as a POSIX file system, through FUSE.
//!
//! A thin adapter over [`tierpool_client`]: paths and metadata come from the
//! coordinator, bytes from the workers, through the same client as the CLI.
//!
//! Semantics (close-to-open, as the pool's files have):
//! - a file opened for reading sees the version that existed at `open`;
//! - a file opened for writing is staged in a local temporary file (so writes
//!   at any offset, appends, truncation and sparse files work) and published
//!   atomically, replacing the old version, on `flush` (close), `fsync` and
//!   `release`; `close` reports a failed publish (ENOSPC when the pool is full);
//! - unlink, rename, mkdir and rmdir are the coordinator's atomic operations.
//! - `chmod` and `utimens` change the inode's mode and mtime in the pool;
//!   owners and access times are not kept;
//! - `user.tierpool.priority` and `user.tierpool.pinned` are extended
//!   attributes over the pool's eviction attributes (see `xattr.rs`).
//!
//! Reads are served from a chunk cache shared by all open files (`--cache`),
//! with the next chunk fetched ahead while a file is read in order.

mod cache;
mod errno;
mod fs;
mod names;
mod xattr;

pub use fs::{MountOptions, TierpoolFs};

/// Mounts the pool at `mountpoint` and serves it until unmounted.
pub fn run(fs: TierpoolFs, mountpoint: &std::path::Path) -> std::io::Result<()> {
    let mut cfg = fuser::Config::default();
    cfg.n_threads = Some(4);
    cfg.mount_options = vec![
        fuser::MountOption::FSName("tierpool".into()),
        fuser::MountOption::Subtype("tierpool".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    if unsafe { libc::geteuid() } == 0 {
        cfg.mount_options.push(fuser::MountOption::CUSTOM("allow_other".into()));
    }
    fuser::mount(fs, mountpoint, &cfg)
}
