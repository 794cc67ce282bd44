//! tierpool errors as errno values: the kind's own errno
//! ([`ErrorKind::errno`], the one mapping shared with the Python binding),
//! logged once here when it hides a cause the caller cannot see (`EIO`,
//! `EHOSTUNREACH`, and `EACCES` from a pool that refused the mount's secret).

use fuser::Errno;
use tierpool_types::{Error, ErrorKind};

pub fn errno(e: &Error) -> Errno {
    if e.is_inode_gone() {
        // An inode the kernel named that the pool no longer has: another
        // client removed or replaced it and the feed has not told the
        // kernel yet. On ESTALE the kernel walks a path call's path again,
        // asking for each name, and so finds what is there now (or
        // `ENOENT`): an open, a listing, a create after another client's
        // change reach the new file or directory.
        return Errno::ESTALE;
    }
    let code = e.kind.errno();
    if code == libc::EIO || code == libc::EHOSTUNREACH || e.kind == ErrorKind::Unauthenticated {
        tracing::warn!("{e}");
    }
    Errno::from_i32(code)
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
        // An inode no longer there, with context or without.
        assert_eq!(errno(&Error::inode_gone(7)), Errno::ESTALE);
        assert_eq!(errno(&Error::inode_gone(7).context("publishing")), Errno::ESTALE);
        assert_eq!(errno(&Error::not_found("/a")), Errno::ENOENT);
    }
}
