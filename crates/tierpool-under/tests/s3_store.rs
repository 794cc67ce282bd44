//! The S3 store against a real S3 server (s3s-fs): the conformance suite, and
//! what only S3 does (prefixes, multipart ETags, its errors).

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::S3Server;
use tierpool_types::ErrorKind;
use tierpool_under::UnderStore;

/// A fresh server with bucket "bkt", and a store over its prefix "pre/fix".
fn s3_store() -> (S3Server, UnderStore) {
    let server = S3Server::start();
    server.create_bucket("bkt");
    let store = UnderStore::open("s3://bkt/pre/fix", &server.options()).unwrap();
    (server, store)
}

conformance!(s3_store);

#[tokio::test]
async fn a_store_sees_only_its_prefix() {
    let (server, store) = s3_store();
    let whole = UnderStore::open("s3://bkt", &server.options()).unwrap();
    whole.write("pre/fixed", vec![Bytes::from_static(b"not below pre/fix/")]).await.unwrap();
    whole.write("top", vec![Bytes::from_static(b"x")]).await.unwrap();
    store.write("in", vec![Bytes::from_static(b"y")]).await.unwrap();
    let inside: Vec<String> = store.walk().await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(inside, vec!["in"]);
    let all: Vec<String> = whole.walk().await.unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(all, vec!["pre", "pre/fix", "pre/fix/in", "pre/fixed", "top"]);
    assert!(server.bucket_dir("bkt").join("pre/fix/in").is_file(), "objects are where the server keeps keys");
}

#[tokio::test]
async fn large_writes_are_multipart_uploads() {
    let (_server, store) = s3_store();
    let pieces: Vec<Bytes> = (0..20).map(|i| Bytes::from(vec![i as u8; 1 << 20])).collect();
    let entry = store.write("big", pieces).await.unwrap();
    assert!(entry.etag.ends_with("-3"), "three 8 MiB parts give a multipart ETag: {}", entry.etag);
    let small = store.write("small", vec![Bytes::from_static(b"abc")]).await.unwrap();
    assert_eq!(small.etag, "900150983cd24fb0d6963f7d28e17f72", "a single PUT's ETag is the MD5 of its bytes");
}

#[tokio::test]
async fn check_fails_for_a_missing_bucket() {
    let server = S3Server::start();
    let store = UnderStore::open("s3://nob/p", &server.options()).unwrap();
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert_eq!(e.message, "s3://nob/p: bucket \"nob\" does not exist");
    assert_eq!(store.walk().await.unwrap_err().kind, ErrorKind::NotFound);
}

#[tokio::test]
async fn check_fails_for_a_wrong_secret_key() {
    let server = S3Server::start();
    server.create_bucket("bkt");
    let mut options = server.options();
    options.insert("secret_access_key".into(), "not-the-secret".into());
    let store = UnderStore::open("s3://bkt", &options).unwrap();
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated, "{e}");
    assert!(e.message.starts_with("s3://bkt: credentials refused"), "{e}");
    let e = store.read("any", 0, 1, None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated, "{e}");
}

/// Options for an endpoint that is no S3 server.
fn options_for(endpoint: String) -> std::collections::BTreeMap<String, String> {
    let pairs = [("endpoint", endpoint.as_str()), ("access_key_id", "k"), ("secret_access_key", "s"), ("region", "r")];
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn check_fails_fast_for_an_endpoint_with_nothing_listening() {
    let port = common::s3_server::free_port();
    let store = UnderStore::open("s3://bkt/p", &options_for(format!("http://127.0.0.1:{port}"))).unwrap();
    let started = Instant::now();
    let e = store.check().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert_eq!(e.message, format!("s3://bkt/p: cannot reach http://127.0.0.1:{port}: connection refused"));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn check_gives_up_on_a_server_that_never_answers() {
    // Connections complete in the listener's backlog; nothing ever reads them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let store = UnderStore::open("s3://bkt", &options_for(format!("http://127.0.0.1:{port}"))).unwrap();
    let started = Instant::now();
    let e = store.check().await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert_eq!(e.message, format!("s3://bkt: no answer from http://127.0.0.1:{port} within 10 s"));
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(15), "took {took:?}");
}

/// A store called from a current-thread runtime that is then left idle (a
/// thread's own runtime between its calls) serves the next call from
/// another runtime: the S3 client's kept connection does not belong to the
/// idle runtime.
#[test]
fn a_store_used_from_a_runtime_that_went_idle_serves_calls_from_another() {
    let (_server, store) = s3_store();
    let first = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    first.block_on(store.write("a", vec![Bytes::from_static(b"one")])).unwrap();
    // `first` stays alive and idle: nothing waits on it from now on.
    let s = store.clone();
    let second = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            // Below the client's own 20 s for an answer, which retries.
            tokio::time::timeout(Duration::from_secs(10), async {
                let read = s.read("a", 0, 16, None).await.unwrap();
                s.write("b", vec![read]).await.unwrap();
                s.read("b", 0, 16, None).await.unwrap()
            })
            .await
        })
    });
    assert_eq!(second.join().unwrap().expect("no answer within 10 s").as_ref(), b"one");
    drop(first);
}
