//! Transactions and snapshots over files of attached under-stores, with
//! real processes and a directory attached: files read from below and
//! written in a transaction reach the store once it commits (written
//! through, or left to the write-back); a view whose object below was
//! replaced since is `Stale`, never other bytes; names are not changed
//! where the store makes them first; a store that refuses the write leaves
//! the commit done and the file owed to `sync`. A snapshot of a tree of a
//! store loads it first and keeps its bytes whatever the store does next;
//! restoring it puts the store back as well.

mod common;
use common::{Pool, Session};
use std::path::Path;
use tierpool_client::{Committed, Transaction};
use tierpool_types::{Error, ErrorKind};

impl Session {
    fn begin(&self) -> Transaction {
        self.rt.block_on(self.client.begin()).unwrap()
    }

    fn read(&self, tx: &mut Transaction, path: &str) -> Result<Vec<u8>, Error> {
        self.rt.block_on(tx.read_all(path))
    }

    fn write(&self, tx: &mut Transaction, path: &str, bytes: &[u8]) {
        self.rt.block_on(tx.write(path, 0, bytes)).unwrap();
    }

    fn commit(&self, tx: Transaction) -> Result<Committed, Error> {
        self.rt.block_on(tx.commit(None))
    }
}

fn below(dir: &Path, name: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(name)).ok()
}

/// `(dirty files, files the write-back owes)` of attachment `i` in `status --json`.
fn owed(pool: &Pool, i: usize) -> (u64, u64) {
    let a = &pool.status()["attachments"][i];
    (a["dirty_files"].as_u64().unwrap(), a["write_back_files"].as_u64().unwrap())
}

#[test]
fn files_of_a_store_are_read_and_written_in_transactions_and_reach_it_once_committed() {
    let pool = Pool::start(1, "64MiB", "256MiB");
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("sub")).unwrap();
    std::fs::write(src.path().join("a.txt"), b"hello below\n").unwrap();
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/in"]);
    let s = Session::new(&pool);

    // A reader that began before anything changed.
    let mut reader = s.begin();
    let mut tx = s.begin();
    assert_eq!(s.read(&mut tx, "/in/a.txt").unwrap(), b"hello below\n", "read from below");
    assert_eq!(pool.under_chunks("/in/a.txt"), (0, 1, false), "not loaded by a transaction's read");
    s.write(&mut tx, "/in/a.txt", b"HELLO");
    s.write(&mut tx, "/in/sub/new.txt", b"made in a transaction\n");
    s.write(&mut tx, "/plain.txt", b"in the pool only\n");
    // Nothing reaches the store, or anyone, before the commit.
    assert_eq!(below(src.path(), "a.txt").unwrap(), b"hello below\n");
    assert_eq!(below(src.path(), "sub/new.txt"), None);
    assert!(pool.err(&["stat", "/in/sub/new.txt"]).contains("no such file"));
    assert_eq!(s.commit(tx).unwrap(), Committed::Now);

    // Written through before the commit returned, and clean in the pool.
    assert_eq!(below(src.path(), "a.txt").unwrap(), b"HELLO below\n");
    assert_eq!(below(src.path(), "sub/new.txt").unwrap(), b"made in a transaction\n");
    assert_eq!(pool.get("/in/sub/new.txt"), b"made in a transaction\n");
    assert_eq!(owed(&pool, 0), (0, 0));
    assert!(!pool.under_chunks("/in/a.txt").2, "clean");

    // The reader's view names the object that was below when it began,
    // which is gone: `Stale`, not the new bytes. (Had anyone loaded the
    // chunk before the commit, the pool would keep it for the view.)
    let e = s.read(&mut reader, "/in/a.txt").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Stale, "{e}");
    assert!(e.message.starts_with("/in/a.txt as this transaction sees it: "), "{e}");
    assert!(e.message.contains("changed in the under-store (was version 12-"), "{e}");
    s.rt.block_on(reader.abort()).unwrap();

    // A transaction that begins now reads what is below.
    let mut tx = s.begin();
    assert_eq!(s.read(&mut tx, "/in/a.txt").unwrap(), b"HELLO below\n");
    s.rt.block_on(tx.abort()).unwrap();

    // Names are made, removed and moved below first: not in a transaction.
    let mut tx = s.begin();
    s.rt.block_on(tx.mkdir("/in/d")).unwrap();
    let e = s.commit(tx).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.ends_with("/in/d: beneath the attachment at /in, whose store makes, removes and moves names first: not in a transaction (do it outside one)"), "{e}");
    assert!(!src.path().join("d").exists());

    // Where names stay in the pool, a file made and removed in one
    // transaction leaves nothing to write.
    let scratch = tempfile::tempdir().unwrap();
    pool.ok(&["attach", &format!("file://{}", scratch.path().display()), "/p", "--mode", "pool-only"]);
    let mut tx = s.begin();
    s.write(&mut tx, "/p/x", b"short-lived");
    s.write(&mut tx, "/p/y", b"kept in the pool");
    s.rt.block_on(tx.rm("/p/x", false)).unwrap();
    assert_eq!(s.commit(tx).unwrap(), Committed::Now);
    assert_eq!((pool.get("/p/y"), below(scratch.path(), "y")), (b"kept in the pool".to_vec(), None));

    // A store attached read-only takes no commit.
    let ro = tempfile::tempdir().unwrap();
    std::fs::write(ro.path().join("r.txt"), b"fixed\n").unwrap();
    pool.ok(&["attach", &format!("file://{}", ro.path().display()), "/ro", "--readonly"]);
    let mut tx = s.begin();
    assert_eq!(s.read(&mut tx, "/ro/r.txt").unwrap(), b"fixed\n");
    s.write(&mut tx, "/ro/r.txt", b"FIXED");
    let e = s.commit(tx).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReadOnly, "{e}");
    assert_eq!((below(ro.path(), "r.txt").unwrap(), pool.get("/ro/r.txt")), (b"fixed\n".to_vec(), b"fixed\n".to_vec()));
}

#[test]
fn a_commit_writing_back_is_owed_to_the_write_back_and_one_the_store_refuses_stays_done() {
    // No write-back round runs on its own.
    let pool = Pool::start_with(1, "64MiB", "256MiB", &["--write-back-every", "1h"]);
    let (back, through) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(back.path().join("a.txt"), b"old\n").unwrap();
    std::fs::create_dir(through.path().join("sub")).unwrap();
    pool.ok(&["attach", &format!("file://{}", back.path().display()), "/back", "--mode", "back"]);
    pool.ok(&["attach", &format!("file://{}", through.path().display()), "/in"]);
    let s = Session::new(&pool);

    // `back`: acknowledged from the pool, kept for the write-back.
    let mut tx = s.begin();
    s.write(&mut tx, "/back/a.txt", b"new\n");
    assert_eq!(s.commit(tx).unwrap(), Committed::Now);
    assert_eq!((below(back.path(), "a.txt").unwrap(), pool.get("/back/a.txt")), (b"old\n".to_vec(), b"new\n".to_vec()));
    assert_eq!(owed(&pool, 0), (1, 1));
    pool.ok(&["sync", "/back"]);
    assert_eq!((below(back.path(), "a.txt").unwrap(), owed(&pool, 0)), (b"new\n".to_vec(), (0, 0)));

    // `through`, with the store unable to write the file (its directory
    // below became a file): the commit is done all the same, and says so.
    std::fs::remove_dir_all(through.path().join("sub")).unwrap();
    std::fs::write(through.path().join("sub"), b"in the way").unwrap();
    let mut tx = s.begin();
    s.write(&mut tx, "/in/sub/c.txt", b"new c\n");
    let e = s.commit(tx).unwrap_err();
    let id_free = e.message.split_once(" committed, but ").map(|(_, rest)| rest).unwrap_or_else(|| panic!("{e}"));
    assert!(e.message.starts_with("transaction "), "{e}");
    assert!(id_free.starts_with("1 file(s) are not in their under-store yet (first: /in/sub/c.txt: "), "{e}");
    assert!(id_free.ends_with("`tierpool sync` writes them (do not run the transaction again)"), "{e}");
    assert_eq!(pool.get("/in/sub/c.txt"), b"new c\n", "committed");
    assert_eq!(owed(&pool, 1).0, 1);
    // Once the store can take it, `sync` writes it.
    std::fs::remove_file(through.path().join("sub")).unwrap();
    std::fs::create_dir(through.path().join("sub")).unwrap();
    pool.ok(&["sync", "/in"]);
    assert_eq!((below(through.path(), "sub/c.txt").unwrap(), owed(&pool, 1)), (b"new c\n".to_vec(), (0, 0)));
}

#[test]
fn a_snapshot_of_a_store_s_tree_keeps_its_bytes_and_its_restore_puts_the_store_back() {
    let mut pool = Pool::start(1, "64MiB", "256MiB");
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(src.path().join("d/sub")).unwrap();
    std::fs::write(src.path().join("d/a.txt"), b"alpha\n").unwrap();
    std::fs::write(src.path().join("d/sub/b.txt"), b"beta\n").unwrap();
    pool.ok(&["attach", &format!("file://{}", src.path().display()), "/in"]);
    assert_eq!(pool.under_chunks("/in/d/a.txt"), (0, 1, false));

    // Taken: what was below is loaded first.
    let out = pool.ok(&["snapshot", "create", "/in/d", "s1"]);
    assert!(out.starts_with("/in/d@s1\t") && out.contains("4 entries, 11B"), "{out}");
    assert_eq!(pool.under_chunks("/in/d/a.txt"), (1, 0, false));

    // The store changes through the pool, and the pool lets go of its copies.
    pool.put("/in/d/a.txt", b"ALPHA\n");
    pool.put("/in/d/c.txt", b"new\n");
    pool.ok(&["rm", "-r", "/in/d/sub"]);
    pool.ok(&["free", "-r", "/in/d"]);
    assert_eq!(below(src.path(), "d/a.txt").unwrap(), b"ALPHA\n");
    assert_eq!(pool.get("/in/d/.snapshots/s1/a.txt"), b"alpha\n", "kept by the snapshot");
    assert_eq!(pool.get("/in/d/.snapshots/s1/sub/b.txt"), b"beta\n");

    // Restored: in the pool and below, what the restore dropped gone from both.
    pool.ok(&["snapshot", "restore", "/in/d", "s1"]);
    for (name, want) in [("d/a.txt", &b"alpha\n"[..]), ("d/sub/b.txt", b"beta\n")] {
        assert_eq!(
            (below(src.path(), name).unwrap(), pool.get(&format!("/in/{name}"))),
            (want.to_vec(), want.to_vec())
        );
    }
    assert_eq!(below(src.path(), "d/c.txt"), None);
    assert!(pool.err(&["cat", "/in/d/c.txt"]).contains("no such file"));
    assert_eq!(owed(&pool, 0), (0, 0));

    // Across a coordinator `kill -9`, the snapshot and the store still agree.
    pool.kill_coordinator();
    pool.start_coordinator();
    pool.wait_alive(1);
    assert_eq!(pool.get("/in/d/.snapshots/s1/a.txt"), b"alpha\n");
    assert_eq!((owed(&pool, 0), pool.under_chunks("/in/d/a.txt").2), ((0, 0), false));
}
