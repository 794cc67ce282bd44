//! `resolve_options` and `open` reading the real process environment and AWS
//! files. One test function, because it changes the process environment
//! (nothing else in this test binary runs beside it).

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::S3Server;
use tierpool_types::ErrorKind;
use tierpool_under::{redact, UnderStore};

const AWS_VARS: [&str; 11] = [
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "HOME",
];

fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn options_come_from_the_environment_and_the_aws_files() {
    let server = S3Server::start();
    server.create_bucket("bkt");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    for var in AWS_VARS {
        std::env::remove_var(var);
    }
    std::env::set_var("HOME", home.path());

    eprintln!("== nothing set: the default region only");
    assert_eq!(UnderStore::resolve_options("s3://bkt", &BTreeMap::new()).unwrap(), opts(&[("region", "us-east-1")]));

    eprintln!("== the default profile in ~/.aws");
    let credentials = format!(
        "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n[other]\naws_access_key_id = AKOTHER\naws_secret_access_key = SKOTHER\n",
        server.access_key, server.secret_key
    );
    std::fs::write(home.path().join(".aws/credentials"), &credentials).unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        format!("[default]\nregion = eu-north-1\nendpoint_url = {}\n", server.endpoint()),
    )
    .unwrap();
    let resolved = UnderStore::resolve_options("s3://bkt", &BTreeMap::new()).unwrap();
    let want = opts(&[
        ("endpoint", &server.endpoint()),
        ("region", "eu-north-1"),
        ("access_key_id", &server.access_key),
        ("secret_access_key", &server.secret_key),
    ]);
    assert_eq!(resolved, want);
    let shown = redact(&resolved);
    assert_eq!(shown["secret_access_key"], "***");
    assert_eq!(shown["access_key_id"], server.access_key);

    eprintln!("== a store opened with no options reaches the server through the files");
    let store = UnderStore::open("s3://bkt/p", &BTreeMap::new()).unwrap();
    store.check().await.unwrap();
    store.write("f", vec![Bytes::from_static(b"through the files")]).await.unwrap();
    assert_eq!(store.read("f", 0, 100, None).await.unwrap(), &b"through the files"[..]);

    eprintln!("== AWS_PROFILE picks a profile; the variables come before it");
    std::env::set_var("AWS_PROFILE", "other");
    assert_eq!(UnderStore::resolve_options("s3://bkt", &BTreeMap::new()).unwrap()["access_key_id"], "AKOTHER");
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKENV");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "SKENV");
    std::env::set_var("AWS_SESSION_TOKEN", "TOKENV");
    std::env::set_var("AWS_REGION", "ap-east-1");
    std::env::set_var("AWS_ENDPOINT_URL", "http://generic.invalid");
    std::env::set_var("AWS_ENDPOINT_URL_S3", "http://s3.invalid");
    let resolved = UnderStore::resolve_options("s3://bkt", &BTreeMap::new()).unwrap();
    let want = opts(&[
        ("endpoint", "http://s3.invalid"),
        ("region", "ap-east-1"),
        ("access_key_id", "AKENV"),
        ("secret_access_key", "SKENV"),
        ("session_token", "TOKENV"),
    ]);
    assert_eq!(resolved, want);
    assert_eq!(redact(&resolved)["session_token"], "***");

    eprintln!("== an explicit profile option comes before the variables; files may live elsewhere");
    let elsewhere = home.path().join("creds-elsewhere");
    std::fs::write(&elsewhere, "[ci]\naws_access_key_id = AKCI\naws_secret_access_key = SKCI\n").unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &elsewhere);
    let resolved = UnderStore::resolve_options("s3://bkt", &opts(&[("profile", "ci")])).unwrap();
    assert_eq!((resolved["access_key_id"].as_str(), resolved["secret_access_key"].as_str()), ("AKCI", "SKCI"));
    assert!(!resolved.contains_key("session_token"), "the token of other credentials is not mixed in");
    std::env::set_var("AWS_CONFIG_FILE", home.path().join("no-such-config"));
    std::env::remove_var("AWS_REGION");
    assert_eq!(UnderStore::resolve_options("s3://bkt", &BTreeMap::new()).unwrap()["region"], "us-east-1");

    eprintln!("== directory stores take the options unchanged; unknown keys are refused");
    assert_eq!(
        UnderStore::resolve_options("file:///data", &opts(&[("region", "x")])).unwrap(),
        opts(&[("region", "x")])
    );
    let e = UnderStore::resolve_options("s3://bkt", &opts(&[("secret_key", "x")])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
}
