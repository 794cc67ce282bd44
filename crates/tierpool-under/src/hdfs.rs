//! What an HDFS store does beside OpenDAL's hdfs-native service: the calls
//! that service lacks or makes unsafe for the pool, and the HDFS client's
//! errors in tierpool's words.
//!
//! - rename: the service renames files only, and first creates an empty file
//!   at the target, which a failed rename leaves behind. Here one NameNode
//!   rename moves a file or a whole tree atomically (HDFS `rename2` with
//!   overwrite: a file replaces a file, a tree an empty directory; a
//!   non-empty directory at the target is `DirectoryNotEmpty`), after the
//!   target's parent directories are made.
//! - delete of a directory that must be empty: the service always deletes
//!   recursively; here the NameNode refuses a non-empty one itself, so
//!   nothing written meanwhile is removed.
//!
//! Errors keep the exception's meaning (missing, exists, not a directory,
//! not empty, denied, quota, safe mode) and only the first line of its
//! message: a NameNode's message carries the Java stack trace.

use hdfs_native::HdfsError;
use tierpool_types::{Error, ErrorKind, Result};

use crate::error::Describe;
use crate::store::UnderStore;

/// Permission bits of the directories a rename makes (before the NameNode's umask).
const DIR_MODE: u32 = 0o755;

impl UnderStore {
    /// Moves `from` to `to` (store paths, both checked and non-empty) in one NameNode call.
    pub(crate) async fn hdfs_rename(&self, from: &str, to: &str) -> Result<()> {
        let (client, describe) = self.hdfs_client()?;
        let (source, target) = (self.abs(from), self.abs(to));
        if let Some((parent, _)) = target.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
            client.mkdirs(parent, DIR_MODE, true).await.map_err(|e| describe.hdfs(to, &e))?;
        }
        client.rename(&source, &target, true).await.map_err(|e| describe.hdfs(from, &e))
    }

    /// Removes the directory at `rel` if it is empty (absent is Ok).
    pub(crate) async fn hdfs_delete_empty_dir(&self, rel: &str) -> Result<()> {
        let (client, describe) = self.hdfs_client()?;
        match client.delete(&self.abs(rel), false).await {
            Ok(_) => Ok(()),
            Err(e) => Err(describe.hdfs(rel, &e)),
        }
    }

    fn hdfs_client(&self) -> Result<(&hdfs_native::Client, &Describe)> {
        let inner = &self.inner;
        let client = inner.hdfs.as_ref().ok_or_else(|| Error::internal(format!("{}: not an HDFS store", inner.uri)))?;
        Ok((client, &inner.describe))
    }

    /// The absolute HDFS path of a store path.
    fn abs(&self, rel: &str) -> String {
        format!("/{}", self.inner.key(rel))
    }
}

impl Describe {
    /// A tierpool error for an error of the HDFS client at `path`.
    pub(crate) fn hdfs(&self, path: &str, err: &HdfsError) -> Error {
        let (kind, what) = self.hdfs_kind(err);
        Error::new(kind, format!("{}: {what}", self.at(path)))
    }

    pub(crate) fn hdfs_kind(&self, err: &HdfsError) -> (ErrorKind, String) {
        match err {
            HdfsError::IOError(io) => self.io(io),
            HdfsError::FileNotFound(_) | HdfsError::BlocksNotFound(_) => {
                (ErrorKind::NotFound, "no such file or directory".into())
            }
            HdfsError::AlreadyExists(_) => (ErrorKind::AlreadyExists, "already exists".into()),
            HdfsError::IsADirectoryError(_) => (ErrorKind::IsADirectory, "is a directory".into()),
            HdfsError::RPCError(class, message) | HdfsError::FatalRPCError(class, message) => rpc_kind(class, message),
            other => (ErrorKind::Io, first_line(&other.to_string())),
        }
    }
}

/// The kind of a NameNode exception, by its class (and, for the generic
/// `IOException` of a rename onto a non-empty directory, its message).
fn rpc_kind(class: &str, message: &str) -> (ErrorKind, String) {
    let short = class.rsplit('.').next().unwrap_or(class);
    let said = first_line(message);
    let kind = match short {
        "FileNotFoundException" => ErrorKind::NotFound,
        "FileAlreadyExistsException" | "AlreadyBeingCreatedException" => ErrorKind::AlreadyExists,
        "ParentNotDirectoryException" => ErrorKind::NotADirectory,
        "PathIsNotEmptyDirectoryException" => ErrorKind::DirectoryNotEmpty,
        "AccessControlException" => ErrorKind::Unauthenticated,
        "DSQuotaExceededException" | "NSQuotaExceededException" | "QuotaExceededException" => ErrorKind::PoolFull,
        "SafeModeException" | "StandbyException" | "RetriableException" => ErrorKind::Unavailable,
        _ if said.contains("is not empty") => ErrorKind::DirectoryNotEmpty,
        _ => ErrorKind::Io,
    };
    (kind, format!("{said} ({short})"))
}

fn first_line(s: &str) -> String {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdfs() -> Describe {
        Describe { uri: "hdfs://nn:8020/d".into(), bucket: None, endpoint: Some("the NameNode at nn:8020".into()) }
    }

    #[test]
    fn namenode_exceptions_keep_their_meaning_on_one_line() {
        let trace =
            "/d/x is non empty\n\tat org.apache.hadoop.hdfs.server.namenode.FSDirDeleteOp.delete(FSDirDeleteOp.java:1)";
        let e = hdfs().hdfs(
            "x",
            &HdfsError::RPCError("org.apache.hadoop.fs.PathIsNotEmptyDirectoryException".into(), trace.into()),
        );
        assert_eq!(
            e,
            Error::new(
                ErrorKind::DirectoryNotEmpty,
                "hdfs://nn:8020/d/x: /d/x is non empty (PathIsNotEmptyDirectoryException)"
            )
        );
        let e = hdfs().hdfs(
            "y",
            &HdfsError::RPCError(
                "java.io.IOException".into(),
                "rename destination directory is not empty: /d/y\n\tat".into(),
            ),
        );
        assert_eq!(e.kind, ErrorKind::DirectoryNotEmpty);
        let e = hdfs().hdfs(
            "",
            &HdfsError::RPCError(
                "org.apache.hadoop.hdfs.server.namenode.SafeModeException".into(),
                "in safe mode".into(),
            ),
        );
        assert_eq!(e, Error::new(ErrorKind::Unavailable, "hdfs://nn:8020/d: in safe mode (SafeModeException)"));
        let e = hdfs().hdfs(
            "q",
            &HdfsError::RPCError("org.apache.hadoop.hdfs.protocol.DSQuotaExceededException".into(), "quota".into()),
        );
        assert_eq!(e.kind, ErrorKind::PoolFull);
    }

    #[test]
    fn an_unreachable_namenode_is_unavailable_naming_it() {
        let e = hdfs().hdfs("", &HdfsError::IOError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
        assert_eq!(
            e,
            Error::new(
                ErrorKind::Unavailable,
                "hdfs://nn:8020/d: cannot reach the NameNode at nn:8020: connection refused"
            )
        );
        let e = hdfs().hdfs("a", &HdfsError::FileNotFound("/d/a".into()));
        assert_eq!(e, Error::new(ErrorKind::NotFound, "hdfs://nn:8020/d/a: no such file or directory"));
    }
}
