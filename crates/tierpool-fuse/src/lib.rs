//! The pool as a POSIX file system, through FUSE.
//!
//! A thin adapter over [`tierpool_client`]: metadata comes from the
//! coordinator, bytes from the workers, through the same client as the CLI.
//! FUSE inode numbers are the pool's inode ids, and every call names its
//! inode or its directory and entry name, so nothing here resolves paths.
//!
//! Semantics (close-to-open between clients, POSIX within one mount):
//! - every handle of the mount on one file shares one [`open_file::OpenFile`]:
//!   its writes are seen by the mount's readers at once;
//! - writes are coalesced into chunks in memory; a chunk filled to its end
//!   is stored on its worker at once, as a new version; `close`, `fsync`
//!   and `truncate` publish every change with one metadata commit
//!   (`UpdateFile`), so other clients see the file before or after, never
//!   in between, and only changed chunks travel;
//! - a file opened elsewhere sees what was published when it opens;
//! - a file unlinked while open stays readable and writable through its
//!   handles: the mount holds its inode at the coordinator, so its chunks
//!   outlive its names until the last close;
//! - owners, modes, times, hard links, symlinks and special files are kept
//!   by the pool; the kernel checks permissions (`default_permissions`);
//! - `user.tierpool.*` extended attributes read and set tierpool's own
//!   controls (see `xattr.rs`).

mod attr;
mod cache;
mod controls;
mod errno;
mod file_state;
mod files;
mod fresh;
mod fs;
mod in_flight;
mod kept_pages;
mod known;
mod making;
mod names;
mod namespace;
mod open_file;
mod repeats;
mod snapshots;
mod watch;
mod xattr;

pub use fs::{MountOptions, TierpoolFs};

/// Mounts the pool at `mountpoint` and serves it until unmounted.
///
/// Mounted by root, the mount serves every user (`allow_other`), and the
/// kernel checks each caller's permissions against the pool's owners and
/// modes (`default_permissions`); mounted by another user, it serves that
/// user only, as FUSE does by default.
pub fn run(fs: TierpoolFs, mountpoint: &std::path::Path) -> std::io::Result<()> {
    let parts = fs.watch_parts();
    let at = watch::start(&parts);
    let session = fuser::spawn_mount(fs, mountpoint, &config("tierpool"))?;
    watch::follow(parts, session.notifier(), at);
    // SAFETY: a plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        raise_read_ahead(mountpoint);
    }
    session.join()
}

/// How a file system named `name` is mounted and served: as [`run`] mounts
/// the pool (the benchmark's null file system is mounted the same way).
pub fn config(name: &str) -> fuser::Config {
    let mut cfg = fuser::Config::default();
    cfg.n_threads = Some(4);
    // Each serving thread reads requests from its own clone of the device:
    // parallel reads no longer queue behind one another.
    cfg.clone_fd = true;
    cfg.mount_options = vec![
        fuser::MountOption::FSName(name.into()),
        fuser::MountOption::Subtype(name.into()),
        fuser::MountOption::DefaultPermissions,
    ];
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } == 0 {
        cfg.acl = fuser::SessionACL::All;
    }
    cfg
}

/// Kernel read-ahead for the mount, per file read in order. The kernel
/// starts FUSE mounts at 128 KiB; one request of the largest size (1 MiB)
/// halves the requests' overhead for sequential readers.
const READ_AHEAD_KB: u32 = 1024;

/// Sets the mount's kernel read-ahead (`/sys/class/bdi/MAJOR:MINOR`, root only).
fn raise_read_ahead(mountpoint: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(md) = std::fs::metadata(mountpoint) else { return };
    let (major, minor) = (libc::major(md.dev()), libc::minor(md.dev()));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    if let Err(e) = std::fs::write(&knob, READ_AHEAD_KB.to_string()) {
        tracing::warn!("could not raise the read-ahead of the mount ({knob}): {e}");
    }
}
