//! `mount` and `umount`: the pool as a FUSE file system.

use crate::cli::Conn;
use crate::cmd::client_config;
use crate::cmd::pool::{log_tail, spawn};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tierpool_client::Client;
use tierpool_fuse::{MountOptions, TierpoolFs};

/// Whether `dir` is a mount point now.
fn mounted(dir: &Path) -> bool {
    let target = dir.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(target.as_str()))
}

pub fn mount(mountpoint: &Path, opts: &MountOptions, foreground: bool, conn: &Conn) -> Result<()> {
    if !mountpoint.is_dir() {
        bail!("{}: not a directory", mountpoint.display());
    }
    let mp = mountpoint.canonicalize()?;
    if mounted(&mp) {
        bail!("{}: something is already mounted there", mp.display());
    }
    if !foreground {
        return mount_in_background(&mp, opts, conn);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // As a local file system: changes are kept by the coordinator's log
    // when answered, and fsynced there at an `fsync`.
    let cfg = tierpool_client::ClientConfig { written: true, ..client_config(conn) };
    let client = rt.block_on(Client::connect(cfg))?;
    let fs = TierpoolFs::new(client, rt.handle().clone(), opts.clone());
    tracing::info!("serving the pool at {} on {}", conn.coordinator, mp.display());
    tierpool_fuse::run(fs, &mp).with_context(|| format!("mounting at {}", mp.display()))?;
    Ok(())
}

/// Where the serving process of a mount at `mp` logs: one file per mount
/// point, started afresh by each mount and removed by `umount`.
fn log_of(mp: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut name: String = mp.to_string_lossy().trim_start_matches('/').replace('/', "_");
    if name.len() > 120 {
        // Same keys in every process of this build: `umount` finds the name `mount` chose.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut h);
        name = format!("{}-{:016x}", name.chars().take(80).collect::<String>(), h.finish());
    }
    std::env::temp_dir().join(format!("tierpool-mount-{name}.log"))
}

fn mount_in_background(mp: &Path, opts: &MountOptions, conn: &Conn) -> Result<()> {
    let exe = std::env::current_exe()?;
    let log = log_of(mp);
    let mut args: Vec<String> = vec![
        "mount".into(),
        mp.to_string_lossy().into(),
        "--foreground".into(),
        "--cache".into(),
        opts.cache.to_string(),
        "--dirty".into(),
        opts.dirty.to_string(),
        "--coordinator".into(),
        conn.coordinator.clone(),
    ];
    if let Some(f) = &conn.secret_file {
        args.extend(["--secret-file".into(), std::path::absolute(f)?.to_string_lossy().into_owned()]);
    }
    let pid = spawn(&exe, &args, &log)?;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if mounted(mp) {
            println!("mounted the pool at {} (pid {pid}, log {})", mp.display(), log.display());
            return Ok(());
        }
        // SAFETY: non-blocking check whether the child has exited.
        let exited = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) } == pid;
        if exited {
            bail!("mount failed: {}", log_tail(&log));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("mount did not appear at {} within 15s (log {})", mp.display(), log.display())
}

pub fn umount(mountpoint: &Path) -> Result<()> {
    let mp: PathBuf = mountpoint.canonicalize().unwrap_or_else(|_| mountpoint.to_path_buf());
    if !mounted(&mp) {
        bail!("{}: not mounted", mp.display());
    }
    let out = std::process::Command::new("fusermount3")
        .args(["-u"])
        .arg(&mp)
        .output()
        .context("running fusermount3 (install the fuse3 package)")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    // The serving process finishes its last calls, then exits. Until it has,
    // a new mount at the same place could be taken down by its exit.
    let start = Instant::now();
    while !servers_of(&mp).is_empty() {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("{} is unmounted but its serving process has not exited after 30s", mp.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(log_of(&mp));
    println!("unmounted {}", mp.display());
    Ok(())
}

/// Processes serving a mount of the pool at `mp` (`tierpool mount MP --foreground`).
fn servers_of(mp: &Path) -> Vec<u32> {
    let target = mp.to_string_lossy().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            args.contains(&&b"mount"[..]) && args.contains(&&b"--foreground"[..]) && args.contains(&target.as_bytes())
        })
        .collect()
}
