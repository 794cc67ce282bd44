//! `S3Server`: an s3s-fs process for one test (see `mod.rs`).
//!
//! Copy this file as is into another crate's `tests/common/`; it finds
//! `scripts/s3-server.sh` from that crate's manifest directory (two levels
//! below the workspace root).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a started server has to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running s3s-fs, killed on drop.
pub struct S3Server {
    child: Child,
    pub port: u16,
    /// The server's data: `root.path().join("data")` holds one directory per bucket.
    pub root: tempfile::TempDir,
    pub access_key: String,
    pub secret_key: String,
}

impl S3Server {
    /// Starts a server with fresh credentials and no buckets.
    pub fn start() -> S3Server {
        let root = tempfile::tempdir().expect("a temporary directory for the S3 server");
        let data = root.path().join("data");
        std::fs::create_dir(&data).expect("the S3 server's data directory");
        let log_path = root.path().join("server.log");
        let (access_key, secret_key) = ("tierpool-test-key".to_string(), "tierpool-test-secret".to_string());
        for _attempt in 0..5 {
            let port = free_port();
            let log = std::fs::File::create(&log_path).expect("the S3 server's log file");
            let mut child = Command::new(binary())
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", &access_key, "--secret-key", &secret_key])
                .arg(&data)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file handle"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary().display()));
            if wait_ready(&mut child, port) {
                return S3Server { child, port, root, access_key, secret_key };
            }
            // Lost the port to another process, most likely: try another.
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("the S3 server (s3s-fs) did not start; its log:\n{log}");
    }

    /// "http://127.0.0.1:PORT".
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (a directory under the server's data directory).
    pub fn create_bucket(&self, name: &str) {
        std::fs::create_dir_all(self.bucket_dir(name)).expect("the bucket's directory");
    }

    /// Where the server keeps the objects of `bucket`.
    pub fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.path().join("data").join(bucket)
    }

    /// Under-store options that reach this server with its credentials.
    pub fn options(&self) -> BTreeMap<String, String> {
        let mut o = BTreeMap::new();
        o.insert("endpoint".to_string(), self.endpoint());
        o.insert("region".to_string(), "us-east-1".to_string());
        o.insert("access_key_id".to_string(), self.access_key.clone());
        o.insert("secret_access_key".to_string(), self.secret_key.clone());
        o
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server `child` accepts connections on `port` within `READY_WITHIN`.
fn wait_ready(child: &mut Child, port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

/// The s3s-fs binary: `TIERPOOL_S3S_FS`, else what scripts/s3-server.sh prints.
fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("TIERPOOL_S3S_FS").filter(|p| !p.is_empty()) {
                return PathBuf::from(path);
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3-server.sh");
            let out = Command::new("bash")
                .arg(&script)
                .stderr(Stdio::inherit())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
            assert!(out.status.success(), "{} failed: no S3 server for the tests", script.display());
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone()
}
