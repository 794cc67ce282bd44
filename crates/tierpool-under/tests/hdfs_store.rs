//! The HDFS store against a real NameNode and DataNode (Hadoop's
//! minicluster): the conformance suite, and what only HDFS does (atomic
//! renames of trees through the NameNode, its errors).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::HdfsServer;
use tierpool_types::ErrorKind;
use tierpool_under::UnderStore;

/// A fresh directory of the shared cluster, and a store over it.
async fn hdfs_store() -> (&'static HdfsServer, UnderStore) {
    let server = HdfsServer::shared();
    let dir = server.fresh_dir();
    let root = UnderStore::open(&server.uri(""), &BTreeMap::new()).unwrap();
    root.mkdir(&dir).await.unwrap();
    (server, UnderStore::open(&server.uri(&dir), &BTreeMap::new()).unwrap())
}

conformance!(async hdfs_store);

#[tokio::test]
async fn a_store_sees_only_its_directory_and_tags_files_by_size_and_time() {
    let (server, store) = hdfs_store().await;
    let root = UnderStore::open(&server.uri(""), &BTreeMap::new()).unwrap();
    let dir = store.uri().rsplit('/').next().unwrap().to_string();
    root.write(&format!("{dir}-beside"), vec![Bytes::from_static(b"not inside")]).await.unwrap();
    let entry = store.write("in", vec![Bytes::from_static(b"inside")]).await.unwrap();
    let inside: Vec<String> = store.walk().await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(inside, vec!["in"]);
    assert_eq!(entry.etag, format!("6-{}", entry.mtime_ns), "HDFS has no ETags: size and modification time");
    assert!(entry.mtime_ns > 0);
}

#[tokio::test]
async fn a_tree_moves_in_one_namenode_call_and_refuses_a_non_empty_target() {
    let (_server, store) = hdfs_store().await;
    store.write("a/f", vec![Bytes::from_static(b"1")]).await.unwrap();
    store.write("b/g", vec![Bytes::from_static(b"2")]).await.unwrap();
    let e = store.rename("a", "b").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::DirectoryNotEmpty, "{e}");
    assert!(e.message.starts_with(&format!("{}/a: ", store.uri())), "{e}");
    assert!(!e.message.contains('\n') && !e.message.contains("\tat "), "one line, no Java stack: {e}");
    store.mkdir("empty").await.unwrap();
    store.rename("a", "empty").await.unwrap();
    let walk: Vec<String> = store.walk().await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(walk, vec!["b", "b/g", "empty", "empty/f"], "an empty directory at the target is replaced");
    let e = store.rename("b/g", "empty").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io, "a file does not replace a directory: {e}");
    assert_eq!(store.read("b/g", 0, 9, None).await.unwrap(), &b"2"[..]);
}

#[tokio::test]
async fn an_unreachable_namenode_fails_fast_naming_it() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let store = UnderStore::open(&format!("hdfs://127.0.0.1:{port}/data"), &BTreeMap::new()).unwrap();
    let started = Instant::now();
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert_eq!(
        e.message,
        format!("hdfs://127.0.0.1:{port}/data: cannot reach the NameNode at 127.0.0.1:{port}: connection refused")
    );
    assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
    let e = store.write("f", vec![Bytes::from_static(b"x")]).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
}

#[tokio::test]
async fn a_missing_directory_or_a_file_as_the_root_is_refused() {
    let (server, store) = hdfs_store().await;
    let missing = UnderStore::open(&server.uri("no/such/dir"), &BTreeMap::new()).unwrap();
    let e = missing.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert_eq!(e.message, format!("{}: directory does not exist", server.uri("no/such/dir")));
    store.write("file", vec![Bytes::from_static(b"x")]).await.unwrap();
    let file = UnderStore::open(&format!("{}/file", store.uri()), &BTreeMap::new()).unwrap();
    assert_eq!(file.check().await.unwrap_err().kind, ErrorKind::NotADirectory);
}

/// A store opened and used on a current-thread runtime that is then left
/// idle (a thread's own runtime between its calls) serves calls from
/// another runtime: the HDFS clients keep the runtime current when they
/// are built for their connections' tasks, and that is not the idle one.
#[test]
fn a_store_opened_on_a_runtime_that_went_idle_serves_calls_from_another() {
    let server = HdfsServer::shared();
    let dir = server.fresh_dir();
    let first = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = first.block_on(async {
        let root = UnderStore::open(&server.uri(""), &BTreeMap::new()).unwrap();
        root.mkdir(&dir).await.unwrap();
        let store = UnderStore::open(&server.uri(&dir), &BTreeMap::new()).unwrap();
        store.write("a", vec![Bytes::from_static(b"one")]).await.unwrap();
        store
    });
    // `first` stays alive and idle: nothing waits on it from now on.
    let second = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            // Below the client's own 10 s for a NameNode answer.
            tokio::time::timeout(Duration::from_secs(8), async {
                let read = store.read("a", 0, 16, None).await.unwrap();
                store.write("b", vec![read]).await.unwrap();
                store.read("b", 0, 16, None).await.unwrap()
            })
            .await
        })
    });
    assert_eq!(second.join().unwrap().expect("no answer within 8 s").as_ref(), b"one");
    drop(first);
}
