//! The conformance suite every under-store passes: each function takes a
//! fresh, empty, usable store and states one behaviour. `conformance!` makes
//! one test per function for a store maker.

use bytes::Bytes;
use tierpool_types::ErrorKind;
use tierpool_under::{UnderEntry, UnderStore};

/// One test per suite function, for `$make: fn() -> (guard, UnderStore)`
/// (the guard keeps the store's directory or server alive), or for
/// `async $make: async fn() -> (guard, UnderStore)`. The list of functions
/// is here once: every store passes all of them.
#[macro_export]
macro_rules! conformance {
    (async $make:path) => {
        conformance!(@call $make().await);
    };
    ($make:path) => {
        conformance!(@call $make());
    };
    (@call $call:expr) => {
        conformance!(@each $call;
            check_accepts_a_usable_store,
            walk_lists_a_nested_tree,
            stat_reports_files_directories_and_absence,
            ranged_reads_are_byte_exact,
            read_with_a_stale_tag_fails,
            write_of_several_pieces_reads_back,
            large_write_in_many_pieces_is_byte_exact,
            delete_removes_files_and_trees,
            mkdir_creates_directories_and_tolerates_existing_ones,
            rename_moves_a_file,
            rename_moves_a_tree,
        );
    };
    (@each $call:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (_guard, store) = $call;
                common::suite::$name(&store).await;
            }
        )*
    };
}

/// Bytes that differ at every offset, so that a shifted read shows.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2654435761) >> 13) as u8 ^ seed).collect()
}

async fn put(store: &UnderStore, path: &str, data: &[u8]) -> UnderEntry {
    store.write(path, vec![Bytes::copy_from_slice(data)]).await.unwrap_or_else(|e| panic!("write {path}: {e}"))
}

fn shape(entries: &[UnderEntry]) -> Vec<(&str, bool, u64)> {
    entries.iter().map(|e| (e.path.as_str(), e.is_dir, e.size)).collect()
}

pub async fn check_accepts_a_usable_store(store: &UnderStore) {
    store.check().await.unwrap();
    assert!(store.walk().await.unwrap().is_empty());
}

pub async fn walk_lists_a_nested_tree(store: &UnderStore) {
    let a = put(store, "a.txt", b"abc").await;
    put(store, "d1/b.bin", &pattern(1000, 1)).await;
    put(store, "d1/d2/empty", b"").await;
    let e = put(store, "d1/d2/d3/e", b"12345").await;
    let walk = store.walk().await.unwrap();
    let want = vec![
        ("a.txt", false, 3),
        ("d1", true, 0),
        ("d1/b.bin", false, 1000),
        ("d1/d2", true, 0),
        ("d1/d2/d3", true, 0),
        ("d1/d2/d3/e", false, 5),
        ("d1/d2/empty", false, 0),
    ];
    assert_eq!(shape(&walk), want);
    assert_eq!(walk[0], a, "a walk shows what the write returned");
    assert_eq!(walk[5], e);
    for f in walk.iter().filter(|f| !f.is_dir) {
        assert!(!f.etag.is_empty() && !f.etag.contains('"'), "{f:?}");
        assert!(f.mtime_ns > 1_600_000_000_000_000_000, "{f:?}");
    }
    assert!(walk.iter().filter(|d| d.is_dir).all(|d| d.etag.is_empty() && d.size == 0));
}

pub async fn stat_reports_files_directories_and_absence(store: &UnderStore) {
    let f = put(store, "d/f", b"xyz").await;
    assert_eq!(store.stat("d/f").await.unwrap(), Some(f.clone()));
    assert_eq!(store.stat("/d/f/").await.unwrap(), Some(f), "slashes around a path do not matter");
    let d = store.stat("d").await.unwrap().unwrap();
    assert!(d.is_dir && d.path == "d" && d.etag.is_empty(), "{d:?}");
    assert_eq!(store.stat("nope").await.unwrap(), None);
    assert_eq!(store.stat("d/nope").await.unwrap(), None);
    assert_eq!(store.stat("d/f/under-a-file").await.unwrap(), None);
    assert!(store.stat("").await.unwrap().unwrap().is_dir);
    assert_eq!(store.stat("d/../f").await.unwrap_err().kind, ErrorKind::InvalidArgument);
}

pub async fn ranged_reads_are_byte_exact(store: &UnderStore) {
    let data = pattern(100_000, 7);
    let n = data.len() as u64;
    let f = put(store, "r", &data).await;
    let read = |off: u64, len: u64| store.read("r", off, len, None);
    assert_eq!(read(0, 10).await.unwrap(), data[..10]);
    assert_eq!(read(500, 1000).await.unwrap(), data[500..1500]);
    assert_eq!(read(n - 10, 10).await.unwrap(), data[data.len() - 10..]);
    assert_eq!(read(n - 10, 100).await.unwrap(), data[data.len() - 10..], "fewer bytes at the end");
    assert_eq!(read(0, u64::MAX).await.unwrap(), data[..]);
    assert!(read(n, 10).await.unwrap().is_empty(), "none at the end");
    assert!(read(n + 5, 10).await.unwrap().is_empty(), "none past the end");
    assert!(read(3, 0).await.unwrap().is_empty());
    assert_eq!(store.read("r", 1, 2, Some(&f.etag)).await.unwrap(), data[1..3]);
    assert_eq!(store.read("r", n - 1, 9, Some(&f.etag)).await.unwrap(), data[data.len() - 1..]);
    assert_eq!(store.read("missing", 0, 1, None).await.unwrap_err().kind, ErrorKind::NotFound);
}

pub async fn read_with_a_stale_tag_fails(store: &UnderStore) {
    let old = put(store, "v", b"version one").await;
    let new = put(store, "v", b"version two, longer").await;
    assert_ne!(old.etag, new.etag);
    let e = store.read("v", 0, 4, Some(&old.etag)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Stale, "{e}");
    assert!(e.message.contains("changed in the under-store"), "{e}");
    assert_eq!(store.read("v", 8, 100, Some(&old.etag)).await.unwrap_err().kind, ErrorKind::Stale, "past the old end");
    assert_eq!(store.read("v", 0, 7, Some(&new.etag)).await.unwrap(), &b"version"[..]);
    store.delete("v", false).await.unwrap();
    assert_eq!(store.read("v", 0, 4, Some(&new.etag)).await.unwrap_err().kind, ErrorKind::Stale, "removed");
    assert_eq!(store.read("v", 0, 4, None).await.unwrap_err().kind, ErrorKind::NotFound);
}

pub async fn write_of_several_pieces_reads_back(store: &UnderStore) {
    let pieces: Vec<Bytes> = ["hello", "", ", ", "under", "-store", "!"].iter().map(|s| Bytes::from(*s)).collect();
    let entry = store.write("p/q/pieces", pieces).await.unwrap();
    assert_eq!((entry.path.as_str(), entry.is_dir, entry.size), ("p/q/pieces", false, 19));
    assert_eq!(store.read("p/q/pieces", 0, 100, Some(&entry.etag)).await.unwrap(), &b"hello, under-store!"[..]);
    let empty = store.write("nothing", vec![]).await.unwrap();
    assert_eq!(empty.size, 0);
    assert!(store.read("nothing", 0, 10, None).await.unwrap().is_empty());
    assert_eq!(store.write("", vec![]).await.unwrap_err().kind, ErrorKind::InvalidArgument);
}

pub async fn large_write_in_many_pieces_is_byte_exact(store: &UnderStore) {
    const MIB: usize = 1 << 20;
    let data = pattern(20 * MIB, 3);
    let pieces: Vec<Bytes> = data.chunks(MIB).map(Bytes::copy_from_slice).collect();
    let entry = store.write("big", pieces).await.unwrap();
    assert_eq!(entry.size, data.len() as u64);
    let back = store.read("big", 0, entry.size, Some(&entry.etag)).await.unwrap();
    assert!(back == data[..], "20 MiB read back differ");
    let at = 8 * MIB as u64 - 10;
    assert_eq!(store.read("big", at, 20, None).await.unwrap(), data[at as usize..at as usize + 20]);
}

pub async fn delete_removes_files_and_trees(store: &UnderStore) {
    put(store, "f", b"1").await;
    put(store, "t/a", b"2").await;
    put(store, "t/u/b", b"3").await;
    store.delete("f", false).await.unwrap();
    assert_eq!(store.stat("f").await.unwrap(), None);
    store.delete("f", false).await.unwrap();
    store.delete("never/was", true).await.unwrap();
    let e = store.delete("t", false).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::DirectoryNotEmpty, "{e}");
    assert_eq!(store.read("t/u/b", 0, 1, None).await.unwrap(), &b"3"[..], "nothing removed");
    store.delete("t", true).await.unwrap();
    assert_eq!(store.stat("t").await.unwrap(), None);
    assert!(store.walk().await.unwrap().is_empty());
    assert_eq!(store.delete("", true).await.unwrap_err().kind, ErrorKind::InvalidArgument);
}

pub async fn mkdir_creates_directories_and_tolerates_existing_ones(store: &UnderStore) {
    store.mkdir("m/n").await.unwrap();
    store.mkdir("m/n").await.unwrap();
    put(store, "m/n/f", b"x").await;
    store.mkdir("m").await.unwrap();
    assert_eq!(shape(&store.walk().await.unwrap()), vec![("m", true, 0), ("m/n", true, 0), ("m/n/f", false, 1)]);
    let e = store.mkdir("m/n/f").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}");
}

pub async fn rename_moves_a_file(store: &UnderStore) {
    let data = pattern(3000, 9);
    put(store, "x", &data).await;
    store.rename("x", "y/z").await.unwrap();
    assert_eq!(store.stat("x").await.unwrap(), None);
    assert_eq!(store.read("y/z", 0, 10_000, None).await.unwrap(), data[..]);
    put(store, "w", b"replacement").await;
    store.rename("w", "y/z").await.unwrap();
    assert_eq!(store.read("y/z", 0, 100, None).await.unwrap(), &b"replacement"[..], "a file at the target is replaced");
    assert_eq!(store.rename("x", "q").await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(store.rename("y", "y/inside").await.unwrap_err().kind, ErrorKind::InvalidArgument);
}

pub async fn rename_moves_a_tree(store: &UnderStore) {
    put(store, "t/a", b"first").await;
    put(store, "t/s/b", &pattern(70_000, 2)).await;
    put(store, "other", b"stays").await;
    store.rename("t", "n/u").await.unwrap();
    let want = vec![
        ("n", true, 0),
        ("n/u", true, 0),
        ("n/u/a", false, 5),
        ("n/u/s", true, 0),
        ("n/u/s/b", false, 70_000),
        ("other", false, 5),
    ];
    assert_eq!(shape(&store.walk().await.unwrap()), want);
    assert_eq!(store.read("n/u/s/b", 0, 70_000, None).await.unwrap(), pattern(70_000, 2)[..]);
}
