//! tierpool's own controls and facts as extended attributes.
//!
//! - `user.tierpool.priority` (`1`..`5`) and `user.tierpool.pinned`
//!   (`0`/`1`) read and set the eviction attributes of a file or of a
//!   directory tree (setting them on a directory applies to everything
//!   under it, as `tierpool pin` does);
//! - `user.tierpool.tiers` (files only, read-only) has one letter per chunk
//!   of the published file, in order: `m` in a worker's memory, `d` on a
//!   worker's disk, `-` a hole (nothing stored), `?` not found on its worker.
//!
//! No other attribute is stored: reading one is `ENODATA`, setting one is
//! `ENOTSUP`; `tiers` cannot be set (`EPERM`) and none can be removed
//! (`EPERM`: they always have a value).
//!
//! Pure: names, values and parsing. `controls.rs` asks the pool.

use fuser::Errno;
use tierpool_client::{ChunkPlace, InodeKind};
use tierpool_types::{ChunkAttrs, Priority};

pub const PRIORITY: &str = "user.tierpool.priority";
pub const PINNED: &str = "user.tierpool.pinned";
pub const TIERS: &str = "user.tierpool.tiers";

/// The names `listxattr` reports for an inode of `kind`, each NUL-terminated.
pub fn names(kind: InodeKind) -> Vec<u8> {
    let mut out = Vec::new();
    let tiers = (kind == InodeKind::File).then_some(TIERS);
    for n in [PRIORITY, PINNED].into_iter().chain(tiers) {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

/// The value of the eviction attribute `name` of an inode with `attrs`.
pub fn get(name: &str, attrs: &ChunkAttrs) -> Result<Vec<u8>, Errno> {
    match name {
        PRIORITY => Ok(attrs.priority.get().to_string().into_bytes()),
        PINNED => Ok(if attrs.pinned { b"1".to_vec() } else { b"0".to_vec() }),
        _ => Err(Errno::from_i32(libc::ENODATA)),
    }
}

/// One letter per chunk: see the module docs.
pub fn tiers(places: &[Option<ChunkPlace>]) -> Vec<u8> {
    (places.iter())
        .map(|p| match p {
            Some(ChunkPlace::Mem) => b'm',
            Some(ChunkPlace::Disk) => b'd',
            Some(ChunkPlace::Absent) => b'?',
            None => b'-',
        })
        .collect()
}

/// A change to set: a new priority or a new pinned flag.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    Priority(Priority),
    Pinned(bool),
}

/// Parses `value` as a new value of attribute `name` (surrounding white
/// space, such as the newline of `echo`, is ignored).
pub fn parse(name: &str, value: &[u8]) -> Result<Change, Errno> {
    let einval = Errno::from_i32(libc::EINVAL);
    let text = std::str::from_utf8(value).map_err(|_| einval)?.trim();
    match name {
        PRIORITY => {
            let p: u8 = text.parse().map_err(|_| einval)?;
            Ok(Change::Priority(Priority::new(p).map_err(|_| einval)?))
        }
        PINNED => match text {
            "1" | "true" => Ok(Change::Pinned(true)),
            "0" | "false" => Ok(Change::Pinned(false)),
            _ => Err(einval),
        },
        TIERS => Err(Errno::EPERM),
        _ => Err(Errno::from_i32(libc::ENOTSUP)),
    }
}

/// Why attribute `name` cannot be removed.
pub fn remove_error(name: &str) -> Errno {
    if [PRIORITY, PINNED, TIERS].contains(&name) {
        Errno::EPERM
    } else {
        Errno::from_i32(libc::ENODATA)
    }
}

/// Answers a `getxattr`/`listxattr` of `value`: its size when the caller
/// asks for it (`size == 0`), the bytes when they fit, `ERANGE` otherwise.
pub fn reply(value: &[u8], size: u32, reply: fuser::ReplyXattr) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() <= size as usize {
        reply.data(value);
    } else {
        reply.error(Errno::from_i32(libc::ERANGE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_text() {
        let attrs = ChunkAttrs { priority: Priority::new(5).unwrap(), pinned: true };
        assert_eq!(get(PRIORITY, &attrs).unwrap(), b"5");
        assert_eq!(get(PINNED, &attrs).unwrap(), b"1");
        assert_eq!(get("user.other", &attrs), Err(Errno::from_i32(libc::ENODATA)));
        assert_eq!(names(InodeKind::Dir), b"user.tierpool.priority\0user.tierpool.pinned\0");
        assert_eq!(names(InodeKind::File), b"user.tierpool.priority\0user.tierpool.pinned\0user.tierpool.tiers\0");
        let places = [Some(ChunkPlace::Mem), None, Some(ChunkPlace::Disk), Some(ChunkPlace::Absent)];
        assert_eq!(tiers(&places), b"m-d?");
    }

    #[test]
    fn values_parse_strictly() {
        assert_eq!(parse(PRIORITY, b"2\n"), Ok(Change::Priority(Priority::new(2).unwrap())));
        assert_eq!(parse(PRIORITY, b"9"), Err(Errno::from_i32(libc::EINVAL)));
        assert_eq!(parse(PRIORITY, b"x"), Err(Errno::from_i32(libc::EINVAL)));
        assert_eq!(parse(PINNED, b"1"), Ok(Change::Pinned(true)));
        assert_eq!(parse(PINNED, b"0"), Ok(Change::Pinned(false)));
        assert_eq!(parse(PINNED, b"yes"), Err(Errno::from_i32(libc::EINVAL)));
        assert_eq!(parse(TIERS, b"m"), Err(Errno::EPERM));
        assert_eq!(parse("user.other", b"1"), Err(Errno::from_i32(libc::ENOTSUP)));
        assert_eq!((remove_error(PINNED), remove_error("user.x")), (Errno::EPERM, Errno::from_i32(libc::ENODATA)));
    }
}
