//! CommitRegion: regions live in the namespace beside files.

use crate::common::*;
use tierpool_meta::{InodeKind, MetaOp, MetaReply, MetaState};
use tierpool_types::{ChunkAttrs, ErrorKind, InodeId, Priority};

fn region_op(path: &str, inode: InodeId, size: u64) -> MetaOp {
    MetaOp::CommitRegion {
        path: path.into(),
        inode,
        size,
        chunk_size: CHUNK,
        attrs: ChunkAttrs { priority: Priority::new(4).unwrap(), pinned: false },
        mode: 0o600,
    }
}

fn region(s: &mut MetaState, path: &str, size: u64) -> InodeId {
    let id = alloc(s);
    s.execute(&region_op(path, id, size), 3).unwrap();
    id
}

#[test]
fn a_region_is_stated_and_listed_with_its_kind() {
    let mut s = ready();
    mkdir(&mut s, "/m");
    let id = alloc(&mut s);
    let MetaReply::Info(info) = s.execute(&region_op("/m/r", id, 10 * CHUNK + 1), 3).unwrap() else { panic!() };
    assert_eq!(
        (info.id, info.kind, info.size, info.chunk_size, info.mode, info.nlink, info.chunks.len()),
        (id, InodeKind::Region, 10 * CHUNK + 1, CHUNK, 0o600, 1, 0)
    );
    assert_eq!(info.attrs.priority.get(), 4);
    assert_eq!(s.stat("/m/r").unwrap(), info);
    let entries = s.list("/m").unwrap();
    assert_eq!((entries.len(), entries[0].name.as_str(), entries[0].info.kind), (1, "r", InodeKind::Region));
    s.check_invariants().unwrap();
}

#[test]
fn a_region_never_replaces_an_entry() {
    let mut s = ready();
    commit(&mut s, "/f", 5);
    mkdir(&mut s, "/d");
    let id = alloc(&mut s);
    assert_eq!(fails(&mut s, region_op("/f", id, CHUNK)), (ErrorKind::AlreadyExists, "/f: file exists".into()));
    assert_eq!(fails(&mut s, region_op("/d", id, CHUNK)).0, ErrorKind::IsADirectory);
    assert_eq!(fails(&mut s, region_op("/no/r", id, CHUNK)).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, region_op("/r", InodeId(9999), CHUNK)).1, "inode 9999 was never reserved");
}

#[test]
fn removing_or_renaming_a_region_works_like_a_file() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let id = region(&mut s, "/d/r", 3 * CHUNK);
    s.execute(&rename_op("/d/r", "/r2"), 4).unwrap();
    assert_eq!(s.stat("/r2").unwrap().id, id);
    assert_eq!(s.execute(&remove_op("/r2", false), 5).unwrap(), MetaReply::Removed { inodes: 1, gone: Some(id) });
    assert!(s.pending_gc().contains(&id), "its chunks are collected");
    let id2 = region(&mut s, "/d/r", CHUNK);
    s.execute(&remove_op("/d", true), 6).unwrap();
    assert!(s.pending_gc().contains(&id2));
    s.check_invariants().unwrap();
}

#[test]
fn attributes_of_a_tree_reach_its_regions() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let id = region(&mut s, "/d/r", CHUNK);
    let op = MetaOp::SetAttrs { path: "/d".into(), priority: None, pinned: Some(true) };
    let MetaReply::Attrs { changed } = s.execute(&op, 7).unwrap() else { panic!() };
    assert_eq!(changed.len(), 1);
    assert_eq!((changed[0].0, changed[0].1.pinned), (id, true));
}
