//! `tierpool snapshot`: take, list, remove and restore snapshots.

use crate::cli::SnapshotCmd;
use crate::output::{count, time_text};
use anyhow::Result;
use serde_json::json;
use tierpool_client::{Client, SnapshotSummary};
use tierpool_types::ByteSize;

pub async fn run(cmd: SnapshotCmd) -> Result<()> {
    match cmd {
        SnapshotCmd::Create { path, name, json, conn } => {
            let s = super::connect(&conn).await?.snapshot_create(&path, &name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&summary_json(&s))?);
            } else {
                println!("{}", line(&s));
            }
        }
        SnapshotCmd::Ls { path, json, conn } => list(&super::connect(&conn).await?, path.as_deref(), json).await?,
        SnapshotCmd::Rm { path, name, conn } => super::connect(&conn).await?.snapshot_remove(&path, &name).await?,
        SnapshotCmd::Restore { path, name, json, conn } => {
            let root = super::connect(&conn).await?.snapshot_restore(&path, &name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&json!({"path": path, "name": name, "inode": root.id.0}))?);
            } else {
                println!("{path}: restored from snapshot {name}");
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

fn summary_json(s: &SnapshotSummary) -> serde_json::Value {
    json!({"path": s.path, "name": s.name, "created": s.created, "entries": s.entries,
           "bytes": s.bytes, "kept_bytes": s.kept_bytes})
}
