//! Mkdir, CommitFile and Remove, rule by rule.

use crate::common::*;
use tierpool_meta::{InodeKind, MetaOp, MetaReply, MetaState};
use tierpool_types::{ChunkAttrs, ErrorKind, InodeId, Priority};

#[test]
fn mkdir_creates_a_directory_under_an_existing_one() {
    let mut s = ready();
    assert_eq!(s.execute(&mkdir_op("/a", false), 5).unwrap(), MetaReply::Done);
    assert_eq!(s.execute(&mkdir_op("a/b/", false), 6).unwrap(), MetaReply::Done);
    let b = s.stat("/a/b").unwrap();
    assert_eq!((b.kind, b.mode, b.mtime, b.ctime), (InodeKind::Dir, 0o755, 6, 6));
    assert_eq!(s.inode_count(), 3);
}

#[test]
fn mkdir_of_an_existing_path_is_already_exists() {
    let mut s = ready();
    mkdir(&mut s, "/a");
    commit(&mut s, "/f", 1);
    assert_eq!(fails(&mut s, mkdir_op("/a", false)), (ErrorKind::AlreadyExists, "/a: file exists".into()));
    assert_eq!(fails(&mut s, mkdir_op("//a/.", false)).1, "/a: file exists");
    assert_eq!(fails(&mut s, mkdir_op("/f", true)).0, ErrorKind::AlreadyExists);
    assert_eq!(fails(&mut s, mkdir_op("/", false)), (ErrorKind::AlreadyExists, "/: file exists".into()));
}

#[test]
fn mkdir_with_parents_accepts_an_existing_directory_and_the_root() {
    let mut s = ready();
    mkdir(&mut s, "/a");
    let before = s.clone();
    assert_eq!(s.execute(&mkdir_op("/a", true), 9).unwrap(), MetaReply::Done);
    assert_eq!(s.execute(&mkdir_op("/", true), 9).unwrap(), MetaReply::Done);
    assert_eq!(s, before);
}

#[test]
fn mkdir_with_parents_creates_every_missing_ancestor() {
    let mut s = ready();
    s.execute(&mkdir_op("/a/b/c", true), 7).unwrap();
    for p in ["/a", "/a/b", "/a/b/c"] {
        assert_eq!(s.stat(p).unwrap().kind, InodeKind::Dir, "{p}");
    }
    assert_eq!(s.inode_count(), 4);
    assert_eq!(s.stat("/").unwrap().mtime, 7);
}

#[test]
fn mkdir_without_parents_needs_the_parent() {
    let mut s = ready();
    assert_eq!(fails(&mut s, mkdir_op("/a/b", false)), (ErrorKind::NotFound, "/a/b: no such file or directory".into()));
}

#[test]
fn mkdir_through_a_file_is_not_a_directory() {
    let mut s = ready();
    commit(&mut s, "/f", 10);
    assert_eq!(fails(&mut s, mkdir_op("/f/d", false)), (ErrorKind::NotADirectory, "/f/d: not a directory".into()));
    assert_eq!(fails(&mut s, mkdir_op("/f/d/e", true)).0, ErrorKind::NotADirectory);
}

#[test]
fn commit_publishes_a_file_with_its_chunks_and_attrs() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let id = alloc(&mut s);
    let attrs = ChunkAttrs { priority: Priority::new(5).unwrap(), pinned: true };
    let op = MetaOp::CommitFile {
        path: "/d/f".into(),
        inode: id,
        size: 8193,
        chunk_size: 4096,
        checksums: vec![7, 8, 9],
        homes: Vec::new(),
        attrs,
        mode: 0o100640,
        overwrite: false,
    };
    let MetaReply::Info(info) = s.execute(&op, 42).unwrap() else { panic!("not an Info reply") };
    assert_eq!((info.id, info.kind, info.size, info.chunk_size), (id, InodeKind::File, 8193, 4096));
    assert_eq!((info.mode, info.nlink, info.mtime, info.ctime), (0o640, 1, 42, 42));
    let chunks: Vec<_> = info.chunks.iter().map(|c| (c.version, c.len, c.checksum)).collect();
    assert_eq!((info.attrs, chunks), (attrs, vec![(1, 4096, 7), (1, 4096, 8), (1, 1, 9)]));
    assert_eq!(s.stat("/d/f").unwrap(), info);
    let d = s.stat("/d").unwrap();
    assert_eq!((d.size, d.mtime, d.ctime), (1, 42, 42));
}

#[test]
fn an_empty_file_has_no_chunks() {
    let mut s = ready();
    let info = commit(&mut s, "/empty", 0);
    assert_eq!((info.size, info.chunks.len()), (0, 0));
    let id = alloc(&mut s);
    let mut op = commit_op("/e2", id, 0, false);
    if let MetaOp::CommitFile { checksums, .. } = &mut op {
        checksums.push(1);
    }
    assert_eq!(fails(&mut s, op).0, ErrorKind::InvalidArgument);
}

#[test]
fn commit_checks_chunk_size_and_checksum_count() {
    let mut s = ready();
    let id = alloc(&mut s);
    for (chunk_size, n) in [(0, 0), (1000, 1), (128 << 20, 1), (4096, 2), (4096, 0)] {
        let op = MetaOp::CommitFile {
            path: "/f".into(),
            inode: id,
            size: 4096,
            chunk_size,
            checksums: vec![0; n],
            homes: Vec::new(),
            attrs: ChunkAttrs::default(),
            mode: 0o644,
            overwrite: false,
        };
        assert_eq!(fails(&mut s, op).0, ErrorKind::InvalidArgument, "chunk size {chunk_size}, {n} checksums");
    }
}

#[test]
fn commit_takes_only_a_reserved_unused_inode() {
    let mut s = ready();
    let used = commit(&mut s, "/f", 1).id;
    s.execute(&remove_op("/f", false), 3).unwrap();
    let next = alloc(&mut s).0 + 1;
    for bad in [0, InodeId::ROOT.0, used.0, next, next + 100] {
        let (kind, _) = fails(&mut s, commit_op("/g", InodeId(bad), 1, false));
        assert_eq!(kind, ErrorKind::InvalidArgument, "inode {bad}");
    }
}

#[test]
fn commit_over_a_directory_is_is_a_directory() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let id = alloc(&mut s);
    assert_eq!(fails(&mut s, commit_op("/d", id, 1, true)), (ErrorKind::IsADirectory, "/d: is a directory".into()));
    assert_eq!(fails(&mut s, commit_op("/", id, 1, true)).0, ErrorKind::IsADirectory);
}

#[test]
fn commit_needs_an_existing_parent_directory() {
    let mut s = ready();
    commit(&mut s, "/f", 1);
    let id = alloc(&mut s);
    assert_eq!(fails(&mut s, commit_op("/x/g", id, 1, false)).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, commit_op("/f/g", id, 1, false)).0, ErrorKind::NotADirectory);
}

#[test]
fn commit_over_a_file_needs_overwrite_and_queues_the_old_inode() {
    let mut s = ready();
    let old = commit(&mut s, "/f", 5).id;
    let id = alloc(&mut s);
    assert_eq!(fails(&mut s, commit_op("/f", id, 9, false)), (ErrorKind::AlreadyExists, "/f: file exists".into()));
    s.execute(&commit_op("/f", id, 9, true), 3).unwrap();
    assert_eq!(s.stat("/f").unwrap().id, id);
    assert_eq!(s.stat("/f").unwrap().size, 9);
    assert!(s.pending_gc().contains(&old));
    assert_eq!(s.inode_count(), 2);
}

#[test]
fn remove_of_a_file_queues_its_inode_for_gc() {
    let mut s = ready();
    let id = commit(&mut s, "/f", 1).id;
    assert_eq!(s.execute(&remove_op("/f", false), 8).unwrap(), MetaReply::Removed { inodes: 1, gone: Some(id) });
    assert_eq!(fails(&mut s, MetaOp::Mkdir { path: "/f/x".into(), parents: false, mode: 0 }).0, ErrorKind::NotFound);
    assert!(s.pending_gc().contains(&id));
    assert_eq!((s.stat("/").unwrap().mtime, s.inode_count()), (8, 1));
}

#[test]
fn remove_of_the_root_is_invalid() {
    let mut s = ready();
    for recursive in [false, true] {
        let e = fails(&mut s, remove_op("/", recursive));
        assert_eq!(e, (ErrorKind::InvalidArgument, "cannot remove the root directory".into()));
    }
}

#[test]
fn remove_of_a_missing_path_is_not_found() {
    let mut s = ready();
    assert_eq!(fails(&mut s, remove_op("x", true)), (ErrorKind::NotFound, "/x: no such file or directory".into()));
}

#[test]
fn remove_of_a_non_empty_directory_needs_recursive() {
    let mut s = ready();
    s.execute(&mkdir_op("/a/b", true), 2).unwrap();
    let a = s.stat("/a").unwrap().id;
    let f1 = commit(&mut s, "/a/f", 1).id;
    let f2 = commit(&mut s, "/a/b/g", 1).id;
    assert_eq!(fails(&mut s, remove_op("/a", false)), (ErrorKind::DirectoryNotEmpty, "/a: directory not empty".into()));
    assert_eq!(s.execute(&remove_op("/a", true), 3).unwrap(), MetaReply::Removed { inodes: 4, gone: Some(a) });
    assert_eq!(s.pending_gc().iter().copied().collect::<Vec<_>>(), vec![f1, f2]);
    assert_eq!(s.inode_count(), 1);
}

#[test]
fn remove_of_an_empty_directory_needs_no_gc() {
    let mut s = ready();
    mkdir(&mut s, "/d");
    let d = s.stat("/d").unwrap().id;
    assert_eq!(s.execute(&remove_op("/d", false), 3).unwrap(), MetaReply::Removed { inodes: 1, gone: Some(d) });
    assert!(s.pending_gc().is_empty());
}

#[test]
fn every_op_but_init_fails_before_init() {
    let mut s = MetaState::new();
    for op in [
        mkdir_op("/a", true),
        MetaOp::AllocInodes { count: 1 },
        remove_op("/a", true),
        MetaOp::GcDone { inodes: vec![] },
    ] {
        assert_eq!(fails(&mut s, op), (ErrorKind::InvalidArgument, "pool is not initialised".into()));
    }
    assert_eq!(s.stat("/").unwrap_err().message, "pool is not initialised");
    assert_eq!(s.list("/").unwrap_err().kind, ErrorKind::InvalidArgument);
    assert!(!s.is_initialised());
}
