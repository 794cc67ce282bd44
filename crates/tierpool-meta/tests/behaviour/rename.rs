//! Rename, with the POSIX rules for every kind of source and target.

use crate::common::*;
use tierpool_meta::{MetaOp, MetaReply, MetaState};
use tierpool_types::{ErrorKind, InodeId};

/// `/d/f` (file, 3 bytes), `/d/sub/g` (file), `/e` (empty dir), `/h` (file).
fn tree() -> MetaState {
    let mut s = ready();
    s.execute(&mkdir_op("/d/sub", true), 2).unwrap();
    mkdir(&mut s, "/e");
    commit(&mut s, "/d/f", 3);
    commit(&mut s, "/d/sub/g", 1);
    commit(&mut s, "/h", 1);
    s
}

#[test]
fn rename_moves_a_file_and_keeps_its_inode() {
    let mut s = tree();
    let id = s.stat("/d/f").unwrap().id;
    let moved = MetaReply::Renamed { moved: id, ctime: 50, gone: None };
    assert_eq!(s.execute(&rename_op("/d/f", "/e/f2"), 50).unwrap(), moved);
    assert_eq!(s.stat("/e/f2").unwrap().id, id);
    assert_eq!(s.stat("/d/f").unwrap_err().kind, ErrorKind::NotFound);
    for dir in ["/d", "/e"] {
        let i = s.stat(dir).unwrap();
        assert_eq!((i.mtime, i.ctime), (50, 50), "{dir}");
    }
    assert!(s.pending_gc().is_empty());
}

#[test]
fn rename_moves_a_directory_with_everything_beneath_it() {
    let mut s = tree();
    let g = s.stat("/d/sub/g").unwrap().id;
    s.execute(&rename_op("/d", "/e/d2"), 5).unwrap();
    assert_eq!(s.stat("/e/d2/sub/g").unwrap().id, g);
    assert_eq!(s.stat("/e").unwrap().nlink, 3);
    assert_eq!(s.inode_count(), 7);
}

#[test]
fn rename_onto_itself_changes_nothing() {
    let mut s = tree();
    let before = s.clone();
    let d = s.stat("/d").unwrap();
    let not_moved = MetaReply::Renamed { moved: d.id, ctime: d.ctime, gone: None };
    assert_eq!(s.execute(&rename_op("/d", "d/."), 5).unwrap(), not_moved);
    assert_eq!(s, before);
}

#[test]
fn rename_of_a_missing_source_is_not_found() {
    let mut s = tree();
    let e = fails(&mut s, rename_op("/nope", "/x"));
    assert_eq!(e, (ErrorKind::NotFound, "/nope: no such file or directory".into()));
    assert_eq!(fails(&mut s, rename_op("/nope", "/nope")).0, ErrorKind::NotFound);
}

#[test]
fn rename_needs_the_target_parent_to_be_a_directory() {
    let mut s = tree();
    assert_eq!(fails(&mut s, rename_op("/h", "/x/y")), (ErrorKind::NotFound, "/x/y: no such file or directory".into()));
    assert_eq!(fails(&mut s, rename_op("/e", "/h/y")), (ErrorKind::NotADirectory, "/h/y: not a directory".into()));
}

#[test]
fn a_directory_cannot_move_into_its_own_subtree() {
    let mut s = tree();
    for to in ["/d/sub/x", "/d/x", "/d/sub/g/x"] {
        assert_eq!(fails(&mut s, rename_op("/d", to)).0, ErrorKind::InvalidArgument, "{to}");
    }
}

#[test]
fn the_root_cannot_be_renamed_nor_replaced() {
    let mut s = tree();
    let e = fails(&mut s, rename_op("/", "/x"));
    assert_eq!(e, (ErrorKind::InvalidArgument, "cannot rename the root directory".into()));
    let e = fails(&mut s, rename_op("/e", "//"));
    assert_eq!(e, (ErrorKind::InvalidArgument, "cannot rename onto the root directory".into()));
}

#[test]
fn a_file_replaces_a_file_and_the_old_one_goes_to_gc() {
    let mut s = tree();
    let f = s.stat("/d/f").unwrap().id;
    let h = s.stat("/h").unwrap().id;
    let reply = s.execute(&rename_op("/d/f", "/h"), 5).unwrap();
    assert_eq!(reply, MetaReply::Renamed { moved: f, ctime: 5, gone: Some(h) });
    assert_eq!(s.stat("/h").unwrap().id, f);
    assert!(s.pending_gc().contains(&h));
    assert_eq!(s.inode_count(), 6);
}

#[test]
fn a_replaced_file_with_another_name_stays() {
    let mut s = tree();
    let (f, h) = (s.stat("/d/f").unwrap().id, s.stat("/h").unwrap().id);
    s.execute(&MetaOp::LinkAt { inode: h, parent: InodeId::ROOT, name: "h2".into() }, 4).unwrap();
    let reply = s.execute(&rename_op("/d/f", "/h"), 5).unwrap();
    assert_eq!(reply, MetaReply::Renamed { moved: f, ctime: 5, gone: None });
    assert_eq!((s.stat("/h2").unwrap().id, s.stat("/h2").unwrap().nlink), (h, 1));
    assert!(s.pending_gc().is_empty());
}

#[test]
fn a_directory_replaces_an_empty_directory() {
    let mut s = tree();
    let sub = s.stat("/d/sub").unwrap().id;
    s.execute(&rename_op("/d/sub", "/e"), 5).unwrap();
    assert_eq!(s.stat("/e").unwrap().id, sub);
    assert_eq!(s.stat("/e/g").unwrap().size, 1);
    assert!(s.pending_gc().is_empty());
    assert_eq!(s.inode_count(), 6);
}

#[test]
fn a_directory_does_not_replace_a_non_empty_directory() {
    let mut s = tree();
    let e = fails(&mut s, rename_op("/e", "/d"));
    assert_eq!(e, (ErrorKind::DirectoryNotEmpty, "/d: directory not empty".into()));
    // Moving a directory over its own non-empty ancestor is the same case.
    assert_eq!(fails(&mut s, rename_op("/d/sub", "/d")).0, ErrorKind::DirectoryNotEmpty);
}

#[test]
fn a_file_does_not_replace_a_directory() {
    let mut s = tree();
    assert_eq!(fails(&mut s, rename_op("/h", "/e")), (ErrorKind::IsADirectory, "/e: is a directory".into()));
}

#[test]
fn a_directory_does_not_replace_a_file() {
    let mut s = tree();
    assert_eq!(fails(&mut s, rename_op("/e", "/h")), (ErrorKind::NotADirectory, "/h: not a directory".into()));
}
