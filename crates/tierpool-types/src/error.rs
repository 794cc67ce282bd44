//! The one error type that crosses crate and wire boundaries: a kind plus a
//! human message. Each user surface (CLI exit, errno, Python exception) maps
//! kinds exactly once; the errno of a kind is [`ErrorKind::errno`], shared by
//! every POSIX surface (the FUSE mount, the `OSError`s of the Python binding).

use serde::{Deserialize, Serialize};

/// What went wrong, independent of where. Stable: it travels on the wire.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The path, inode, chunk or worker does not exist.
    NotFound,
    /// The path already exists.
    AlreadyExists,
    /// A path component that must be a directory is not one.
    NotADirectory,
    /// A file operation was given a directory.
    IsADirectory,
    /// A directory that must be empty is not.
    DirectoryNotEmpty,
    /// No tier of the pool can hold more data.
    PoolFull,
    /// A process of the pool cannot be reached or answered too late.
    Unavailable,
    /// Stored bytes do not match their checksum.
    Corrupt,
    /// Data that was acknowledged is gone: the worker that should hold it
    /// does not (held only in the memory of a worker that restarted, or on a worker that left).
    Lost,
    /// What a reader resolved changed under it: the file was replaced,
    /// rewritten or removed while it was being read. Reading it again gives
    /// the current contents.
    Stale,
    /// The request itself is wrong: bad size, bad path, bad value.
    InvalidArgument,
    /// A peer sent a message that cannot be decoded or has the wrong version.
    Protocol,
    /// A local I/O error other than the ones above.
    Io,
    /// A broken invariant inside tierpool.
    Internal,
    /// A peer did not prove that it knows the pool's secret (a wrong secret,
    /// or none), or the pool's secret file cannot be used. Retrying with the
    /// same secret cannot help, unlike `Unavailable`.
    Unauthenticated,
    /// The path cannot change: it is in a snapshot, or in an attached
    /// under-store that is read-only here.
    ReadOnly,
    /// The path is in use in a way the request cannot go with: a region
    /// open in another client while it would be restored.
    Busy,
    /// A transaction lost to one that committed first a change of what it
    /// wrote (a write-write conflict), or was aborted: nothing of it is visible.
    Conflict,
}

/// errno values of Linux (the asm-generic numbering: x86, arm, riscv...),
/// spelled out here so that this crate needs no libc. Only the ones a kind maps to.
pub mod errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EACCES: i32 = 13;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const ENOTEMPTY: i32 = 39;
    pub const EHOSTUNREACH: i32 = 113;
    pub const ESTALE: i32 = 116;
    pub const ECANCELED: i32 = 125;
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::NotADirectory,
        ErrorKind::IsADirectory,
        ErrorKind::DirectoryNotEmpty,
        ErrorKind::PoolFull,
        ErrorKind::Unavailable,
        ErrorKind::Corrupt,
        ErrorKind::Lost,
        ErrorKind::Stale,
        ErrorKind::InvalidArgument,
        ErrorKind::Protocol,
        ErrorKind::Io,
        ErrorKind::Internal,
        ErrorKind::Unauthenticated,
        ErrorKind::ReadOnly,
        ErrorKind::Busy,
        ErrorKind::Conflict,
    ];

    /// The errno that a POSIX surface reports for this kind (Linux values).
    /// `Unavailable` is `EHOSTUNREACH`: the data lives on a machine that cannot
    /// be reached now, which is neither the caller's fault nor lost data.
    /// Everything that means "these bytes cannot be delivered" is `EIO`.
    /// `Unauthenticated` is `EACCES`: the pool refused this process.
    pub fn errno(self) -> i32 {
        match self {
            ErrorKind::NotFound => errno::ENOENT,
            ErrorKind::AlreadyExists => errno::EEXIST,
            ErrorKind::NotADirectory => errno::ENOTDIR,
            ErrorKind::IsADirectory => errno::EISDIR,
            ErrorKind::DirectoryNotEmpty => errno::ENOTEMPTY,
            ErrorKind::PoolFull => errno::ENOSPC,
            ErrorKind::Unavailable => errno::EHOSTUNREACH,
            ErrorKind::InvalidArgument => errno::EINVAL,
            ErrorKind::Stale => errno::ESTALE,
            ErrorKind::Unauthenticated => errno::EACCES,
            ErrorKind::ReadOnly => errno::EROFS,
            ErrorKind::Busy => errno::EBUSY,
            ErrorKind::Conflict => errno::ECANCELED,
            ErrorKind::Corrupt | ErrorKind::Lost | ErrorKind::Protocol | ErrorKind::Io | ErrorKind::Internal => {
                errno::EIO
            }
        }
    }

    /// Short stable name, used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::NotADirectory => "not_a_directory",
            ErrorKind::IsADirectory => "is_a_directory",
            ErrorKind::DirectoryNotEmpty => "directory_not_empty",
            ErrorKind::PoolFull => "pool_full",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Lost => "lost",
            ErrorKind::Stale => "stale",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Io => "io",
            ErrorKind::Internal => "internal",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::Busy => "busy",
            ErrorKind::Conflict => "conflict",
        }
    }
}

/// Ends the message of [`Error::inode_gone`].
const INODE_GONE: &str = "no longer exists";

/// An error with its kind and a one-line message meant for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Error::new(ErrorKind::NotFound, format!("{what}: no such file or directory"))
    }

    /// An inode named by its id that has no name left (another client
    /// removed it): `NotFound`. A mount's kernel names inodes by id, so to
    /// it this is a stale handle (see [`Error::gone_inode`]).
    pub fn inode_gone(id: impl std::fmt::Display) -> Self {
        Error::new(ErrorKind::NotFound, format!("inode {id} {INODE_GONE}"))
    }

    /// The id of an [`Error::inode_gone`] (with context added or not).
    pub fn gone_inode(&self) -> Option<u64> {
        if self.kind != ErrorKind::NotFound {
            return None;
        }
        let rest = self.message.strip_suffix(INODE_GONE)?.strip_suffix(' ')?;
        rest.rsplit_once("inode ")?.1.parse().ok()
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }

    /// Prefixes the message with context, keeping the kind.
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        Error { kind: self.kind, message: format!("{what}: {}", self.message) }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match e.kind() {
            K::NotFound => ErrorKind::NotFound,
            K::AlreadyExists => ErrorKind::AlreadyExists,
            K::StorageFull => ErrorKind::PoolFull,
            K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::BrokenPipe
            | K::TimedOut
            | K::UnexpectedEof
            | K::NotConnected => ErrorKind::Unavailable,
            K::InvalidData => ErrorKind::Corrupt,
            _ => ErrorKind::Io,
        };
        Error::new(kind, e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a caught panic said (its `&str` or `String` payload), or "a panic".
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    (panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_gone_is_told_by_its_id_with_context_or_without() {
        assert_eq!(Error::inode_gone(42).gone_inode(), Some(42));
        assert_eq!(Error::inode_gone(42).context("inode 42").context("publishing").gone_inode(), Some(42));
        assert_eq!(Error::inode_gone(42).message, "inode 42 no longer exists");
        assert_eq!(Error::not_found("inode 42").gone_inode(), None);
        assert_eq!(Error::new(ErrorKind::Stale, "inode 42 no longer exists").gone_inode(), None);
        assert_eq!(Error::new(ErrorKind::NotFound, "chunk no longer exists").gone_inode(), None);
    }

    #[test]
    fn every_kind_has_its_errno() {
        let expected = [
            (ErrorKind::NotFound, 2),
            (ErrorKind::AlreadyExists, 17),
            (ErrorKind::NotADirectory, 20),
            (ErrorKind::IsADirectory, 21),
            (ErrorKind::DirectoryNotEmpty, 39),
            (ErrorKind::PoolFull, 28),
            (ErrorKind::Unavailable, 113),
            (ErrorKind::Corrupt, 5),
            (ErrorKind::Lost, 5),
            (ErrorKind::Stale, 116),
            (ErrorKind::InvalidArgument, 22),
            (ErrorKind::Protocol, 5),
            (ErrorKind::Io, 5),
            (ErrorKind::Internal, 5),
            (ErrorKind::Unauthenticated, 13),
            (ErrorKind::ReadOnly, 30),
            (ErrorKind::Busy, 16),
            (ErrorKind::Conflict, 125),
        ];
        assert_eq!(expected.map(|(k, _)| k), ErrorKind::ALL, "the table lists every kind once, in order");
        for (kind, errno) in expected {
            assert_eq!(kind.errno(), errno, "{kind:?}");
        }
    }

    #[test]
    fn all_lists_each_kind_once_with_a_distinct_name() {
        let names: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }
}
