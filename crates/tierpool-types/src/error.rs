//! The one error type that crosses crate and wire boundaries: a kind plus a
//! human message. Each user surface (CLI exit, errno, Python exception) maps
//! kinds exactly once.

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
    /// The request itself is wrong: bad size, bad path, bad value.
    InvalidArgument,
    /// A peer sent a message that cannot be decoded or has the wrong version.
    Protocol,
    /// A local I/O error other than the ones above.
    Io,
    /// A broken invariant inside tierpool.
    Internal,
}

impl ErrorKind {
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
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Io => "io",
            ErrorKind::Internal => "internal",
        }
    }
}

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
