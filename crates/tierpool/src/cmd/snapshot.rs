//! `tierpool snapshot`: take, list, remove and restore snapshots.

use super::replicas::Progress;
use crate::cli::SnapshotCmd;
use crate::output::{count, time_text};
use anyhow::Result;
use serde_json::json;
use tierpool_client::{CheckpointReport, Client, SnapshotSummary};
use tierpool_types::ByteSize;

pub async fn run(cmd: SnapshotCmd) -> Result<()> {
    match cmd {
        SnapshotCmd::Create { path, name, json, conn } => {
            let c = super::connect(&conn).await?;
            let taken = if c.is_region(&path).await? {
                let mut bar = Progress::new();
                let r = c.checkpoint_with(&path, &name, &mut |d, t| bar.show(d, t)).await;
                bar.finish();
                Some(r?)
            } else {
                None
            };
            let s = match taken {
                Some(_) => c.snapshots(Some(&path)).await?.into_iter().find(|s| s.name == name),
                None => {
                    // Chunks of under-stores still below are loaded first.
                    let bar = super::under::Bar::new();
                    let r = c.snapshot_create_with(&path, &name, &|p| bar.show(p)).await;
                    bar.finish();
                    Some(r?)
                }
            };
            let s = s.ok_or_else(|| anyhow::anyhow!("{path}@{name}: was removed as soon as it was taken"))?;
            if json {
                let mut v = summary_json(&s);
                if let Some(r) = &taken {
                    v["checkpoint"] = report_json(r);
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{}", line(&s));
                if let Some(r) = &taken {
                    println!("{}", copied_line(r, "checkpoint"));
                }
            }
        }
        SnapshotCmd::Ls { path, json, conn } => list(&super::connect(&conn).await?, path.as_deref(), json).await?,
        SnapshotCmd::Rm { path, name, conn } => super::connect(&conn).await?.snapshot_remove(&path, &name).await?,
        SnapshotCmd::Restore { path, name, json, conn } => {
            let c = super::connect(&conn).await?;
            let (root, copied) = if c.is_region(&path).await? {
                let mut bar = Progress::new();
                let r = c.restore_region_with(&path, &name, &mut |d, t| bar.show(d, t)).await;
                bar.finish();
                (c.stat(&path).await?, Some(r?))
            } else {
                // Files of an under-store are then written below.
                let bar = super::under::Bar::new();
                let r = c.snapshot_restore_with(&path, &name, &|p| bar.show(p)).await;
                bar.finish();
                (r?, None)
            };
            if json {
                let mut v = json!({"path": path, "name": name, "inode": root.id.0});
                if let Some(r) = &copied {
                    v["checkpoint"] = report_json(r);
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{path}: restored from snapshot {name}");
                if let Some(r) = &copied {
                    println!("{}", copied_line(r, "restore"));
                }
            }
        }
    }
    Ok(())
}

async fn list(c: &Client, path: Option<&str>, json: bool) -> Result<()> {
    let all = c.snapshots(path).await?;
    if json {
        let v: Vec<_> = all.iter().map(summary_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if all.is_empty() {
        println!("no snapshot{}", path.map_or(String::new(), |p| format!(" of {p}")));
    }
    for s in &all {
        println!("{}", line(s));
    }
    Ok(())
}

fn line(s: &SnapshotSummary) -> String {
    format!(
        "{}@{}\t{}\t{}, {}\tkeeps {} no live file uses",
        s.path,
        s.name,
        time_text(s.created),
        count(s.entries, "entry", "entries"),
        ByteSize(s.bytes),
        ByteSize(s.kept_bytes)
    )
}

/// What a region's checkpoint or restore copied.
fn copied_line(r: &CheckpointReport, what: &str) -> String {
    let since = r.since.as_ref().map_or(String::new(), |s| format!(", sharing the others with checkpoint {s}"));
    format!(
        "{what} of a region: copied {} of {} on the workers ({}){since}",
        r.copied,
        count(r.chunks, "chunk", "chunks"),
        ByteSize(r.bytes_copied)
    )
}

fn report_json(r: &CheckpointReport) -> serde_json::Value {
    json!({"chunks": r.chunks, "copied": r.copied, "bytes_copied": r.bytes_copied, "since": r.since})
}

fn summary_json(s: &SnapshotSummary) -> serde_json::Value {
    json!({"path": s.path, "name": s.name, "created": s.created, "entries": s.entries,
           "bytes": s.bytes, "kept_bytes": s.kept_bytes})
}
