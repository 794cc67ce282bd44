//! OpenDAL errors as tierpool errors: the one place that maps them.
//!
//! Every message is one line that starts with where it happened (the store's
//! URI, then the path inside it) and says what went wrong in words, e.g.
//! `s3://b/p: bucket "b" does not exist` or
//! `s3://b/p/x: cannot reach http://127.0.0.1:1: connection refused`.
//!
//! Kinds: missing things are `NotFound` (a missing bucket too, and a listing
//! of the store's root answered 404 without an S3 error); refused
//! credentials and denied access are `Unauthenticated` (EACCES); a failed
//! `If-Match` is `Stale`; a full disk is `PoolFull` (ENOSPC); an endpoint that
//! cannot be reached, answers too late, asks to slow down or fails on its side
//! (5xx) is `Unavailable`; anything else is `Io`.

use std::error::Error as StdError;
use std::io::ErrorKind as IoKind;

use opendal::ErrorKind as O;
use tierpool_types::{Error, ErrorKind};

/// What an error message names besides the path: the store and its endpoint.
#[derive(Clone, Debug)]
pub(crate) struct Describe {
    /// The store's URI, without a trailing '/'.
    pub(crate) uri: String,
    /// The bucket, for s3 stores.
    pub(crate) bucket: Option<String>,
    /// Where requests go: the HTTP endpoint of an s3 store, "the NameNode
    /// at host:port" of an HDFS one.
    pub(crate) endpoint: Option<String>,
}

impl Describe {
    /// "uri/path", or the URI alone for the root.
    pub(crate) fn at(&self, path: &str) -> String {
        if path.is_empty() {
            self.uri.clone()
        } else {
            format!("{}/{path}", self.uri)
        }
    }

    /// A tierpool error for `err`, which happened at `path`.
    pub(crate) fn error(&self, path: &str, err: &opendal::Error) -> Error {
        let (kind, what) = match (&self.bucket, &self.endpoint, err.kind()) {
            // A listing of the bucket found nothing there at all: no S3 error
            // body said why, so the endpoint may not even be an S3 service.
            (Some(bucket), Some(endpoint), O::NotFound) if path.is_empty() => {
                (ErrorKind::NotFound, format!("bucket {bucket:?} not found at {endpoint}"))
            }
            _ => match hdfs_source(err) {
                Some(hdfs) => self.hdfs_kind(hdfs),
                None => self.classify(err),
            },
        };
        Error::new(kind, format!("{}: {what}", self.at(path)))
    }

    fn classify(&self, err: &opendal::Error) -> (ErrorKind, String) {
        let s3 = S3Code::parse(err.message());
        let code = s3.as_ref().map(|c| c.code.as_str());
        if code == Some("NoSuchBucket") {
            let bucket = self.bucket.as_deref().unwrap_or("?");
            return (ErrorKind::NotFound, format!("bucket {bucket:?} does not exist"));
        }
        match err.kind() {
            O::NotFound => (ErrorKind::NotFound, "no such file or directory".into()),
            O::PermissionDenied if self.bucket.is_none() => (ErrorKind::Unauthenticated, "permission denied".into()),
            O::PermissionDenied => (ErrorKind::Unauthenticated, denied(s3.as_ref())),
            O::AlreadyExists => (ErrorKind::AlreadyExists, "already exists".into()),
            O::IsADirectory => (ErrorKind::IsADirectory, "is a directory".into()),
            O::NotADirectory => (ErrorKind::NotADirectory, "not a directory".into()),
            O::ConditionNotMatch => (ErrorKind::Stale, "changed in the under-store".into()),
            O::RateLimited => (ErrorKind::Unavailable, "the store asks to slow down; try again later".into()),
            O::Unsupported => (ErrorKind::InvalidArgument, format!("not supported by this store: {}", err.message())),
            O::ConfigInvalid | O::RangeNotSatisfied => (ErrorKind::InvalidArgument, one_line(err.message())),
            _ => self.unexpected(err, s3.as_ref()),
        }
    }

    fn unexpected(&self, err: &opendal::Error, s3: Option<&S3Code>) -> (ErrorKind, String) {
        if let Some(io) = io_source(err) {
            return self.io(io);
        }
        if err.message().contains("timeout reached") {
            let whom = self.endpoint.as_deref().map(|e| format!(" from {e}")).unwrap_or_default();
            return (ErrorKind::Unavailable, format!("no answer{whom} in time"));
        }
        if let Some(s3) = s3 {
            let kind = if err.is_temporary() { ErrorKind::Unavailable } else { ErrorKind::Io };
            return (kind, s3.to_string());
        }
        if let (Some(endpoint), Some(cause)) = (&self.endpoint, transport_cause(err)) {
            return (ErrorKind::Unavailable, format!("cannot reach {endpoint}: {cause}"));
        }
        if let Some(status) = http_status(err) {
            let kind = if status >= 500 { ErrorKind::Unavailable } else { ErrorKind::Io };
            return (kind, format!("the server answered HTTP {status}"));
        }
        let kind = if err.is_temporary() { ErrorKind::Unavailable } else { ErrorKind::Io };
        (kind, one_line(&format!("{} ({})", err.message(), err.kind())))
    }

    pub(crate) fn io(&self, io: &std::io::Error) -> (ErrorKind, String) {
        let kind = match io.kind() {
            IoKind::NotFound => ErrorKind::NotFound,
            IoKind::PermissionDenied => ErrorKind::Unauthenticated,
            IoKind::AlreadyExists => ErrorKind::AlreadyExists,
            IoKind::NotADirectory => ErrorKind::NotADirectory,
            IoKind::IsADirectory => ErrorKind::IsADirectory,
            IoKind::DirectoryNotEmpty => ErrorKind::DirectoryNotEmpty,
            IoKind::StorageFull | IoKind::QuotaExceeded => ErrorKind::PoolFull,
            IoKind::ConnectionRefused
            | IoKind::ConnectionReset
            | IoKind::ConnectionAborted
            | IoKind::NotConnected
            | IoKind::TimedOut
            | IoKind::HostUnreachable
            | IoKind::NetworkUnreachable
            | IoKind::NetworkDown
            | IoKind::AddrNotAvailable
            | IoKind::BrokenPipe
            | IoKind::UnexpectedEof => ErrorKind::Unavailable,
            _ => ErrorKind::Io,
        };
        let what = match (&self.endpoint, kind) {
            (Some(endpoint), ErrorKind::Unavailable) => format!("cannot reach {endpoint}: {}", io.kind()),
            _ => io.kind().to_string(),
        };
        (kind, what)
    }
}

fn denied(s3: Option<&S3Code>) -> String {
    match s3.map(|c| c.code.as_str()) {
        Some("InvalidAccessKeyId") => "credentials refused: the access key id is not known (InvalidAccessKeyId)".into(),
        Some("SignatureDoesNotMatch") => {
            "credentials refused: the secret key does not match the access key id (SignatureDoesNotMatch)".into()
        }
        Some(_) => format!("access denied: {}", s3.map(S3Code::to_string).unwrap_or_default()),
        None => "access denied or credentials refused".into(),
    }
}

/// The first `std::io::Error` among the causes of `err`.
fn io_source(err: &opendal::Error) -> Option<&std::io::Error> {
    let mut cur: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = e.source();
    }
    None
}

/// The HDFS client's error among the causes of `err` (HDFS stores).
fn hdfs_source(err: &opendal::Error) -> Option<&hdfs_native::HdfsError> {
    let mut cur: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(e) = cur {
        if let Some(hdfs) = e.downcast_ref::<hdfs_native::HdfsError>() {
            return Some(hdfs);
        }
        cur = e.source();
    }
    None
}

/// Whether `err` is HDFS's client giving up on the DataNodes of a block
/// (none could be reached, or one broke off while sending): what a later
/// try of the same read may not meet.
pub(crate) fn datanode_failed(err: &opendal::Error) -> bool {
    matches!(hdfs_source(err), Some(hdfs_native::HdfsError::DataTransferError(_) | hdfs_native::HdfsError::IOError(_)))
}

/// The innermost cause of an HTTP transport failure (DNS, TLS, connect), if
/// `err` is one.
fn transport_cause(err: &opendal::Error) -> Option<String> {
    let mut cur: Option<&(dyn StdError + 'static)> = err.source();
    let mut is_transport = false;
    let mut last = None;
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            is_transport |= r.is_connect() || r.is_timeout() || r.is_request();
        }
        last = Some(e.to_string());
        cur = e.source();
    }
    if is_transport {
        last.map(|l| one_line(&l))
    } else {
        None
    }
}

/// The HTTP status of a response that carried no error body (HEAD
/// requests), from the context OpenDAL shows.
fn http_status(err: &opendal::Error) -> Option<u16> {
    let shown = err.to_string();
    let at = shown.find("status: ")? + "status: ".len();
    shown.get(at..at + 3)?.parse().ok()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The error code and message an S3 service put in its XML error body, as
/// OpenDAL 0.59 renders them in its message (`S3Error { code: "..", message: "..", .. }`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct S3Code {
    pub(crate) code: String,
    pub(crate) message: String,
}

impl S3Code {
    pub(crate) fn parse(text: &str) -> Option<S3Code> {
        let field = |name: &str| {
            let start = text.find(&format!("{name}: \""))? + name.len() + 3;
            let rest = &text[start..];
            let end = rest.find("\", ").or_else(|| rest.rfind('"'))?;
            Some(rest[..end].replace("\\\"", "\"").replace("\\\\", "\\"))
        };
        let code = field("code").filter(|c| !c.is_empty())?;
        Some(S3Code { code, message: field("message").unwrap_or_default() })
    }
}

impl std::fmt::Display for S3Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{} ({})", self.message, self.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3() -> Describe {
        Describe { uri: "s3://b/p".into(), bucket: Some("b".into()), endpoint: Some("http://127.0.0.1:1".into()) }
    }

    fn s3_error(kind: O, code: &str, message: &str) -> opendal::Error {
        let body = format!("S3Error {{ code: \"{code}\", message: \"{message}\", resource: \"\", request_id: \"\" }}");
        opendal::Error::new(kind, body)
    }

    #[test]
    fn parses_the_s3_error_body() {
        let parsed = S3Code::parse(
            "S3Error { code: \"NoSuchKey\", message: \"The key, \\\"x\\\".\", resource: \"/b/x\", request_id: \"\" }",
        );
        assert_eq!(parsed.unwrap().code, "NoSuchKey");
        assert_eq!(S3Code::parse("plain text"), None);
        assert_eq!(S3Code::parse("S3Error { code: \"\", message: \"\" }"), None);
    }

    #[test]
    fn a_missing_bucket_is_not_found_naming_it() {
        let e = s3().error("", &s3_error(O::ConfigInvalid, "NoSuchBucket", "The specified bucket does not exist"));
        assert_eq!(e, Error::new(ErrorKind::NotFound, "s3://b/p: bucket \"b\" does not exist"));
    }

    #[test]
    fn refused_credentials_are_unauthenticated() {
        let e = s3().error("k", &s3_error(O::PermissionDenied, "SignatureDoesNotMatch", "no"));
        assert_eq!(e.kind, ErrorKind::Unauthenticated);
        assert!(e.message.starts_with("s3://b/p/k: credentials refused: the secret key"), "{}", e.message);
    }

    #[test]
    fn io_causes_keep_their_meaning() {
        let refused = std::io::Error::from(IoKind::ConnectionRefused);
        let e = s3().error("", &opendal::Error::new(O::Unexpected, "send http request").set_source(refused));
        assert_eq!(
            e,
            Error::new(ErrorKind::Unavailable, "s3://b/p: cannot reach http://127.0.0.1:1: connection refused")
        );
        let dir = Describe { uri: "file:///d".into(), bucket: None, endpoint: None };
        let full = std::io::Error::from(IoKind::StorageFull);
        let e = dir.error("f", &opendal::Error::new(O::Unexpected, "write").set_source(full));
        assert_eq!(e.kind, ErrorKind::PoolFull);
        assert_eq!(e.message, "file:///d/f: no storage space");
    }

    #[test]
    fn only_datanode_failures_are_read_again() {
        let of = |e: hdfs_native::HdfsError| opendal::Error::new(O::Unexpected, "read").set_source(e);
        let dn = hdfs_native::HdfsError::DataTransferError("All DataNodes failed: []".into());
        assert!(datanode_failed(&of(dn)));
        assert!(datanode_failed(&of(hdfs_native::HdfsError::IOError(IoKind::ConnectionReset.into()))));
        assert!(!datanode_failed(&of(hdfs_native::HdfsError::FileNotFound("/d/f".into()))));
        assert!(!datanode_failed(&of(hdfs_native::HdfsError::ChecksumError)));
        assert!(!datanode_failed(&opendal::Error::new(O::Unexpected, "no source")));
    }

    #[test]
    fn conditions_and_timeouts() {
        let e = s3().error("k", &opendal::Error::new(O::ConditionNotMatch, "412"));
        assert_eq!(e.kind, ErrorKind::Stale);
        let e = s3().error("k", &opendal::Error::new(O::Unexpected, "operation timeout reached"));
        assert_eq!(e, Error::new(ErrorKind::Unavailable, "s3://b/p/k: no answer from http://127.0.0.1:1 in time"));
        let e = s3().error("k", &s3_error(O::Unexpected, "InternalError", "boom").set_temporary());
        assert_eq!(e, Error::new(ErrorKind::Unavailable, "s3://b/p/k: boom (InternalError)"));
    }
}
