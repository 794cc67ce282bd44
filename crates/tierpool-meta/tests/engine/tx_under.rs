//! Transactions over files beneath an attached under-store: chunks
//! loaded, let go of and written below are no change to a view or a
//! writer; a change written below over the object a view's chunks below
//! hold is a conflict; what the namespace steps may do there.

use crate::transactions::{Pool, CS};
use tierpool_meta::engine::transactions::{Changes, Commit};
use tierpool_meta::{Attachment, MetaOp, MetaReply, TxFile, TxNs, WriteMode};
use tierpool_types::{ChunkRef, ErrorKind, InodeId};

/// A pool with an attachment at `/u` in `mode` holding an object `f` of
/// two chunks, both below (tag `e1`).
pub(crate) fn attached(mode: WriteMode, readonly: bool) -> (Pool, InodeId) {
    let mut p = Pool::new();
    p.mkdir("/u");
    let attachment = Attachment { uri: "file:///data".into(), mode, readonly, options: Default::default() };
    p.exec(MetaOp::Attach { path: "/u".into(), attachment }).unwrap();
    let parent = p.e.state().stat("/u").unwrap().id;
    let op = MetaOp::AdoptFile {
        parent,
        name: "f".into(),
        size: 2 * CS,
        chunk_size: CS,
        mtime: 7,
        etag: "e1".into(),
        mode: 0o644,
    };
    let f = match p.exec(op).unwrap().0 {
        MetaReply::Info(i) => i.id,
        other => panic!("{other:?}"),
    };
    (p, f)
}

fn tag(p: &mut Pool, tx: u64) -> String {
    let info = p.e.tx_stat(1, tx, "/u/f", p.now).unwrap();
    info.origin.expect("a file of the store").etag
}

/// Writes `/u/f` below as its chunks are now, as tag `etag`.
pub(crate) fn persist(p: &mut Pool, inode: InodeId, etag: &str) {
    let chunks = p.e.state().stat_inode(inode, true).unwrap().chunks;
    let op = MetaOp::Persisted { inode, chunks, size: 2 * CS, mtime: 8, etag: etag.into(), key: Some("f".into()) };
    p.exec(op).unwrap();
}

#[test]
fn a_chunk_loaded_let_go_of_or_written_below_is_no_conflict() {
    let (mut p, f) = attached(WriteMode::Through, false);
    let tx = p.e.tx_begin(1, p.now);
    assert!(p.e.tx_stat(1, tx, "/u/f", p.now).unwrap().chunks.iter().all(|r| r.is_below()));
    // Another client reads chunk 0: it is loaded, and the view sees it so.
    let loaded = p.chunk();
    p.exec(MetaOp::LoadChunks { inode: f, chunks: vec![(0, loaded)] }).unwrap();
    assert_eq!(p.seen(tx, "/u/f").unwrap()[0], loaded.version, "the same bytes, now in the pool");
    p.e.tx_write(1, tx, f, "/u/f", &[0], p.now).unwrap();
    // Written below again from the same chunks (a new object): the view follows.
    persist(&mut p, f, "e2");
    assert_eq!(tag(&mut p, tx), "e2");
    p.e.tx_write(1, tx, f, "/u/f", &[1], p.now).unwrap();
    // Let go of: the view keeps what was loaded (kept while it is open).
    p.exec(MetaOp::Unload { inode: f }).unwrap();
    assert_eq!(p.seen(tx, "/u/f").unwrap()[0], loaded.version);
    assert!(matches!(p.commit(tx, None, &[(f, vec![0, 1])]).unwrap(), Commit::Run(_)));
    let origin = p.e.state().stat("/u/f").unwrap().origin.unwrap();
    assert!(origin.dirty, "written in the pool, not below yet");
}

#[test]
fn a_view_keeps_chunks_loaded_before_they_were_let_go_of_and_replaced_below() {
    let (mut p, f) = attached(WriteMode::Through, false);
    let (c0, c1) = (p.chunk(), p.chunk());
    p.exec(MetaOp::LoadChunks { inode: f, chunks: vec![(0, c0), (1, c1)] }).unwrap();
    let reader = p.e.tx_begin(1, p.now);
    p.exec(MetaOp::Unload { inode: f }).unwrap();
    let other = p.e.tx_begin(1, p.now);
    p.commit(other, None, &[(f, vec![0])]).unwrap();
    persist(&mut p, f, "e2");
    p.exec(MetaOp::Unload { inode: f }).unwrap();
    assert_eq!(p.seen(reader, "/u/f").unwrap(), vec![c0.version, c1.version], "no read of the replaced object");
}

#[test]
fn a_change_written_below_and_let_go_of_conflicts_with_a_writer_and_keeps_the_view_s_tag() {
    let (mut p, f) = attached(WriteMode::Through, false);
    let (reader, writer) = (p.e.tx_begin(1, p.now), p.e.tx_begin(1, p.now));
    // A commit rewrites chunk 1, is written below as `e2`, then let go of:
    // chunk 1 is below again, in another object.
    let other = p.e.tx_begin(1, p.now);
    p.commit(other, None, &[(f, vec![1])]).unwrap();
    persist(&mut p, f, "e2");
    p.exec(MetaOp::Unload { inode: f }).unwrap();
    assert!(p.e.state().stat("/u/f").unwrap().chunks.iter().all(|r| r.is_below()));
    // The view names the object it saw, which a read checks by its tag.
    assert_eq!(tag(&mut p, reader), "e1");
    let e = p.e.tx_write(1, writer, f, "/u/f", &[1], p.now).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.starts_with("/u/f: chunk 1 was rewritten by a transaction"), "{e}");
    // A transaction that begins now sees the new object.
    let later = p.e.tx_begin(1, p.now);
    assert_eq!(tag(&mut p, later), "e2");
}

fn create(path: &str, inode: InodeId) -> TxNs {
    let file = TxFile { inode, size: 0, truncate: None, chunks: Vec::new() };
    TxNs::Create { path: path.into(), mode: 0o644, chunk_size: CS, file }
}

#[test]
fn files_are_made_beneath_an_attachment_but_names_are_changed_only_where_it_keeps_them_in_the_pool() {
    for mode in [WriteMode::Through, WriteMode::Back] {
        let (mut p, _) = attached(mode, false);
        let new = InodeId(p.fresh());
        let tx = p.e.tx_begin(1, p.now);
        p.commit_steps(tx, vec![create("/u/g", new)]).unwrap();
        let origin = p.e.state().stat("/u/g").unwrap().origin.expect("a file of the store");
        assert_eq!((origin.key.as_str(), origin.dirty), ("g", true), "{mode:?}");
        for step in [
            TxNs::Mkdir { path: "/u/d".into(), mode: 0o755 },
            TxNs::Remove { path: "/u/f".into(), recursive: false },
            TxNs::Rename { from: "/u/f".into(), to: "/u/h".into() },
        ] {
            let tx = p.e.tx_begin(1, p.now);
            let e = p.commit_steps(tx, vec![step]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument);
            assert!(e.message.contains(": beneath the attachment at /u, whose store makes, removes and moves"), "{e}");
        }
        assert!(p.e.state().stat("/u/f").is_ok() && p.e.state().stat("/u/d").is_err());
    }
    // Where the attachment keeps names in the pool, they change there.
    let (mut p, _) = attached(WriteMode::PoolOnly, false);
    let tx = p.e.tx_begin(1, p.now);
    let steps = vec![
        TxNs::Mkdir { path: "/u/d".into(), mode: 0o755 },
        TxNs::Rename { from: "/u/f".into(), to: "/u/d/f".into() },
    ];
    p.commit_steps(tx, steps).unwrap();
    assert!(p.e.state().stat("/u/d/f").unwrap().origin.is_some() && p.e.state().stat("/u/f").is_err());
}

#[test]
fn nothing_beneath_a_read_only_attachment_is_changed() {
    let (mut p, f) = attached(WriteMode::Through, true);
    let new = InodeId(p.fresh());
    let tx = p.e.tx_begin(1, p.now);
    let e = p.commit_steps(tx, vec![create("/u/g", new)]).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::ReadOnly, "step 1 of the transaction: /u/g: is in the under-store file:///data attached read-only")
    );
    let tx = p.e.tx_begin(1, p.now);
    p.e.tx_write(1, tx, f, "/u/f", &[0], p.now).unwrap();
    let chunk = ChunkRef { version: p.fresh(), len: CS, checksum: 3, home: None };
    let files = vec![TxFile { inode: f, size: 2 * CS, truncate: None, chunks: vec![(0, chunk)] }];
    let e = match p.e.tx_commit(1, tx, None, Changes { files, ..Changes::default() }, p.now) {
        Ok(Commit::Run(op)) => p.exec(op).unwrap_err(),
        other => panic!("{other:?}"),
    };
    assert_eq!(e.kind, ErrorKind::ReadOnly, "{e}");
    assert!(p.e.state().stat("/u/f").unwrap().chunks.iter().all(|r| r.is_below()));
}
