//! `attach`, `detach`, `attachments`, `load`, `free`, `sync`, `sync-meta`:
//! the pool as a fast tier over under-stores. Long ones show progress on
//! stderr; `--json` prints the result as JSON on stdout.

use crate::cmd::replicas::Progress;
use anyhow::{bail, Result};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tierpool_client::{Client, InodeKind, UnderProgress};
use tierpool_meta::WriteMode;
use tierpool_types::ByteSize;

/// The store options given on the command line.
pub fn options(
    endpoint: Option<String>,
    region: Option<String>,
    profile: Option<String>,
    extra: &[String],
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (k, v) in [("endpoint", endpoint), ("region", region), ("profile", profile)] {
        if let Some(v) = v {
            out.insert(k.to_string(), v);
        }
    }
    for o in extra {
        let Some((k, v)) = o.split_once('=') else { bail!("--option {o}: expected KEY=VALUE") };
        out.insert(k.trim().to_string(), v.to_string());
    }
    Ok(out)
}

/// A progress bar fed by an under-store operation's callbacks.
pub(crate) struct Bar(Mutex<Progress>);

impl Bar {
    pub(crate) fn new() -> Bar {
        Bar(Mutex::new(Progress::new()))
    }

    pub(crate) fn show(&self, p: &UnderProgress) {
        let mut g = self.0.lock().expect("progress lock");
        if p.total_bytes > 0 {
            g.show(p.bytes, p.total_bytes);
        } else {
            g.show(p.files, p.total_files);
        }
    }

    pub(crate) fn finish(&self) {
        self.0.lock().expect("progress lock").finish();
    }
}

pub async fn attach(
    c: &Client,
    uri: &str,
    path: &str,
    mode: WriteMode,
    readonly: bool,
    options: &BTreeMap<String, String>,
    json: bool,
) -> Result<()> {
    let bar = Bar::new();
    let done = c.attach(uri, path, mode, readonly, options, &|p| bar.show(p)).await;
    bar.finish();
    let p = done?;
    if json {
        let v = json!({"path": path, "uri": uri, "mode": mode.name(), "readonly": readonly,
            "files": p.files, "dirs": p.dirs, "bytes": p.bytes});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let ro = if readonly { ", read-only" } else { "" };
        println!(
            "{uri} attached at {path} ({}{ro}): {} files, {} directories, {} (loaded on first read)",
            mode.name(),
            p.files,
            p.dirs,
            ByteSize(p.bytes)
        );
    }
    Ok(())
}

pub async fn detach(c: &Client, path: &str, force: bool, json: bool) -> Result<()> {
    let gone = c.detach(path, force).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({"path": path, "entries": gone}))?);
    } else {
        println!("{path}: detached ({gone} entries forgotten by the pool)");
    }
    Ok(())
}

pub async fn list(c: &Client, json: bool) -> Result<()> {
    let all = c.attachments().await?;
    if json {
        let v: Vec<_> = (all.iter())
            .map(|a| {
                json!({"path": a.path, "uri": a.attachment.uri, "mode": a.attachment.mode.name(),
                "readonly": a.attachment.readonly, "options": tierpool_under::redact(&a.attachment.options)})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if all.is_empty() {
        println!("no under-store is attached");
    }
    for a in all {
        let ro = if a.attachment.readonly { " read-only" } else { "" };
        println!("{}\t{}\t{}{ro}", a.path, a.attachment.uri, a.attachment.mode.name());
    }
    Ok(())
}

/// Refuses a directory without `-r`.
async fn check_recursive(c: &Client, path: &str, recursive: bool, what: &str) -> Result<()> {
    if !recursive && c.stat(path).await?.kind == InodeKind::Dir {
        bail!("{path}: is a directory; {what} -r {path} takes everything beneath it");
    }
    Ok(())
}

pub async fn load(c: &Client, path: &str, recursive: bool, json: bool) -> Result<()> {
    check_recursive(c, path, recursive, "tierpool load").await?;
    let bar = Bar::new();
    let done = c.load(path, &|p| bar.show(p)).await;
    bar.finish();
    let p = done?;
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({"path": path, "files": p.files, "bytes": p.bytes}))?);
    } else {
        println!("{path}: {} files, {} in the pool", p.files, ByteSize(p.bytes));
    }
    Ok(())
}

pub async fn free(c: &Client, path: &str, recursive: bool, json: bool) -> Result<()> {
    check_recursive(c, path, recursive, "tierpool free").await?;
    let r = c.free(path).await?;
    if json {
        let v = json!({"path": path, "files": r.files, "bytes": r.bytes, "skipped": r.skipped});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{path}: let go of {} of {} files", ByteSize(r.bytes), r.files);
        for s in &r.skipped {
            println!("kept {s}: it has changes not yet in its under-store (tierpool sync)");
        }
    }
    Ok(())
}

pub async fn sync(c: &Client, path: &str, json: bool) -> Result<()> {
    let bar = Bar::new();
    let done = c.sync(path, &|p| bar.show(p)).await;
    bar.finish();
    let r = done?;
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({"path": path, "files": r.files, "bytes": r.bytes}))?);
    } else {
        println!("{path}: wrote {} files ({}) to the under-store", r.files, ByteSize(r.bytes));
    }
    Ok(())
}

/// `tierpool write-mode`: `mode` `None` shows the file's; `Some(None)`
/// gives it its attachment's again.
pub async fn write_mode(
    c: &Client,
    path: &str,
    mode: Option<Option<WriteMode>>,
    recursive: bool,
    json: bool,
) -> Result<()> {
    let Some(mode) = mode else {
        let (m, own) = c.write_mode(path).await?;
        let from = if own { "its own" } else { "its attachment's" };
        if json {
            println!("{}", serde_json::to_string_pretty(&json!({"path": path, "mode": m.name(), "own": own}))?);
        } else {
            println!("{path}: {} ({from})", m.name());
        }
        return Ok(());
    };
    let r = c.set_write_mode(path, mode, recursive).await?;
    let shown = mode.map_or("by their attachment's mode".to_string(), |m| m.name().to_string());
    if json {
        let v = json!({"path": path, "mode": mode.map(|m| m.name()), "files": r.files, "written": r.written});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{path}: {} files now write {shown}; {} written to the under-store now", r.files, r.written);
    }
    Ok(())
}

pub async fn sync_meta(c: &Client, path: &str, json: bool) -> Result<()> {
    let r = c.sync_meta(path).await?;
    if json {
        let v = json!({"path": path, "added": r.added, "changed": r.changed, "removed": r.removed,
            "conflicts": r.conflicts});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{path}: {} added, {} changed, {} removed", r.added, r.changed, r.removed);
        for p in &r.conflicts {
            println!("conflict {p}: changed in the pool and in the under-store; the pool's version is kept");
        }
    }
    Ok(())
}
