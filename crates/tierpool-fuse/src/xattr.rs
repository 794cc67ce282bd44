//! tierpool's own controls and facts as extended attributes.
//!
//! - `user.tierpool.priority` (`1`..`5`) and `user.tierpool.pinned`
//!   (`0`/`1`) read and set the eviction attributes of a file or of a
//!   directory tree (setting them on a directory applies to everything
//!   under it, as `tierpool pin` does);
//! - `user.tierpool.replicas` (`1`..the pool's `--replicas`) reads and
//!   sets the copies of each chunk a file or region keeps (of a directory:
//!   what new entries in it keep; unlike the eviction attributes, setting it
//!   on a directory changes the directory alone). Setting it copies or
//!   drops the copies of the chunks that exist before it returns; a value
//!   above what the pool keeps is `EINVAL`, as is any that is not a number;
//! - `user.tierpool.placement` (`hash`, `local`, `round-robin`,
//!   `local-only`) reads and sets where new chunks of a file are written
//!   (of a directory: what new entries in it take; setting it on a
//!   directory changes the directory alone); chunks already written stay
//!   where they are; any other value is `EINVAL`;
//! - `user.tierpool.write_mode` (files beneath an attached under-store
//!   only) reads and sets the file's write mode: `through`, `back` or
//!   `pool-only` of its own, or `attachment` (it follows its attachment's).
//!   Setting it publishes what this mount wrote first, and a file with
//!   changes not yet below meets the new mode before it returns; any other
//!   value is `EINVAL`;
//! - `user.tierpool.tiers` (files only, read-only) has one letter per chunk
//!   of the published file, in order: `m` in a worker's memory, `d` on a
//!   worker's disk, `-` a hole (nothing stored), `?` not found on its worker.
//!
//! No other attribute is stored: reading one is `ENODATA`, setting one is
//! `ENOTSUP`; `tiers` cannot be set (`EPERM`) and none of the five can be
//! removed (`EPERM`: they always have a value).
//!
//! Pure: names, values and parsing. `controls.rs` asks the pool.

use fuser::Errno;
use tierpool_client::InodeInfo;
use tierpool_client::WriteMode;
use tierpool_client::{ChunkPlace, InodeKind};
use tierpool_types::{Placement, Priority};

pub const PRIORITY: &str = "user.tierpool.priority";
pub const PINNED: &str = "user.tierpool.pinned";
pub const REPLICAS: &str = "user.tierpool.replicas";
pub const PLACEMENT: &str = "user.tierpool.placement";
pub const TIERS: &str = "user.tierpool.tiers";
pub const WRITE_MODE: &str = "user.tierpool.write_mode";
/// The value of `write_mode` of a file that follows its attachment's.
const ATTACHMENT: &str = "attachment";

/// The names `listxattr` reports for the inode `info`, each NUL-terminated.
pub fn names(info: &InodeInfo) -> Vec<u8> {
    let mut out = Vec::new();
    let tiers = (info.kind == InodeKind::File).then_some(TIERS);
    let mode = info.origin.is_some().then_some(WRITE_MODE);
    for n in [PRIORITY, PINNED, REPLICAS, PLACEMENT].into_iter().chain(tiers).chain(mode) {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

/// The value of attribute `name` (not `tiers`) of the inode `info`.
pub fn get(name: &str, info: &InodeInfo) -> Result<Vec<u8>, Errno> {
    match name {
        PRIORITY => Ok(info.attrs.priority.get().to_string().into_bytes()),
        PINNED => Ok(if info.attrs.pinned { b"1".to_vec() } else { b"0".to_vec() }),
        REPLICAS => Ok(info.replicas.to_string().into_bytes()),
        PLACEMENT => Ok(info.placement.name().as_bytes().to_vec()),
        WRITE_MODE => match &info.origin {
            Some(o) => Ok(o.mode.map_or(ATTACHMENT, |m| m.name()).as_bytes().to_vec()),
            None => Err(Errno::from_i32(libc::ENODATA)),
        },
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

/// A change to set: a new priority, a new pinned flag, or new copies per
/// chunk (at least 1; the pool refuses more than it keeps).
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    Priority(Priority),
    Pinned(bool),
    Replicas(u8),
    Placement(Placement),
    /// A write mode of the file's own; `None`: its attachment's.
    WriteMode(Option<WriteMode>),
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
        REPLICAS => match text.parse::<u8>() {
            Ok(n) if n >= 1 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(Change::Replicas(n)),
            _ => Err(einval),
        },
        PLACEMENT => text.parse().map(Change::Placement).map_err(|_| einval),
        WRITE_MODE if text == ATTACHMENT => Ok(Change::WriteMode(None)),
        WRITE_MODE => WriteMode::parse(text).map(|m| Change::WriteMode(Some(m))).ok_or(einval),
        TIERS => Err(Errno::EPERM),
        _ => Err(Errno::from_i32(libc::ENOTSUP)),
    }
}

/// Why attribute `name` cannot be removed.
/// Whether `name` is one of tierpool's attributes (no other is kept).
pub fn is_ours(name: &str) -> bool {
    [PRIORITY, PINNED, REPLICAS, PLACEMENT, TIERS, WRITE_MODE].contains(&name)
}

pub fn remove_error(name: &str) -> Errno {
    if is_ours(name) {
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

    fn info() -> InodeInfo {
        InodeInfo {
            id: tierpool_types::InodeId(5),
            kind: InodeKind::File,
            size: 0,
            chunk_size: 4096,
            mode: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            atime: 0,
            mtime: 0,
            ctime: 0,
            attrs: tierpool_types::ChunkAttrs { priority: Priority::new(5).unwrap(), pinned: true },
            replicas: 2,
            placement: Placement::RoundRobin,
            chunks: Vec::new(),
            target: String::new(),
            rdev: 0,
            origin: None,
            inline: None,
            restoring: None,
        }
    }

    #[test]
    fn values_read_as_text() {
        let i = info();
        assert_eq!(get(PRIORITY, &i).unwrap(), b"5");
        assert_eq!(get(PINNED, &i).unwrap(), b"1");
        assert_eq!(get(REPLICAS, &i).unwrap(), b"2");
        assert_eq!(get(PLACEMENT, &i).unwrap(), b"round-robin");
        assert_eq!(get("user.other", &i), Err(Errno::from_i32(libc::ENODATA)));
        let dir = "user.tierpool.priority\0user.tierpool.pinned\0user.tierpool.replicas\0user.tierpool.placement\0";
        assert_eq!(names(&InodeInfo { kind: InodeKind::Dir, ..info() }), dir.as_bytes());
        assert_eq!(names(&i), format!("{dir}user.tierpool.tiers\0").as_bytes());
        assert_eq!(get(WRITE_MODE, &i), Err(Errno::from_i32(libc::ENODATA)), "not beneath an attachment");
        let mut o = tierpool_meta::Origin {
            attach: tierpool_types::InodeId(2),
            key: "k".into(),
            size: 0,
            mtime: 0,
            etag: String::new(),
            dirty: false,
            mode: None,
        };
        let attached = |o: &tierpool_meta::Origin| InodeInfo { origin: Some(o.clone()), ..info() };
        assert_eq!(names(&attached(&o)), format!("{dir}user.tierpool.tiers\0user.tierpool.write_mode\0").as_bytes());
        assert_eq!(get(WRITE_MODE, &attached(&o)).unwrap(), b"attachment");
        o.mode = Some(WriteMode::PoolOnly);
        assert_eq!(get(WRITE_MODE, &attached(&o)).unwrap(), b"pool-only");
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
        assert_eq!(parse(REPLICAS, b"3\n"), Ok(Change::Replicas(3)));
        assert_eq!(parse(REPLICAS, b"1"), Ok(Change::Replicas(1)));
        for bad in [&b"0"[..], b"-1", b"+2", b"256", b"two", b"", b"\xff"] {
            assert_eq!(parse(REPLICAS, bad), Err(Errno::from_i32(libc::EINVAL)), "{bad:?}");
        }
        assert_eq!(parse(PLACEMENT, b"local-only\n"), Ok(Change::Placement(Placement::LocalOnly)));
        for bad in [&b"Local"[..], b"", b"near"] {
            assert_eq!(parse(PLACEMENT, bad), Err(Errno::from_i32(libc::EINVAL)), "{bad:?}");
        }
        assert_eq!(remove_error(PLACEMENT), Errno::EPERM);
        assert_eq!(parse(TIERS, b"m"), Err(Errno::EPERM));
        assert_eq!(parse("user.other", b"1"), Err(Errno::from_i32(libc::ENOTSUP)));
        assert_eq!((remove_error(PINNED), remove_error("user.x")), (Errno::EPERM, Errno::from_i32(libc::ENODATA)));
        assert_eq!(remove_error(REPLICAS), Errno::EPERM);
        assert_eq!(parse(WRITE_MODE, b"back\n"), Ok(Change::WriteMode(Some(WriteMode::Back))));
        assert_eq!(parse(WRITE_MODE, b"attachment"), Ok(Change::WriteMode(None)));
        for bad in [&b"Back"[..], b"", b"pool_only", b"none"] {
            assert_eq!(parse(WRITE_MODE, bad), Err(Errno::from_i32(libc::EINVAL)), "{bad:?}");
        }
        assert_eq!(remove_error(WRITE_MODE), Errno::EPERM);
    }
}
