//! The directory store (`file:///abs/dir`): the conformance suite, and what
//! only a directory tree does (empty directories, its tags, its errors).

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use tierpool_types::ErrorKind;
use tierpool_under::UnderStore;

/// A fresh directory and a store over it.
fn dir_store() -> (tempfile::TempDir, UnderStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = UnderStore::open(&format!("file://{}", dir.path().display()), &BTreeMap::new()).unwrap();
    (dir, store)
}

conformance!(dir_store);

#[tokio::test]
async fn sees_files_written_by_others_and_empty_directories() {
    let (dir, store) = dir_store();
    std::fs::create_dir_all(dir.path().join("a/empty")).unwrap();
    std::fs::write(dir.path().join("a/f"), b"outside").unwrap();
    store.mkdir("made").await.unwrap();
    let walk = store.walk().await.unwrap();
    let shape: Vec<(&str, bool)> = walk.iter().map(|e| (e.path.as_str(), e.is_dir)).collect();
    assert_eq!(shape, vec![("a", true), ("a/empty", true), ("a/f", false), ("made", true)]);
    assert!(dir.path().join("made").is_dir());
    let f = &walk[2];
    assert_eq!(f.etag, format!("{}-{}", f.size, f.mtime_ns), "a directory store's tag is size and mtime");
    let meta = std::fs::metadata(dir.path().join("a/f")).unwrap();
    let mtime = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    assert_eq!(f.mtime_ns, mtime);
    assert!(store.stat("a/empty").await.unwrap().unwrap().is_dir);
    store.delete("a/empty", false).await.unwrap();
    assert!(!dir.path().join("a/empty").exists());
}

#[tokio::test]
async fn writes_land_as_plain_files_under_the_directory() {
    let (dir, store) = dir_store();
    store.write("x/y/z.bin", vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]).await.unwrap();
    assert_eq!(std::fs::read(dir.path().join("x/y/z.bin")).unwrap(), b"abcd");
    store.rename("x", "w").await.unwrap();
    assert_eq!(std::fs::read(dir.path().join("w/y/z.bin")).unwrap(), b"abcd");
}

#[tokio::test]
async fn check_fails_for_a_missing_directory_or_a_file_and_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-there");
    let uri = format!("file://{}", missing.display());
    let store = UnderStore::open(&uri, &BTreeMap::new()).unwrap();
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert_eq!(e.message, format!("{uri}: directory does not exist"));
    assert!(!missing.exists(), "opening does not create the directory");
    assert_eq!(store.walk().await.unwrap_err().kind, ErrorKind::NotFound);

    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let store = UnderStore::open(&format!("file://{}", file.display()), &BTreeMap::new()).unwrap();
    assert_eq!(store.check().await.unwrap_err().kind, ErrorKind::NotADirectory);
}

#[tokio::test]
async fn open_refuses_other_schemes_and_unknown_options() {
    let e = UnderStore::open("webhdfs://namenode:9870/data", &BTreeMap::new()).err().unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("use hdfs://namenode:8020/dir"), "{e}");
    let e = UnderStore::open("ftp://h/x", &BTreeMap::new()).err().unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let bad: BTreeMap<String, String> = [("acces_key_id".to_string(), "x".to_string())].into();
    let e = UnderStore::open("file:///tmp", &bad).err().unwrap();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("acces_key_id"), "{e}");
    let store = UnderStore::open("file:///tmp/", &BTreeMap::new()).unwrap();
    assert_eq!(store.uri(), "file:///tmp");
}
