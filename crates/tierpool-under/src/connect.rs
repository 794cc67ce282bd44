//! Building the OpenDAL operator of a store: service, HTTP transport, layers.
//!
//! Every service gets the root "/" of its namespace (the file system, the
//! bucket, the HDFS file system); the store's own directory or prefix is
//! prepended to every path by `UnderStore`. So opening a directory store
//! never creates its directory (OpenDAL's fs service creates a missing root),
//! and `check` can say it is missing.
//!
//! S3 is set up for S3-compatible servers as much as for AWS: path-style
//! requests to the endpoint given, the region given, credentials only from
//! the options (`options.rs` resolved them; OpenDAL's own loading from the
//! environment, profiles and the EC2 metadata service is off), unsigned
//! requests when there are none. HTTP goes through one shared reqwest client
//! (one per process) on rustls with the ring provider (installed once per process, together
//! with OpenDAL's default transport for any code path that uses the default).
//!
//! HDFS goes through OpenDAL's hdfs-native service (the NameNode's RPC
//! protocol, no JVM), plus one client of the same library for what that
//! service lacks (renames of directories). Both read `HADOOP_CONF_DIR` as the
//! Hadoop tools do; on top of it a failed NameNode call is tried
//! again at most `HDFS_RETRIES` times and a silent socket gives up after
//! `HDFS_SOCKET_TIMEOUT`, so an unreachable NameNode fails fast instead of
//! after minutes of the library's own retries.
//!
//! Bounds: a connection attempt gives up after `CONNECT_TIMEOUT`; each
//! attempt of a control operation (stat, create, delete, copy) after
//! `CONTROL_TIMEOUT`, of a body operation (list, read, write) and of each
//! call on a body after `IO_TIMEOUT`; temporary failures (refused
//! connections, timeouts, 5xx, throttling) are retried `RETRIES` times with
//! short backoff. So an endpoint with nothing listening fails an operation in
//! about a second, one that drops packets in about 13 s, and one that
//! accepts connections but never answers in up to `(RETRIES + 1) *
//! IO_TIMEOUT`; `UnderStore::check` gives up after `CHECK_WITHIN` whatever
//! the cause.

use std::collections::BTreeMap;
use std::sync::Once;
use std::time::Duration;

use opendal::layers::{RetryLayer, TimeoutLayer};
use opendal::{HttpTransporter, OperationContext, Operator};
use tierpool_types::Error;

use tierpool_types::PerProcess;

pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// Long enough to send one 8 MiB part at 400 KB/s.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(20);
pub(crate) const RETRIES: usize = 3;
pub(crate) const CHECK_WITHIN: Duration = Duration::from_secs(10);

/// The operator of a directory tree: the local file system from "/".
pub(crate) fn fs_operator() -> std::result::Result<Operator, opendal::Error> {
    let builder = opendal::services::Fs::default().root("/");
    Ok(Operator::new(builder)?.layer(TimeoutLayer::new().with_timeout(CONTROL_TIMEOUT).with_io_timeout(IO_TIMEOUT)))
}

/// Times a failed NameNode call is tried again before its error is returned.
const HDFS_RETRIES: &str = "2";
/// Milliseconds a NameNode or DataNode socket may stay silent.
const HDFS_SOCKET_TIMEOUT: &str = "10000";

/// The operator of an HDFS file system whose NameNode is at `namenode` ("host:port").
pub(crate) fn hdfs_operator(namenode: &str) -> std::result::Result<Operator, opendal::Error> {
    let builder = opendal::services::HdfsNative::default()
        .name_node(&format!("hdfs://{namenode}"))
        .root("/")
        .options(hdfs_config());
    Ok(Operator::new(builder)?.layer(TimeoutLayer::new().with_timeout(CONTROL_TIMEOUT).with_io_timeout(IO_TIMEOUT)))
}

/// A client of the same file system, for the calls OpenDAL's service lacks.
pub(crate) fn hdfs_client(namenode: &str) -> std::result::Result<hdfs_native::Client, opendal::Error> {
    hdfs_native::ClientBuilder::new()
        .with_url(format!("hdfs://{namenode}"))
        .with_config(hdfs_config())
        .build()
        .map_err(|e| opendal::Error::new(opendal::ErrorKind::ConfigInvalid, e.to_string()))
}

fn hdfs_config() -> std::collections::HashMap<String, String> {
    [
        ("dfs.client.failover.max.attempts", HDFS_RETRIES),
        ("dfs.client.failover.sleep.base.millis", "100"),
        ("dfs.client.failover.sleep.max.millis", "1000"),
        ("dfs.client.socket-timeout", HDFS_SOCKET_TIMEOUT),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The endpoint requests go to: the one given, else AWS's for the region.
pub(crate) fn s3_endpoint(options: &BTreeMap<String, String>, region: &str) -> String {
    match options.get("endpoint") {
        Some(e) if e.starts_with("http://") || e.starts_with("https://") => e.trim_end_matches('/').to_string(),
        Some(e) => format!("https://{}", e.trim_end_matches('/')),
        None => format!("https://s3.{region}.amazonaws.com"),
    }
}

/// The operator of a bucket, from resolved options.
pub(crate) fn s3_operator(
    bucket: &str,
    endpoint: &str,
    region: &str,
    options: &BTreeMap<String, String>,
) -> std::result::Result<Operator, opendal::Error> {
    let mut builder = opendal::services::S3::default()
        .bucket(bucket)
        .root("/")
        .endpoint(endpoint)
        .region(region)
        .disable_config_load()
        .disable_ec2_metadata();
    match (options.get("access_key_id"), options.get("secret_access_key")) {
        (Some(id), Some(secret)) => {
            builder = builder.access_key_id(id).secret_access_key(secret);
            if let Some(token) = options.get("session_token") {
                builder = builder.session_token(token);
            }
        }
        _ => builder = builder.skip_signature(),
    }
    let transport = HttpTransporter::new(opendal_http_transport_reqwest::ReqwestTransport::new(http_client()?));
    let retry = RetryLayer::new()
        .with_max_times(RETRIES)
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter();
    Ok(Operator::new(builder)?
        .with_context(OperationContext::new().with_http_transport(transport))
        .layer(TimeoutLayer::new().with_timeout(CONTROL_TIMEOUT).with_io_timeout(IO_TIMEOUT))
        .layer(retry))
}

/// The process's shared HTTP client (one connection pool for every store;
/// a forked child makes its own: see `home.rs`).
fn http_client() -> std::result::Result<reqwest::Client, opendal::Error> {
    static CLIENT: PerProcess<std::result::Result<reqwest::Client, String>> = PerProcess::new();
    install_tls_and_default_transport();
    let make = || {
        reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())
    };
    let client = CLIENT.get_or_init_or(make, drop);
    client.clone().map_err(|e| opendal::Error::new(opendal::ErrorKind::ConfigInvalid, format!("no HTTP client: {e}")))
}

/// Installs, once, the ring crypto provider for rustls (unless the process
/// installed one already) and OpenDAL's default HTTP transport.
fn install_tls_and_default_transport() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        opendal_http_transport_reqwest::install_default();
    });
}

/// An operator error while building, as a tierpool error naming the store.
pub(crate) fn build_error(uri: &str, e: opendal::Error) -> Error {
    Error::invalid(format!("{uri}: cannot set up the store: {}", e.message()))
}
