//! Write modes of files' own (`SetWriteMode`): set on a file beneath an
//! attachment or on every file of a tree, kept when the file is replaced
//! at its path or its object changes below, refused elsewhere with the
//! state untouched, and shown by `status`'s figures.

use crate::common::*;
use std::collections::BTreeMap;
use tierpool_meta::{Attachment, MetaOp, MetaReply, MetaState, NewNode, WriteMode};
use tierpool_types::{ErrorKind, InodeId};

fn set(path: &str, mode: Option<WriteMode>, recursive: bool) -> MetaOp {
    MetaOp::SetWriteMode { path: path.into(), mode, recursive }
}

fn attach(s: &mut MetaState, mode: WriteMode, readonly: bool) -> InodeId {
    mkdir(s, "/in");
    let attachment = Attachment { uri: "file:///data".into(), mode, readonly, options: BTreeMap::new() };
    s.execute(&MetaOp::Attach { path: "/in".into(), attachment }, 3).unwrap();
    s.stat("/in").unwrap().id
}

/// A pool with `/in` attached in `mode` holding `/in/a` and `/in/d/b`
/// (made in the pool), and `/out` outside it holding `/out/c`.
fn pool(mode: WriteMode) -> MetaState {
    let mut s = ready();
    attach(&mut s, mode, false);
    commit(&mut s, "/in/a", 10);
    mkdir(&mut s, "/in/d");
    commit(&mut s, "/in/d/b", 10);
    mkdir(&mut s, "/out");
    commit(&mut s, "/out/c", 10);
    s
}

/// `/in/x` adopted from the object of tag `etag`, beneath `/in` attached in `mode`.
fn adopt(s: &mut MetaState, at: InodeId, etag: &str) {
    let op = MetaOp::AdoptFile {
        parent: at,
        name: "x".into(),
        size: 10,
        chunk_size: CHUNK,
        mtime: 7,
        etag: etag.into(),
        mode: 0o644,
    };
    s.execute(&op, 4).unwrap();
}

fn mode(s: &MetaState, path: &str) -> Option<WriteMode> {
    s.stat(path).unwrap().origin.unwrap().mode
}

#[test]
fn a_file_keeps_its_own_mode_across_rewrites_and_changes_below() {
    let mut s = pool(WriteMode::Through);
    let a = s.stat("/in/a").unwrap().id;
    assert_eq!(
        s.execute(&set("/in/a", Some(WriteMode::PoolOnly), false), 5).unwrap(),
        MetaReply::WriteModes { files: vec![a] }
    );
    assert_eq!((mode(&s, "/in/a"), mode(&s, "/in/d/b")), (Some(WriteMode::PoolOnly), None));
    assert_eq!(s.stat("/in/a").unwrap().ctime, 5);
    // Setting what it has already changes nothing.
    assert_eq!(
        s.execute(&set("/in/a", Some(WriteMode::PoolOnly), false), 6).unwrap(),
        MetaReply::WriteModes { files: vec![] }
    );
    // A new file at its path (a put, inline or not) keeps it.
    let id = alloc(&mut s);
    s.execute(&commit_op("/in/a", id, 20, true), 7).unwrap();
    assert_eq!((s.stat("/in/a").unwrap().id, mode(&s, "/in/a")), (id, Some(WriteMode::PoolOnly)));
    // So does a move, within the attachment.
    s.execute(&rename_op("/in/a", "/in/d/a2"), 8).unwrap();
    assert_eq!(mode(&s, "/in/d/a2"), Some(WriteMode::PoolOnly));
    // A file replacing it by a move brings its own (none).
    s.execute(&rename_op("/in/d/b", "/in/d/a2"), 9).unwrap();
    assert_eq!(mode(&s, "/in/d/a2"), None);
    s.check_invariants().unwrap();
}

#[test]
fn a_clean_file_whose_object_changed_below_keeps_its_mode() {
    let mut s = ready();
    let at = attach(&mut s, WriteMode::Back, false);
    adopt(&mut s, at, "e1");
    s.execute(&set("/in/x", Some(WriteMode::Through), false), 5).unwrap();
    adopt(&mut s, at, "e2");
    let o = s.stat("/in/x").unwrap().origin.unwrap();
    assert_eq!((o.etag.as_str(), o.mode), ("e2", Some(WriteMode::Through)));
    s.check_invariants().unwrap();
}

#[test]
fn a_tree_takes_a_mode_file_by_file_and_the_figures_count_them() {
    let mut s = pool(WriteMode::Through);
    let r = s.execute(&set("/in", Some(WriteMode::Back), true), 5).unwrap();
    let (a, b) = (s.stat("/in/a").unwrap().id, s.stat("/in/d/b").unwrap().id);
    assert_eq!(r, MetaReply::WriteModes { files: vec![a, b] });
    // Both made in the pool, not yet below: dirty, owed to the write-back.
    let f = &s.under_figures()[0].2;
    assert_eq!((f[0], f[1], f[5], f[6], f[7]), (2, 2, 2, 20, 2));
    let owed = |s: &MetaState| {
        let o = &s.owed_figures()[0].2;
        (o.dirty_files, o.dirty_bytes, o.write_back_files, o.write_back_bytes)
    };
    assert_eq!(owed(&s), (2, 20, 2, 20), "the walk's figures, from the owed files alone");
    // The files that owe, by path, a page at a time.
    let under = |s: &MetaState, p: &str, after, limit| {
        let (files, more) = s.owed_under(p, after, limit).unwrap();
        (files.into_iter().map(|(p, i)| (p, i.id)).collect::<Vec<_>>(), more)
    };
    let both = vec![("/in/a".to_string(), a), ("/in/d/b".to_string(), b)];
    assert_eq!(under(&s, "/in", None, 10), (both.clone(), false));
    assert_eq!(under(&s, "/", None, 10), (both.clone(), false));
    assert_eq!(under(&s, "/in/d", None, 10), (both[1..].to_vec(), false));
    assert_eq!(under(&s, "/in/a", None, 10), (both[..1].to_vec(), false));
    assert_eq!(under(&s, "/out", None, 10), (vec![], false));
    assert_eq!(under(&s, "/in", None, 1), (both[..1].to_vec(), true));
    assert_eq!(under(&s, "/in", Some(a), 1), (both[1..].to_vec(), false));
    assert_eq!(s.owed_under("/nope", None, 1).unwrap_err().kind, ErrorKind::NotFound);
    // Moved within the attachment: found by its new key.
    s.execute(&MetaOp::Rename { from: "/in/d".into(), to: "/in/e".into() }, 6).unwrap();
    assert_eq!(under(&s, "/in/e", None, 10), (vec![("/in/e/b".to_string(), b)], false));
    s.execute(&MetaOp::Rename { from: "/in/e".into(), to: "/in/d".into() }, 6).unwrap();
    s.execute(&set("/in/d", None, true), 6).unwrap();
    assert_eq!((mode(&s, "/in/a"), mode(&s, "/in/d/b")), (Some(WriteMode::Back), None));
    let f = &s.under_figures()[0].2;
    assert_eq!((f[5], f[7]), (1, 1));
    assert_eq!(owed(&s), (2, 20, 1, 10));
    // Removed: owed no more.
    s.execute(&MetaOp::Remove { path: "/in/d".into(), recursive: true }, 7).unwrap();
    assert_eq!(owed(&s), (1, 10, 1, 10));
    // A directory beneath an attachment holds no files: nothing changes.
    s.execute(
        &MetaOp::MakeAt { parent: s.stat("/in").unwrap().id, name: "e".into(), node: NewNode::Dir, mode: 0o755 },
        7,
    )
    .unwrap();
    assert_eq!(
        s.execute(&set("/in/e", Some(WriteMode::Back), true), 8).unwrap(),
        MetaReply::WriteModes { files: vec![] }
    );
    s.check_invariants().unwrap();
}

#[test]
fn modes_are_refused_outside_attachments_on_directories_and_read_only_trees() {
    let mut s = pool(WriteMode::Through);
    let (k, m) = fails(&mut s, set("/out/c", Some(WriteMode::Back), false));
    assert_eq!(
        (k, m.as_str()),
        (
            ErrorKind::InvalidArgument,
            "/out/c: is not beneath an attached under-store (write modes apply to files there)"
        )
    );
    let (k, _) = fails(&mut s, set("/out", Some(WriteMode::Back), true));
    assert_eq!(k, ErrorKind::InvalidArgument);
    let (k, m) = fails(&mut s, set("/in/d", Some(WriteMode::Back), false));
    assert_eq!(k, ErrorKind::IsADirectory, "{m}");
    assert_eq!(fails(&mut s, set("/in/none", None, false)).0, ErrorKind::NotFound);
    assert_eq!(fails(&mut s, set("/in/.snapshots/x", None, false)).0, ErrorKind::ReadOnly);
    let at = s.stat("/in").unwrap().id;
    s.execute(
        &MetaOp::MakeAt { parent: at, name: "l".into(), node: NewNode::Symlink { target: "a".into() }, mode: 0o777 },
        9,
    )
    .unwrap();
    assert_eq!(fails(&mut s, set("/in/l", Some(WriteMode::Back), false)).0, ErrorKind::InvalidArgument);
    // In a pool-only attachment renames stay in the pool: no file there
    // writes through or back (its object would not follow it).
    let mut p = ready();
    let at = attach(&mut p, WriteMode::PoolOnly, false);
    adopt(&mut p, at, "e");
    for m in [WriteMode::Through, WriteMode::Back] {
        let (k, msg) = fails(&mut p, set("/in/x", Some(m), false));
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains("attached pool-only"), "{msg}");
        assert_eq!(fails(&mut p, set("/in", Some(m), true)).0, ErrorKind::InvalidArgument);
    }
    p.execute(&set("/in/x", Some(WriteMode::PoolOnly), false), 9).unwrap();
    p.execute(&set("/in/x", None, false), 9).unwrap();
    let mut r = ready();
    let at = attach(&mut r, WriteMode::Back, true);
    adopt(&mut r, at, "e");
    let (k, m) = fails(&mut r, set("/in/x", Some(WriteMode::Through), false));
    assert_eq!(k, ErrorKind::ReadOnly, "{m}");
    assert_eq!(fails(&mut r, set("/in", Some(WriteMode::Through), true)).0, ErrorKind::ReadOnly);
}

#[test]
fn a_file_that_owes_is_found_where_names_are_not_mirrored() {
    // Beneath a pool-only attachment keys stay as they were: a file with
    // changes not below, renamed, is found by a walk, under its name.
    let mut s = pool(WriteMode::PoolOnly);
    let b = s.stat("/in/d/b").unwrap().id;
    s.execute(&MetaOp::Rename { from: "/in/d/b".into(), to: "/in/c".into() }, 6).unwrap();
    let (files, more) = s.owed_under("/in", None, 10).unwrap();
    let names: Vec<(String, InodeId)> = files.into_iter().map(|(p, i)| (p, i.id)).collect();
    assert!(!more);
    assert!(names.contains(&("/in/c".to_string(), b)), "{names:?}");
    assert_eq!(names.len(), 2, "{names:?}");
    let o = &s.owed_figures()[0].2;
    assert_eq!((o.dirty_files, o.write_back_files), (2, 0));
    s.check_invariants().unwrap();
}
