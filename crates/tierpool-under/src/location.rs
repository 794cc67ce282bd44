//! Where an under-store is: the parsed form of its URI.
//!
//! Three schemes: `file:///abs/dir` (a directory tree), `s3://bucket` or
//! `s3://bucket/prefix` (the keys of a bucket below a prefix), and
//! `hdfs://namenode[:port]/dir` (a directory of an HDFS file system, reached
//! through the NameNode's RPC port, 8020 when not given). Parsing is pure;
//! nothing here touches the store. Invariants of a parsed location: a
//! directory is absolute and has no trailing '/' (except "/" itself); a bucket
//! and a NameNode host are non-empty; a prefix has no leading or trailing '/';
//! no path has an empty, "." or ".." component.

use std::path::PathBuf;

use tierpool_types::{Error, Result};

/// The parsed URI of an under-store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// A directory tree rooted at an absolute path.
    Dir(PathBuf),
    /// The keys of `bucket` below `prefix` ("" for the whole bucket).
    S3 { bucket: String, prefix: String },
    /// The directory `dir` (absolute) of the HDFS file system whose NameNode
    /// answers RPC at `namenode` ("host:port").
    Hdfs { namenode: String, dir: String },
}

/// The NameNode's RPC port when a URI names none.
const HDFS_DEFAULT_PORT: u16 = 8020;

const EXPECTED: &str = "expected file:///abs/dir, s3://bucket[/prefix] or hdfs://namenode[:port]/dir";

impl Location {
    pub(crate) fn parse(uri: &str) -> Result<Location> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(Error::invalid(format!("{uri:?} is not an under-store URI: {EXPECTED}")));
        };
        match scheme {
            "file" => parse_file(uri, rest),
            "s3" => parse_s3(uri, rest),
            "hdfs" => parse_hdfs(uri, rest),
            "webhdfs" | "swebhdfs" => Err(Error::invalid(format!(
                "{uri}: HDFS is reached through its NameNode's RPC port, not WebHDFS: use hdfs://namenode:8020/dir"
            ))),
            _ => Err(Error::invalid(format!("{uri}: unsupported scheme {scheme:?} (supported: file, s3, hdfs)"))),
        }
    }
}

fn parse_file(uri: &str, rest: &str) -> Result<Location> {
    if !rest.starts_with('/') {
        return Err(Error::invalid(format!(
            "{uri}: a directory store needs an absolute path with no host, as in file:///data/lake"
        )));
    }
    let trimmed = rest.trim_end_matches('/');
    let dir = if trimmed.is_empty() { "/" } else { trimmed };
    check_components(uri, dir.trim_start_matches('/'))?;
    Ok(Location::Dir(PathBuf::from(dir)))
}

fn parse_s3(uri: &str, rest: &str) -> Result<Location> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!("{uri}: no bucket: expected s3://bucket or s3://bucket/prefix")));
    }
    if !bucket.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        return Err(Error::invalid(format!(
            "{uri}: {bucket:?} is not a bucket name (letters, digits, '-', '.' and '_' only)"
        )));
    }
    let prefix = prefix.trim_matches('/');
    check_components(uri, prefix)?;
    Ok(Location::S3 { bucket: bucket.to_string(), prefix: prefix.to_string() })
}

fn parse_hdfs(uri: &str, rest: &str) -> Result<Location> {
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => {
            let port: u16 = port
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| Error::invalid(format!("{uri}: {port:?} is not a port number")))?;
            (host, port)
        }
        None => (authority, HDFS_DEFAULT_PORT),
    };
    if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        return Err(Error::invalid(format!("{uri}: no NameNode host: expected hdfs://namenode[:port]/dir")));
    }
    let trimmed = path.trim_end_matches('/');
    check_components(uri, trimmed.trim_start_matches('/'))?;
    let dir = if trimmed.is_empty() { "/".to_string() } else { trimmed.to_string() };
    Ok(Location::Hdfs { namenode: format!("{host}:{port}"), dir })
}

/// Refuses empty, "." and ".." components in a '/'-separated relative path.
fn check_components(uri: &str, rel: &str) -> Result<()> {
    if rel.is_empty() {
        return Ok(());
    }
    if rel.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(Error::invalid(format!("{uri}: the path has an empty, '.' or '..' component")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::ErrorKind;

    #[test]
    fn parses_directories_and_buckets() {
        assert_eq!(Location::parse("file:///data/lake/").unwrap(), Location::Dir(PathBuf::from("/data/lake")));
        assert_eq!(Location::parse("file:///").unwrap(), Location::Dir(PathBuf::from("/")));
        assert_eq!(
            Location::parse("s3://bucket").unwrap(),
            Location::S3 { bucket: "bucket".into(), prefix: String::new() }
        );
        assert_eq!(
            Location::parse("s3://bucket/a/b/").unwrap(),
            Location::S3 { bucket: "bucket".into(), prefix: "a/b".into() }
        );
    }

    #[test]
    fn parses_hdfs_directories_with_or_without_a_port() {
        let hdfs = |namenode: &str, dir: &str| Location::Hdfs { namenode: namenode.into(), dir: dir.into() };
        assert_eq!(Location::parse("hdfs://nn:9000/data/in/").unwrap(), hdfs("nn:9000", "/data/in"));
        assert_eq!(Location::parse("hdfs://nn.example.com/data").unwrap(), hdfs("nn.example.com:8020", "/data"));
        assert_eq!(Location::parse("hdfs://127.0.0.1:8020").unwrap(), hdfs("127.0.0.1:8020", "/"));
        assert_eq!(Location::parse("hdfs://nn/").unwrap(), hdfs("nn:8020", "/"));
        for uri in [
            "hdfs:///data",
            "hdfs://nn:0/x",
            "hdfs://nn:port/x",
            "hdfs://nn:70000/x",
            "hdfs://nn/a/../b",
            "hdfs://n n/x",
        ] {
            assert_eq!(Location::parse(uri).unwrap_err().kind, ErrorKind::InvalidArgument, "{uri}");
        }
    }

    #[test]
    fn refuses_other_schemes_naming_them() {
        let e = Location::parse("webhdfs://nn:9870/x").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("use hdfs://namenode:8020/dir"), "{}", e.message);
        let e = Location::parse("gs://b").unwrap_err();
        assert!(e.message.contains("unsupported scheme \"gs\""), "{}", e.message);
        assert_eq!(Location::parse("/data").unwrap_err().kind, ErrorKind::InvalidArgument);
    }

    #[test]
    fn refuses_relative_directories_and_bad_paths() {
        for uri in ["file://host/data", "file://data", "file:///a/../b", "s3://", "s3:///x", "s3://b/a//c", "s3://b c"]
        {
            assert_eq!(Location::parse(uri).unwrap_err().kind, ErrorKind::InvalidArgument, "{uri}");
        }
    }
}
