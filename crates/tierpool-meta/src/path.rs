//! Path normalisation.
//!
//! A normalised path is a list of components, each non-empty, not `.` or `..`,
//! free of `/` and NUL, and at most [`MAX_NAME_LEN`] bytes. The root is the
//! empty list. Every path the state machine stores or compares is normalised.

use tierpool_types::{Error, Result};

/// Longest directory entry name, in bytes (as in POSIX `NAME_MAX`).
pub const MAX_NAME_LEN: usize = 255;

/// Splits a user path into its components: a leading `/` is optional, empty
/// and `.` components are dropped. `..`, NUL bytes and components longer than
/// 255 bytes are `InvalidArgument`. The root is the empty list.
pub fn normalize(path: &str) -> Result<Vec<String>> {
    if path.contains('\0') {
        return Err(Error::invalid(format!("{}: path contains a NUL byte", path.replace('\0', "\\0"))));
    }
    let mut out = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => return Err(Error::invalid(format!("{path}: '..' is not allowed in a path"))),
            c if c.len() > MAX_NAME_LEN => {
                return Err(Error::invalid(format!("{path}: a path component is longer than {MAX_NAME_LEN} bytes")))
            }
            c => out.push(c.to_owned()),
        }
    }
    Ok(out)
}

/// Checks one directory entry name: not empty, `.` or `..`, free of `/`
/// and NUL, at most [`MAX_NAME_LEN`] bytes.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Error::invalid(format!("{:?} is not a valid name for a directory entry", name)));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!("a name is longer than {MAX_NAME_LEN} bytes")));
    }
    Ok(())
}

/// The path as messages show it: with a leading `/`.
pub(crate) fn display(comps: &[String]) -> String {
    format!("/{}", comps.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::ErrorKind;

    fn n(p: &str) -> Vec<String> {
        normalize(p).unwrap()
    }

    #[test]
    fn root_is_the_empty_list() {
        for p in ["", "/", "//", ".", "/./", "/.//./"] {
            assert!(n(p).is_empty(), "{p:?}");
        }
    }

    #[test]
    fn leading_slash_is_optional_and_empty_and_dot_components_are_dropped() {
        assert_eq!(n("/a/b"), ["a", "b"]);
        assert_eq!(n("a/b"), ["a", "b"]);
        assert_eq!(n("a//./b/"), ["a", "b"]);
        assert_eq!(n("/a/.b/..c"), ["a", ".b", "..c"]);
    }

    #[test]
    fn dot_dot_nul_and_long_components_are_invalid() {
        let long = format!("/a/{}", "x".repeat(256));
        for p in ["..", "/a/../b", "/a/..", "a\0b", &long] {
            assert_eq!(normalize(p).unwrap_err().kind, ErrorKind::InvalidArgument, "{p:?}");
        }
        assert_eq!(normalize("/a/../b").unwrap_err().message, "/a/../b: '..' is not allowed in a path");
    }

    #[test]
    fn a_component_of_exactly_255_bytes_is_fine() {
        let name = "é".repeat(127) + "x";
        assert_eq!(name.len(), 255);
        assert_eq!(n(&format!("/{name}")), [name]);
    }

    #[test]
    fn display_adds_the_leading_slash() {
        assert_eq!(display(&n("a/b")), "/a/b");
        assert_eq!(display(&[]), "/");
    }
}
