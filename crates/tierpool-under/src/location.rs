//! Where an under-store is: the parsed form of its URI.
//!
//! Two schemes: `file:///abs/dir` (a directory tree) and `s3://bucket` or
//! `s3://bucket/prefix` (the keys of a bucket below a prefix). Parsing is
//! pure; nothing here touches the store. Invariants of a parsed location: a
//! directory is absolute and has no trailing '/' (except "/" itself); a bucket
//! is non-empty; a prefix has no leading or trailing '/' and no empty, "." or
//! ".." component.

use std::path::PathBuf;

use tierpool_types::{Error, Result};

/// The parsed URI of an under-store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// A directory tree rooted at an absolute path.
    Dir(PathBuf),
    /// The keys of `bucket` below `prefix` ("" for the whole bucket).
    S3 { bucket: String, prefix: String },
}

impl Location {
    pub(crate) fn parse(uri: &str) -> Result<Location> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(Error::invalid(format!(
                "{uri:?} is not an under-store URI: expected file:///abs/dir or s3://bucket[/prefix]"
            )));
        };
        match scheme {
            "file" => parse_file(uri, rest),
            "s3" => parse_s3(uri, rest),
            "hdfs" | "webhdfs" => Err(Error::invalid(format!(
                "{uri}: scheme {scheme:?} is not supported by this build (supported: file, s3)"
            ))),
            _ => Err(Error::invalid(format!("{uri}: unsupported scheme {scheme:?} (supported: file, s3)"))),
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
    fn refuses_other_schemes_naming_them() {
        let e = Location::parse("hdfs://nn:8020/x").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("\"hdfs\" is not supported by this build"), "{}", e.message);
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
