//! tierpool errors as errno values: the kind's own errno
//! ([`ErrorKind::errno`], the one mapping shared with the Python binding),
//! logged once here when it hides a cause the caller cannot see (`EIO`,
//! `EHOSTUNREACH`, and `EACCES` from a pool that refused the mount's secret).
//!
//! One exception: an inode the kernel named that the pool no longer has
//! (another client removed or replaced it, and the feed has not told the
//! kernel yet) is `ESTALE` the first time within [`STALE_ONCE`]. On
//! `ESTALE` the kernel walks a call's path once more, asking for each name,
//! and so finds what is there now: an open, a listing, a `stat` or a create
//! right after another client's change reaches the new file or directory.
//! A call that cannot walk anywhere else (one relative to a directory
//! descriptor whose directory is gone) asks about the same inode again and
//! gets `ENOENT`, as programs removing a tree another client removes too
//! expect; a call on a descriptor (`fstat`) gets `ESTALE` once.

use fuser::Errno;
use parking_lot::Mutex;
use std::time::{Duration, Instant};
use tierpool_types::{Error, ErrorKind};

/// An inode gone is answered `ESTALE` once within this.
const STALE_ONCE: Duration = Duration::from_secs(1);
/// Inodes answered `ESTALE` remembered at most.
const STALE_KEPT: usize = 256;

/// Inodes answered `ESTALE`, and when.
static STALE: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());

pub fn errno(e: &Error) -> Errno {
    if let Some(id) = e.gone_inode() {
        if first_stale(&mut STALE.lock(), id, Instant::now()) {
            return Errno::ESTALE;
        }
    }
    let code = e.kind.errno();
    if code == libc::EIO || code == libc::EHOSTUNREACH || e.kind == ErrorKind::Unauthenticated {
        tracing::warn!("{e}");
    }
    Errno::from_i32(code)
}

/// Whether inode `id` is answered `ESTALE` now: not within `STALE_ONCE`
/// before (noted in `answered`).
fn first_stale(answered: &mut Vec<(u64, Instant)>, id: u64, now: Instant) -> bool {
    answered.retain(|&(_, at)| now.duration_since(at) < STALE_ONCE);
    if answered.iter().any(|&(i, _)| i == id) {
        return false;
    }
    if answered.len() >= STALE_KEPT {
        answered.remove(0);
    }
    answered.push((id, now));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_errno_values_are_this_systems() {
        let expected = [
            (ErrorKind::NotFound, libc::ENOENT),
            (ErrorKind::AlreadyExists, libc::EEXIST),
            (ErrorKind::NotADirectory, libc::ENOTDIR),
            (ErrorKind::IsADirectory, libc::EISDIR),
            (ErrorKind::DirectoryNotEmpty, libc::ENOTEMPTY),
            (ErrorKind::PoolFull, libc::ENOSPC),
            (ErrorKind::Unavailable, libc::EHOSTUNREACH),
            (ErrorKind::Corrupt, libc::EIO),
            (ErrorKind::Lost, libc::EIO),
            (ErrorKind::Stale, libc::ESTALE),
            (ErrorKind::InvalidArgument, libc::EINVAL),
            (ErrorKind::Protocol, libc::EIO),
            (ErrorKind::Io, libc::EIO),
            (ErrorKind::Internal, libc::EIO),
            (ErrorKind::Unauthenticated, libc::EACCES),
            (ErrorKind::ReadOnly, libc::EROFS),
            (ErrorKind::Busy, libc::EBUSY),
            (ErrorKind::Conflict, libc::ECANCELED),
        ];
        assert_eq!(expected.map(|(k, _)| k), ErrorKind::ALL);
        for (kind, code) in expected {
            assert_eq!(errno(&Error::new(kind, "x")), Errno::from_i32(code), "{kind:?}");
        }
        // An inode no longer there, with context or without: ESTALE, then
        // ENOENT within the second.
        assert_eq!(errno(&Error::inode_gone(7)), Errno::ESTALE);
        assert_eq!(errno(&Error::inode_gone(7).context("publishing")), Errno::ENOENT);
        assert_eq!(errno(&Error::inode_gone(8).context("publishing")), Errno::ESTALE);
        assert_eq!(errno(&Error::not_found("/a")), Errno::ENOENT);
        assert_eq!(errno(&Error::not_found("inode 9 no longer exists: no")), Errno::ENOENT);
    }

    #[test]
    fn an_inode_gone_is_stale_once_a_second() {
        let (mut answered, t) = (Vec::new(), Instant::now());
        assert!(first_stale(&mut answered, 1, t));
        assert!(!first_stale(&mut answered, 1, t + Duration::from_millis(999)));
        assert!(first_stale(&mut answered, 2, t + Duration::from_millis(999)));
        assert!(first_stale(&mut answered, 1, t + STALE_ONCE));
        // At most STALE_KEPT remembered: the oldest goes.
        let later = t + 2 * STALE_ONCE;
        for id in 0..STALE_KEPT as u64 + 1 {
            assert!(first_stale(&mut answered, 100 + id, later));
        }
        assert_eq!(answered.len(), STALE_KEPT);
        assert!(first_stale(&mut answered, 100, later));
    }
}
