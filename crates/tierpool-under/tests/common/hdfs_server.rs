//! `HdfsServer`: Hadoop's minicluster (a NameNode and one DataNode in one
//! JVM) for tests, on free loopback ports over a fresh temporary directory.
//!
//! A JVM takes seconds to start and half a GiB to run, so the tests of one
//! process share one cluster (`HdfsServer::shared`), each in a directory of
//! its own (`fresh_dir`). A shell beside the JVM kills it when the test
//! process is gone, however it ends; a cluster of one's own
//! (`HdfsServer::start`) is killed when dropped.
//!
//! Copy this file as is into another crate's `tests/common/`; it finds
//! `scripts/hdfs-server.sh` from that crate's manifest directory (two levels
//! below the workspace root). The jars come from `TIERPOOL_HDFS_LIB`
//! (scripts/test.sh sets it), else from that script, which installs them once.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a started cluster has to say it is up.
const READY_WITHIN: Duration = Duration::from_secs(180);
/// What the minicluster logs once the DataNode has joined.
const READY_LINE: &str = "Started MiniDFSCluster -- namenode on port";

/// A running minicluster.
pub struct HdfsServer {
    /// The shell watching the JVM.
    child: Child,
    /// The NameNode's RPC port.
    pub port: u16,
    http_port: u16,
    pub root: tempfile::TempDir,
}

impl HdfsServer {
    /// The cluster shared by every test of this process, started on first use.
    pub fn shared() -> &'static HdfsServer {
        static SHARED: OnceLock<HdfsServer> = OnceLock::new();
        SHARED.get_or_init(HdfsServer::start)
    }

    /// A cluster of one's own, empty.
    pub fn start() -> HdfsServer {
        let root = tempfile::tempdir().expect("a temporary directory for the HDFS cluster");
        for _attempt in 0..3 {
            let (port, http_port) = (free_port(), free_port());
            if let Some(child) = spawn(root.path(), port, http_port, true) {
                return HdfsServer { child, port, http_port, root };
            }
        }
        let log = std::fs::read_to_string(root.path().join("cluster.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
        panic!("the HDFS minicluster did not start; the end of its log:\n{}", tail.join("\n"));
    }

    /// "hdfs://127.0.0.1:PORT/dir" (`dir` without a leading '/').
    pub fn uri(&self, dir: &str) -> String {
        format!("hdfs://127.0.0.1:{}/{dir}", self.port)
    }

    /// A directory name no other caller in this process gets: "t{pid}-{n}".
    pub fn fresh_dir(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        format!("t{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Kills the JVM (kill -9); its data stays.
    pub fn stop(&mut self) {
        kill_jvm(self.root.path());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the cluster again on its ports, over the same data.
    pub fn restart(&mut self) {
        self.stop();
        for _attempt in 0..50 {
            if let Some(child) = spawn(self.root.path(), self.port, self.http_port, false) {
                self.child = child;
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("the HDFS minicluster did not start again on port {}", self.port);
    }
}

impl Drop for HdfsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The JVM's flags: a small heap, and its scratch files under the cluster's
/// directory (`tmp`, made by the shell that starts it) rather than in /tmp.
const JVM: [&str; 4] = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Djava.io.tmpdir=tmp"];

/// A minicluster over `root` (formatted first if `format`) whose NameNode
/// listens on `port`, once it is up.
fn spawn(root: &Path, port: u16, http_port: u16, format: bool) -> Option<Child> {
    let _ = std::fs::remove_file(root.join("cluster.log"));
    let classpath = format!("{}/*", lib().display());
    // The JVM runs in the background of a shell that kills it and removes
    // its files once this process is gone; its pid goes to a file for `stop`.
    // Its scratch files (web server, perf data) stay under `root` as well.
    let watch = r#"mkdir -p tmp; java "$@" >cluster.log 2>&1 & echo $! >jvm.pid
        while kill -0 "$OWNER" 2>/dev/null && kill -0 $! 2>/dev/null; do sleep 1; done
        kill -9 $! 2>/dev/null; wait; rm -rf "$ROOT""#;
    let mut child = Command::new("sh")
        .args(["-c", watch, "sh"])
        .args(JVM)
        .args(["-cp", &classpath, "org.apache.hadoop.test.MiniDFSClusterManager"])
        .args(format.then_some("-format"))
        .args(["-nnport", &port.to_string(), "-httpport", &http_port.to_string(), "-datanodes", "1"])
        .env("OWNER", std::process::id().to_string())
        .env("ROOT", root)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the HDFS minicluster (sh, java): {e}"));
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        let log = std::fs::read_to_string(root.join("cluster.log")).unwrap_or_default();
        if log.contains(READY_LINE) {
            return Some(child);
        }
        if matches!(child.try_wait(), Ok(Some(_))) || log.contains("BindException") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    kill_jvm(root);
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn kill_jvm(root: &Path) {
    if let Ok(pid) = std::fs::read_to_string(root.join("jvm.pid")) {
        let _ = Command::new("kill").args(["-9", pid.trim()]).stderr(Stdio::null()).status();
    }
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

/// The minicluster's jars: `TIERPOOL_HDFS_LIB`, else what scripts/hdfs-server.sh prints.
fn lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(path) = std::env::var_os("TIERPOOL_HDFS_LIB").filter(|p| !p.is_empty()) {
            return PathBuf::from(path);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hdfs-server.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(out.status.success(), "{} failed (see above)", script.display());
        PathBuf::from(String::from_utf8(out.stdout).expect("a UTF-8 path").trim())
    })
    .clone()
}
