//! The ops a file system uses, addressed by directory inode and entry name:
//! making files, directories, symlinks and special files with an owner,
//! hard links, unlink/rmdir, rename with `noreplace`, owners and times, and
//! the queries by inode.

use crate::common::*;
use tierpool_meta::{DirName, InodeInfo, InodeKind, MetaOp, MetaReply, MetaState, NewNode, Owner};
use tierpool_types::{ErrorKind, InodeId};

const ROOT: InodeId = InodeId::ROOT;

fn make(s: &mut MetaState, parent: InodeId, name: &str, node: NewNode, mode: u32) -> InodeInfo {
    make_as(s, (1000, 100), parent, name, node, mode)
}

fn make_as(
    s: &mut MetaState,
    (uid, gid): (u32, u32),
    parent: InodeId,
    name: &str,
    node: NewNode,
    mode: u32,
) -> InodeInfo {
    let op = MetaOp::MakeAt { parent, name: name.into(), node, mode };
    match s.execute_as(&op, Owner { uid, gid }, 10).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

fn file() -> NewNode {
    NewNode::File { chunk_size: CHUNK }
}

#[test]
fn make_at_creates_every_kind_owned_by_the_caller() {
    let mut s = ready();
    let d = make(&mut s, ROOT, "d", NewNode::Dir, 0o750);
    assert_eq!((d.kind, d.mode, d.uid, d.gid, d.nlink), (InodeKind::Dir, 0o750, 1000, 100, 2));
    let f = make(&mut s, d.id, "f", file(), 0o100_640);
    assert_eq!((f.kind, f.size, f.chunk_size, f.mode, f.nlink), (InodeKind::File, 0, CHUNK, 0o640, 1));
    assert_eq!((f.atime, f.mtime, f.ctime), (10, 10, 10));
    let l = make(&mut s, d.id, "l", NewNode::Symlink { target: "../x/y".into() }, 0o777);
    assert_eq!((l.kind, l.target.as_str(), l.size), (InodeKind::Symlink, "../x/y", 6));
    let p = make(&mut s, d.id, "p", NewNode::Special { kind: InodeKind::Fifo, rdev: 9 }, 0o644);
    assert_eq!((p.kind, p.rdev), (InodeKind::Fifo, 0), "a pipe has no device number");
    let c = make(&mut s, d.id, "c", NewNode::Special { kind: InodeKind::CharDevice, rdev: 0x0103 }, 0o600);
    assert_eq!((c.kind, c.rdev), (InodeKind::CharDevice, 0x0103));
    assert_eq!(s.stat("/d/l").unwrap(), l);
    let names: Vec<(String, InodeKind)> = s.read_dir(d.id).unwrap().into_iter().map(|e| (e.name, e.kind)).collect();
    assert_eq!(
        names,
        [
            ("c".into(), InodeKind::CharDevice),
            ("f".into(), InodeKind::File),
            ("l".into(), InodeKind::Symlink),
            ("p".into(), InodeKind::Fifo)
        ]
    );
    // ops run without an owner create inodes owned by root
    s.execute(&mkdir_op("/r", false), 11).unwrap();
    let r = s.stat("/r").unwrap();
    assert_eq!((r.uid, r.gid), (0, 0));
    s.check_invariants().unwrap();
}

#[test]
fn make_at_refuses_bad_names_targets_and_places() {
    let mut s = ready();
    let f = make(&mut s, ROOT, "f", file(), 0o644);
    let cases: Vec<(InodeId, &str, NewNode, ErrorKind, &str)> = vec![
        (ROOT, "f", NewNode::Dir, ErrorKind::AlreadyExists, "f: file exists"),
        (f.id, "x", NewNode::Dir, ErrorKind::NotADirectory, "x: not a directory"),
        (InodeId(999), "x", NewNode::Dir, ErrorKind::NotFound, "inode 999 no longer exists"),
        (ROOT, "..", NewNode::Dir, ErrorKind::InvalidArgument, "\"..\" is not a valid name for a directory entry"),
        (ROOT, "a/b", NewNode::Dir, ErrorKind::InvalidArgument, "\"a/b\" is not a valid name for a directory entry"),
        (ROOT, "l", NewNode::Symlink { target: String::new() }, ErrorKind::InvalidArgument, ""),
        (ROOT, "s", NewNode::Special { kind: InodeKind::File, rdev: 0 }, ErrorKind::InvalidArgument, ""),
        (ROOT, "g", NewNode::File { chunk_size: 1000 }, ErrorKind::InvalidArgument, ""),
    ];
    for (parent, name, node, kind, message) in cases {
        let op = MetaOp::MakeAt { parent, name: name.into(), node, mode: 0o644 };
        let (k, m) = fails(&mut s, op);
        assert_eq!(k, kind, "{name}: {m}");
        if !message.is_empty() {
            assert_eq!(m, message);
        }
    }
    let long = "x".repeat(256);
    assert_eq!(
        fails(&mut s, MetaOp::MakeAt { parent: ROOT, name: long, node: file(), mode: 0 }).0,
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_set_group_id_directory_hands_its_group_down() {
    let mut s = ready();
    let d = make_as(&mut s, (1, 50), ROOT, "shared", NewNode::Dir, 0o2775);
    assert_eq!(d.mode, 0o2775);
    let f = make_as(&mut s, (2, 60), d.id, "f", file(), 0o644);
    assert_eq!((f.uid, f.gid, f.mode), (2, 50, 0o644));
    let sub = make_as(&mut s, (2, 60), d.id, "sub", NewNode::Dir, 0o755);
    assert_eq!((sub.uid, sub.gid, sub.mode), (2, 50, 0o2755), "a new directory inherits the bit");
    let plain = make_as(&mut s, (2, 60), ROOT, "plain", NewNode::Dir, 0o755);
    assert_eq!((plain.gid, plain.mode), (60, 0o755));
}

#[test]
fn a_file_made_with_a_reserved_id_is_as_make_at_makes_it() {
    let mut s = ready();
    let d = make_as(&mut s, (1, 50), ROOT, "shared", NewNode::Dir, 0o2775);
    let MetaReply::Inodes { first, count: 3 } = s.execute(&MetaOp::AllocInodes { count: 3 }, 5).unwrap() else {
        panic!("not an Inodes reply")
    };
    let made = MetaOp::MakeFileAt { parent: d.id, name: "f".into(), inode: first, chunk_size: CHUNK, mode: 0o100_640 };
    let MetaReply::Info(f) = s.execute_as(&made, Owner { uid: 2, gid: 60 }, 20).unwrap() else {
        panic!("not an Info reply")
    };
    assert_eq!((f.id, f.kind, f.size, f.chunk_size, f.nlink), (first, InodeKind::File, 0, CHUNK, 1));
    assert_eq!((f.uid, f.gid, f.mode), (2, 50, 0o640), "owned by the caller, the group of a set-group-id directory");
    assert_eq!((f.atime, f.mtime, f.ctime), (20, 20, 20));
    assert_eq!(s.stat("/shared/f").unwrap(), f);
    assert_eq!(s.stat("/shared").unwrap().mtime, 20, "the directory gaining the name changes");
    let again = |name: &str, inode: InodeId| MetaOp::MakeFileAt {
        parent: d.id,
        name: name.into(),
        inode,
        chunk_size: CHUNK,
        mode: 0o644,
    };
    let second = InodeId(first.0 + 1);
    let cases = [
        (again("f", second), ErrorKind::AlreadyExists, "f: file exists".to_string()),
        (again("g", first), ErrorKind::InvalidArgument, format!("inode {first} is already in use")),
        (
            again("g", InodeId(first.0 + 3)),
            ErrorKind::InvalidArgument,
            format!("inode {} was never reserved", first.0 + 3),
        ),
        (again("..", second), ErrorKind::InvalidArgument, "\"..\" is not a valid name for a directory entry".into()),
    ];
    for (op, kind, message) in cases {
        assert_eq!(fails(&mut s, op), (kind, message));
    }
    let in_file = MetaOp::MakeFileAt { parent: f.id, name: "x".into(), inode: second, chunk_size: CHUNK, mode: 0 };
    assert_eq!(fails(&mut s, in_file).0, ErrorKind::NotADirectory);
    let bad_chunk = MetaOp::MakeFileAt { parent: d.id, name: "x".into(), inode: second, chunk_size: 1000, mode: 0 };
    assert_eq!(fails(&mut s, bad_chunk).0, ErrorKind::InvalidArgument);
    s.check_invariants().unwrap();
}

#[test]
fn hard_links_share_one_inode_until_the_last_name_goes() {
    let mut s = ready();
    let d = make(&mut s, ROOT, "d", NewNode::Dir, 0o755);
    let f = make(&mut s, ROOT, "f", file(), 0o644);
    let MetaReply::Info(linked) =
        s.execute(&MetaOp::LinkAt { inode: f.id, parent: d.id, name: "g".into() }, 20).unwrap()
    else {
        panic!("not an Info reply")
    };
    assert_eq!((linked.id, linked.nlink, linked.ctime), (f.id, 2, 20));
    assert_eq!(s.stat("/d/g").unwrap().id, f.id);
    assert_eq!(s.stat("/d").unwrap().mtime, 20, "the directory gaining the name changes");
    s.check_invariants().unwrap();
    // a directory cannot be linked; an existing name is EEXIST
    assert_eq!(
        fails(&mut s, MetaOp::LinkAt { inode: d.id, parent: ROOT, name: "d2".into() }).0,
        ErrorKind::IsADirectory
    );
    assert_eq!(
        fails(&mut s, MetaOp::LinkAt { inode: f.id, parent: ROOT, name: "d".into() }).0,
        ErrorKind::AlreadyExists
    );
    // removing one name keeps the inode; the last one queues it for collection
    let r = s.execute(&MetaOp::RemoveAt { parent: ROOT, name: "f".into(), dir: false }, 30).unwrap();
    assert_eq!(r, MetaReply::Removed { inodes: 0, gone: None }, "its other name keeps it");
    let g = s.stat("/d/g").unwrap();
    assert_eq!((g.nlink, g.ctime), (1, 30));
    assert!(s.pending_gc().is_empty());
    s.check_invariants().unwrap();
    // rename onto another name of the same inode changes nothing
    s.execute(&MetaOp::LinkAt { inode: f.id, parent: ROOT, name: "f".into() }, 31).unwrap();
    let before = s.clone();
    s.execute(&rename_op("/f", "/d/g"), 32).unwrap();
    assert_eq!(s, before);
    // a recursive remove of a tree holding one name leaves the other
    s.execute(&remove_op("/d", true), 40).unwrap();
    assert_eq!(s.stat("/f").unwrap().nlink, 1);
    assert!(s.pending_gc().is_empty());
    s.execute(&remove_op("/f", false), 41).unwrap();
    assert!(s.pending_gc().contains(&f.id));
    s.check_invariants().unwrap();
}

#[test]
fn remove_at_is_unlink_or_rmdir() {
    let mut s = ready();
    let d = make(&mut s, ROOT, "d", NewNode::Dir, 0o755);
    make(&mut s, d.id, "f", file(), 0o644);
    let rm = |name: &str, dir| MetaOp::RemoveAt { parent: ROOT, name: name.into(), dir };
    assert_eq!(fails(&mut s, rm("d", false)), (ErrorKind::IsADirectory, "d: is a directory".into()));
    assert_eq!(fails(&mut s, rm("d", true)), (ErrorKind::DirectoryNotEmpty, "d: directory not empty".into()));
    assert_eq!(fails(&mut s, rm("x", true)), (ErrorKind::NotFound, "x: no such file or directory".into()));
    let unlink_f = MetaOp::RemoveAt { parent: d.id, name: "f".into(), dir: true };
    assert_eq!(fails(&mut s, unlink_f).0, ErrorKind::NotADirectory);
    s.execute(&MetaOp::RemoveAt { parent: d.id, name: "f".into(), dir: false }, 50).unwrap();
    assert_eq!(s.execute(&rm("d", true), 51).unwrap(), MetaReply::Removed { inodes: 1, gone: Some(d.id) });
    assert_eq!(s.stat_inode(d.id, false).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.stat("/").unwrap().mtime, 51);
}

#[test]
fn rename_at_moves_entries_and_honours_noreplace() {
    let mut s = ready();
    let a = make(&mut s, ROOT, "a", NewNode::Dir, 0o755);
    let b = make(&mut s, a.id, "b", NewNode::Dir, 0o755);
    let f = make(&mut s, ROOT, "f", file(), 0o644);
    make(&mut s, ROOT, "g", file(), 0o644);
    let mv = |p: InodeId, n: &str, np: InodeId, nn: &str, noreplace| MetaOp::RenameAt {
        parent: p,
        name: n.into(),
        new_parent: np,
        new_name: nn.into(),
        noreplace,
    };
    assert_eq!(fails(&mut s, mv(ROOT, "f", ROOT, "g", true)), (ErrorKind::AlreadyExists, "g: file exists".into()));
    assert_eq!(fails(&mut s, mv(ROOT, "a", b.id, "x", false)).0, ErrorKind::InvalidArgument, "into itself");
    assert_eq!(fails(&mut s, mv(ROOT, "a", ROOT, "g", false)).0, ErrorKind::NotADirectory);
    assert_eq!(fails(&mut s, mv(ROOT, "nope", ROOT, "x", false)).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, mv(f.id, "x", ROOT, "y", false)).0, ErrorKind::NotADirectory);
    s.execute(&mv(ROOT, "f", b.id, "f2", false), 60).unwrap();
    assert_eq!(s.lookup_at(b.id, "f2").unwrap().id, f.id);
    assert_eq!(s.lookup_at(b.id, "f2").unwrap().ctime, 60);
    s.execute(&mv(ROOT, "g", b.id, "f2", false), 61).unwrap();
    assert!(s.pending_gc().contains(&f.id), "the replaced file is collected");
    assert_eq!(s.parent_of(b.id).unwrap(), a.id);
    s.execute(&mv(a.id, "b", ROOT, "b", true), 62).unwrap();
    assert_eq!(s.parent_of(b.id).unwrap(), ROOT);
    s.check_invariants().unwrap();
}

#[test]
fn set_inode_changes_owner_mode_and_times() {
    let mut s = ready();
    let f = make(&mut s, ROOT, "f", file(), 0o644);
    let op = MetaOp::SetInode { inode: f.id, mode: Some(0o4711), uid: Some(7), gid: None, atime: Some(3), mtime: None };
    let MetaReply::Info(i) = s.execute(&op, 70).unwrap() else { panic!("not an Info reply") };
    assert_eq!((i.mode, i.uid, i.gid, i.atime, i.mtime, i.ctime), (0o4711, 7, 100, 3, 10, 70));
    let op = MetaOp::SetInode { inode: f.id, mode: None, uid: None, gid: Some(8), atime: None, mtime: Some(5) };
    s.execute(&op, 71).unwrap();
    let i = s.stat_inode(f.id, false).unwrap();
    assert_eq!((i.uid, i.gid, i.atime, i.mtime, i.ctime), (7, 8, 3, 5, 71));
    let gone = MetaOp::SetInode { inode: InodeId(555), mode: None, uid: None, gid: None, atime: None, mtime: None };
    assert_eq!(fails(&mut s, gone).0, ErrorKind::NotFound);
}

#[test]
fn inode_queries_leave_chunks_out_unless_asked() {
    let mut s = ready();
    let f = commit(&mut s, "/f", 3 * CHUNK);
    assert_eq!(s.stat_inode(f.id, true).unwrap(), f);
    let light = s.stat_inode(f.id, false).unwrap();
    assert!(light.chunks.is_empty() && !light.has_chunks() && f.has_chunks());
    assert_eq!(InodeInfo { chunks: f.chunks.clone(), ..light.clone() }, f);
    assert_eq!(s.lookup_at(ROOT, "f").unwrap(), light);
    assert_eq!(s.lookup_at(ROOT, "x").unwrap_err().message, "x: no such file or directory");
    assert_eq!(s.lookup_at(f.id, "x").unwrap_err().kind, ErrorKind::NotADirectory);
    assert_eq!(s.read_dir(ROOT).unwrap(), vec![DirName { name: "f".into(), id: f.id, kind: InodeKind::File }]);
    assert_eq!(s.read_dir(f.id).unwrap_err().kind, ErrorKind::NotADirectory);
    assert_eq!(s.parent_of(ROOT).unwrap(), ROOT);
}

#[test]
fn set_attrs_at_reaches_a_whole_tree_by_inode() {
    let mut s = ready();
    let d = make(&mut s, ROOT, "d", NewNode::Dir, 0o755);
    let f = make(&mut s, d.id, "f", file(), 0o644);
    let p5 = tierpool_types::Priority::new(5).unwrap();
    let r = s.execute(&MetaOp::SetAttrsAt { inode: d.id, priority: Some(p5), pinned: Some(true) }, 80).unwrap();
    let want = tierpool_types::ChunkAttrs { priority: p5, pinned: true };
    assert_eq!(r, MetaReply::Attrs { changed: vec![(f.id, want)] });
    assert_eq!((s.stat("/d/f").unwrap().attrs, s.stat("/d").unwrap().ctime), (want, 80));
    let gone = MetaOp::SetAttrsAt { inode: InodeId(404), priority: None, pinned: Some(false) };
    assert_eq!(fails(&mut s, gone).0, ErrorKind::NotFound);
}
