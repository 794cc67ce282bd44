//! tierpool errors as errno values.

use fuser::Errno;
use tierpool_types::{Error, ErrorKind};

pub fn errno(e: &Error) -> Errno {
    let code = match e.kind {
        ErrorKind::NotFound => libc::ENOENT,
        ErrorKind::AlreadyExists => libc::EEXIST,
        ErrorKind::NotADirectory => libc::ENOTDIR,
        ErrorKind::IsADirectory => libc::EISDIR,
        ErrorKind::DirectoryNotEmpty => libc::ENOTEMPTY,
        ErrorKind::PoolFull => libc::ENOSPC,
        ErrorKind::InvalidArgument => libc::EINVAL,
        ErrorKind::Unavailable => libc::EHOSTUNREACH,
        _ => libc::EIO,
    };
    if code == libc::EIO || code == libc::EHOSTUNREACH {
        tracing::warn!("{e}");
    }
    Errno::from_i32(code)
}
