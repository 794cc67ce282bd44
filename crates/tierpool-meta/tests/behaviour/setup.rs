//! Init, inode reservation, attributes, workers, garbage collection, and the
//! read side (`stat`, `list`).

use crate::common::*;
use tierpool_meta::{InodeKind, MetaOp, MetaReply, MetaState};
use tierpool_types::{ChunkAttrs, ErrorKind, InodeId, Priority};

#[test]
fn init_creates_the_root_directory() {
    let s = ready();
    assert!(s.is_initialised());
    let root = s.stat("/").unwrap();
    assert_eq!((root.id, root.kind, root.mode, root.nlink, root.size), (InodeId::ROOT, InodeKind::Dir, 0o755, 2, 0));
    assert_eq!((root.mtime, root.chunk_size, root.chunks.len()), (1, 0, 0));
    assert_eq!((s.inode_count(), s.table().partitions()), (1, 16));
}

#[test]
fn init_runs_once_and_needs_a_partition() {
    let mut s = ready();
    assert_eq!(fails(&mut s, MetaOp::Init { partitions: 16 }).0, ErrorKind::InvalidArgument);
    let mut fresh = MetaState::new();
    assert_eq!(fails(&mut fresh, MetaOp::Init { partitions: 0 }).0, ErrorKind::InvalidArgument);
}

#[test]
fn alloc_inodes_reserves_consecutive_ranges_after_the_root() {
    let mut s = ready();
    assert_eq!(
        s.execute(&MetaOp::AllocInodes { count: 3 }, 2).unwrap(),
        MetaReply::Inodes { first: InodeId(2), count: 3 }
    );
    mkdir(&mut s, "/d");
    assert_eq!(s.stat("/d").unwrap().id, InodeId(5));
    assert_eq!(
        s.execute(&MetaOp::AllocInodes { count: 1 }, 2).unwrap(),
        MetaReply::Inodes { first: InodeId(6), count: 1 }
    );
    assert_eq!(fails(&mut s, MetaOp::AllocInodes { count: 0 }).0, ErrorKind::InvalidArgument);
    assert_eq!(fails(&mut s, MetaOp::AllocInodes { count: u64::MAX }).0, ErrorKind::InvalidArgument);
}

#[test]
fn set_attrs_on_a_file_changes_it_and_its_ctime() {
    let mut s = ready();
    let id = commit(&mut s, "/f", 1).id;
    let op = MetaOp::SetAttrs { path: "/f".into(), priority: Priority::new(1).ok(), pinned: None };
    let want = ChunkAttrs { priority: Priority::new(1).unwrap(), pinned: false };
    assert_eq!(s.execute(&op, 77).unwrap(), MetaReply::Attrs { changed: vec![(id, want)] });
    let info = s.stat("/f").unwrap();
    assert_eq!((info.attrs, info.ctime, info.mtime), (want, 77, 2));
}

#[test]
fn set_attrs_on_a_directory_changes_every_file_beneath_it() {
    let mut s = ready();
    s.execute(&mkdir_op("/d/sub", true), 2).unwrap();
    let a = commit(&mut s, "/d/sub/a", 1).id;
    let b = commit(&mut s, "/d/b", 1).id;
    let outside = commit(&mut s, "/c", 1).id;
    let op = MetaOp::SetAttrs { path: "/d".into(), priority: None, pinned: Some(true) };
    let pinned = ChunkAttrs { pinned: true, ..ChunkAttrs::default() };
    assert_eq!(s.execute(&op, 9).unwrap(), MetaReply::Attrs { changed: vec![(a, pinned), (b, pinned)] });
    assert_eq!((s.stat("/d").unwrap().attrs, s.stat("/d").unwrap().ctime), (pinned, 9));
    assert_eq!(s.stat("/d/sub").unwrap().attrs, pinned);
    assert_eq!(s.stat("/c").unwrap().attrs, ChunkAttrs::default());
    assert_ne!(outside, a);
    let e = fails(&mut s, MetaOp::SetAttrs { path: "/x".into(), priority: None, pinned: Some(true) });
    assert_eq!(e, (ErrorKind::NotFound, "/x: no such file or directory".into()));
}

#[test]
fn set_meta_changes_mode_bits_and_mtime_of_one_inode() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 1);
    let chmod = MetaOp::SetMeta { path: "/f".into(), mode: Some(0o100_4755), mtime: None };
    let MetaReply::Info(after) = s.execute(&chmod, 50).unwrap() else { panic!("not an Info reply") };
    assert_eq!((after.id, after.mode, after.mtime, after.ctime, after.size), (f.id, 0o4755, 2, 50, 1));
    let touch = MetaOp::SetMeta { path: "/f".into(), mode: None, mtime: Some(1_000) };
    s.execute(&touch, 60).unwrap();
    let info = s.stat("/f").unwrap();
    assert_eq!((info.mode, info.mtime, info.ctime, info.chunks), (0o4755, 1_000, 60, f.chunks));
    // one inode only: a directory's mode changes, not its children's
    s.execute(&mkdir_op("/d", false), 2).unwrap();
    commit(&mut s, "/d/a", 1);
    s.execute(&MetaOp::SetMeta { path: "/d".into(), mode: Some(0o700), mtime: Some(7) }, 70).unwrap();
    let d = s.stat("/d").unwrap();
    assert_eq!((d.kind, d.mode, d.mtime, d.ctime, d.nlink), (InodeKind::Dir, 0o700, 7, 70, 2));
    assert_eq!(s.stat("/d/a").unwrap().mode, 0o644);
    let e = fails(&mut s, MetaOp::SetMeta { path: "/x".into(), mode: Some(0o600), mtime: None });
    assert_eq!(e, (ErrorKind::NotFound, "/x: no such file or directory".into()));
}

#[test]
fn gc_done_forgets_collected_inodes_and_ignores_unknown_ones() {
    let mut s = ready();
    let a = commit(&mut s, "/a", 1).id;
    let b = commit(&mut s, "/b", 1).id;
    s.execute(&remove_op("/a", false), 2).unwrap();
    s.execute(&remove_op("/b", false), 2).unwrap();
    s.execute(&MetaOp::GcDone { inodes: vec![a, InodeId(999)] }, 3).unwrap();
    assert_eq!(s.pending_gc().iter().copied().collect::<Vec<_>>(), vec![b]);
}

#[test]
fn directories_count_entries_and_subdirectory_links() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    mkdir(&mut s, "/d/x");
    mkdir(&mut s, "/d/y");
    commit(&mut s, "/d/f", 1);
    let d = s.stat("/d").unwrap();
    assert_eq!((d.size, d.nlink, d.attrs, d.chunks.len()), (3, 4, ChunkAttrs::default(), 0));
}

#[test]
fn list_of_a_directory_is_sorted_by_name() {
    let mut s = ready();
    for name in ["/c", "/a", "/B"] {
        mkdir(&mut s, name);
    }
    commit(&mut s, "/b", 1);
    let names: Vec<String> = s.list("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["B", "a", "b", "c"]);
    assert!(s.list("/a").unwrap().is_empty());
}

#[test]
fn list_of_a_file_is_the_file_itself() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let info = commit(&mut s, "/d/f", 5);
    let entries = s.list("d//f").unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].name.as_str(), &entries[0].info), ("f", &info));
    assert_eq!(s.list("/d/g").unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.stat("/d/f/x").unwrap_err().kind, ErrorKind::NotADirectory);
    assert_eq!(s.stat("/../d").unwrap_err().kind, ErrorKind::InvalidArgument);
}
