//! Snapshots beneath an attached under-store: they keep only what the
//! pool holds (a file with chunks still below is refused until loaded),
//! their files mirror no object, and a restore makes each restored file a
//! file of the store again, with changes not below and its own write mode.

use crate::transactions::Pool;
use crate::tx_under::{attached, persist};
use tierpool_meta::{Attachment, MetaOp, WriteMode};
use tierpool_types::ErrorKind;

fn snapshot(p: &mut Pool, name: &str) -> tierpool_types::Result<()> {
    p.exec(MetaOp::SnapshotCreate { path: "/u/f".into(), name: name.into() }).map(|_| ())
}

fn versions(p: &Pool, path: &str) -> Vec<u64> {
    p.e.state().stat(path).unwrap().chunks.iter().map(|r| r.version).collect()
}

#[test]
fn a_snapshot_beneath_an_attachment_keeps_what_the_pool_holds_and_a_restore_makes_it_the_store_s_again() {
    let (mut p, f) = attached(WriteMode::Through, false);
    let e = snapshot(&mut p, "s").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Stale);
    assert_eq!(e.message, "/u/f: has chunks only in its under-store; load them into the pool first (`tierpool load`)");
    assert!(p.e.state().stat("/u/f/.snapshots/s").is_err(), "nothing taken");

    // Loaded: taken, and the frozen file mirrors no object.
    let (c0, c1) = (p.chunk(), p.chunk());
    p.exec(MetaOp::LoadChunks { inode: f, chunks: vec![(0, c0), (1, c1)] }).unwrap();
    p.exec(MetaOp::SetWriteMode { path: "/u/f".into(), mode: Some(WriteMode::Back), recursive: false }).unwrap();
    snapshot(&mut p, "s").unwrap();
    let frozen = p.e.state().stat("/u/f/.snapshots/s").unwrap();
    assert_eq!((frozen.origin, versions(&p, "/u/f/.snapshots/s")), (None, vec![c0.version, c1.version]));

    // Rewritten, written below, let go of: the snapshot still keeps both versions.
    p.rewrite(f, &[0]);
    persist(&mut p, f, "e2");
    p.exec(MetaOp::Unload { inode: f }).unwrap();
    assert!(p.e.state().stat("/u/f").unwrap().chunks.iter().all(|r| r.is_below()));
    assert_eq!(versions(&p, "/u/f/.snapshots/s"), vec![c0.version, c1.version]);
    p.e.state().check_invariants().unwrap();

    // Restored: at its key again, its bytes not below, the own mode it has now kept.
    p.exec(MetaOp::SetWriteMode { path: "/u/f".into(), mode: Some(WriteMode::PoolOnly), recursive: false }).unwrap();
    p.exec(MetaOp::SnapshotRestore { path: "/u/f".into(), name: "s".into() }).unwrap();
    let live = p.e.state().stat("/u/f").unwrap();
    assert_eq!((live.id, versions(&p, "/u/f")), (f, vec![c0.version, c1.version]));
    let o = live.origin.expect("a file of the store again");
    assert_eq!((o.key.as_str(), o.dirty, o.mode), ("f", true, Some(WriteMode::PoolOnly)));
    p.e.state().check_invariants().unwrap();
}

#[test]
fn nothing_is_restored_beneath_a_read_only_attachment() {
    let (mut p, f) = attached(WriteMode::Through, true);
    let (c0, c1) = (p.chunk(), p.chunk());
    p.exec(MetaOp::LoadChunks { inode: f, chunks: vec![(0, c0), (1, c1)] }).unwrap();
    snapshot(&mut p, "s").unwrap();
    let e = p.exec(MetaOp::SnapshotRestore { path: "/u/f".into(), name: "s".into() }).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReadOnly);
    assert_eq!(e.message, "/u/f: is in the under-store file:///data attached read-only");
    let live = p.e.state().stat("/u/f").unwrap();
    assert_eq!((live.id, live.origin.unwrap().dirty), (f, false), "unchanged");
}

#[test]
fn a_tree_with_a_file_of_two_names_is_not_restored_beneath_an_attachment() {
    let mut p = Pool::new();
    p.mkdir("/u");
    p.mkdir("/u/d");
    let a = p.file("/u/d/a", 1);
    let d = p.e.state().stat("/u/d").unwrap().id;
    p.exec(MetaOp::LinkAt { inode: a, parent: d, name: "b".into() }).unwrap();
    p.exec(MetaOp::SnapshotCreate { path: "/u/d".into(), name: "s".into() }).unwrap();
    p.exec(MetaOp::Remove { path: "/u/d".into(), recursive: true }).unwrap();
    let attachment = Attachment {
        uri: "file:///data".into(),
        mode: WriteMode::Through,
        readonly: false,
        options: Default::default(),
    };
    p.exec(MetaOp::Attach { path: "/u".into(), attachment }).unwrap();
    let e = p.exec(MetaOp::SnapshotRestore { path: "/u/d".into(), name: "s".into() }).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert_eq!(e.message, "/u/d@s: holds a file of more than one name, which its under-store cannot hold");
    assert!(p.e.state().stat("/u/d").is_err(), "nothing restored");
}
