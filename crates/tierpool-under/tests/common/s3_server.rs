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
        std::fs::create_dir(root.path().join("data")).expect("the S3 server's data directory");
        let (access_key, secret_key) = ("tierpool-test-key".to_string(), "tierpool-test-secret".to_string());
        for _attempt in 0..5 {
            let port = free_port();
            if let Some(child) = spawn(root.path(), port, &access_key, &secret_key) {
                return S3Server { child, port, root, access_key, secret_key };
            }
            // Lost the port to another process, most likely: try another.
        }
        let log = std::fs::read_to_string(root.path().join("server.log")).unwrap_or_default();
        panic!("the S3 server (s3s-fs) did not start; its log:\n{log}");
    }

    /// Kills the server (kill -9); its data stays.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on its port, over the same data.
    pub fn restart(&mut self) {
        self.stop();
        for _attempt in 0..50 {
            if let Some(child) = spawn(self.root.path(), self.port, &self.access_key, &self.secret_key) {
                self.child = child;
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the S3 server did not start again on port {}", self.port);
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

/// An s3s-fs over `root/data` on `port`, once it accepts connections.
fn spawn(root: &Path, port: u16, access_key: &str, secret_key: &str) -> Option<Child> {
    let log = std::fs::File::create(root.join("server.log")).expect("the S3 server's log file");
    let mut child = Command::new(binary())
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", access_key, "--secret-key", secret_key])
        .arg(root.join("data"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary().display()));
    if wait_ready(&mut child, port) {
        return Some(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
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
