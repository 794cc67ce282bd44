//! Namespace commands: put, get, cat, ls, stat, rm, mv, mkdir, pin, unpin,
//! region create.

use crate::cli::{Cmd, RegionCmd};
use crate::cmd::connect;
use crate::output;
use anyhow::{bail, Context, Result};
use tierpool_client::view::{EntryView, InfoView};
use tierpool_client::{Client, InodeKind, PutOptions, RegionOptions};
use tierpool_types::{validate_chunk_size, ByteSize, ChunkAttrs, Priority};
use tokio::io::AsyncWriteExt;

pub async fn run(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Put { local, remote, chunk_size, priority, pin, no_clobber, conn } => {
            let opts = PutOptions {
                chunk_size: validate_chunk_size(chunk_size.0)?,
                attrs: ChunkAttrs { priority: Priority::new(priority)?, pinned: pin },
                mode: 0o644,
                overwrite: !no_clobber,
                replicas: None,
            };
            put(&connect(&conn).await?, &local, &remote, &opts).await
        }
        Cmd::Region(RegionCmd::Create { path, size, chunk_size, priority, pin, conn }) => {
            let opts = RegionOptions {
                chunk_size: validate_chunk_size(chunk_size.0)?,
                attrs: ChunkAttrs { priority: Priority::new(priority)?, pinned: pin },
                mode: 0o644,
            };
            let info = connect(&conn).await?.alloc_region(&path, size.0, &opts).await?;
            println!(
                "{path}: region of {} ({} chunks) reserved",
                ByteSize(info.size),
                info.size.div_ceil(info.chunk_size)
            );
            Ok(())
        }
        Cmd::Get { remote, local, conn } => get(&connect(&conn).await?, &remote, &local).await,
        Cmd::Cat { paths, conn } => {
            let c = connect(&conn).await?;
            let mut out = tokio::io::stdout();
            for p in paths {
                c.get_writer(&p, &mut out).await?;
            }
            Ok(())
        }
        Cmd::Ls { path, long, json, conn } => ls(&connect(&conn).await?, &path, long, json).await,
        Cmd::Stat { path, json, conn } => {
            let c = connect(&conn).await?;
            let i = c.stat(&path).await?;
            // The snapshots of the path and what they keep (none through `.snapshots`).
            let through = path.split('/').any(|p| p == tierpool_meta::SNAPSHOTS);
            let snaps = if through { Vec::new() } else { c.snapshots(Some(&path)).await? };
            if json {
                let mut v = serde_json::to_value(InfoView::new(&path, &i))?;
                v["snapshots"] = (snaps.iter())
                    .map(|s| serde_json::json!({"name": s.name, "created": s.created, "kept_bytes": s.kept_bytes}))
                    .collect();
                if let Some(name) = &i.restoring {
                    v["restoring"] = name.clone().into();
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", output::info_text(&path, &i));
                if !snaps.is_empty() {
                    let each: Vec<_> =
                        snaps.iter().map(|s| format!("{} (keeps {})", s.name, ByteSize(s.kept_bytes))).collect();
                    println!(" snaps: {}", each.join(", "));
                }
                if let Some(name) = &i.restoring {
                    println!(" restoring: to checkpoint {name}, not finished (run `tierpool snapshot restore` again)");
                }
            }
            Ok(())
        }
        Cmd::Rm { paths, recursive, conn } => {
            let c = connect(&conn).await?;
            for p in paths {
                c.remove(&p, recursive).await?;
            }
            Ok(())
        }
        Cmd::Mv { src, dst, conn } => {
            let c = connect(&conn).await?;
            let dst = into_dir(&c, &dst, &src).await?;
            Ok(c.rename(&src, &dst).await?)
        }
        Cmd::Mkdir { paths, parents, conn } => {
            let c = connect(&conn).await?;
            for p in paths {
                c.mkdir(&p, parents).await?;
            }
            Ok(())
        }
        Cmd::Pin { path, conn } => pin(&connect(&conn).await?, &path, true).await,
        Cmd::Unpin { path, conn } => pin(&connect(&conn).await?, &path, false).await,
        _ => unreachable!("server and pool commands are dispatched in cmd::run"),
    }
}

fn basename(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or(p)
}

/// `DST/basename(SRC)` when `DST` is an existing directory (or ends in `/`), else `DST`.
async fn into_dir(c: &Client, dst: &str, src: &str) -> Result<String> {
    let is_dir = dst.ends_with('/') || matches!(c.stat(dst).await, Ok(i) if i.kind == InodeKind::Dir);
    if is_dir && !basename(src).is_empty() {
        return Ok(format!("{}/{}", dst.trim_end_matches('/'), basename(src)));
    }
    Ok(dst.to_string())
}

async fn put(c: &Client, local: &str, remote: &str, opts: &PutOptions) -> Result<()> {
    if local == "-" {
        c.put_reader(remote, tokio::io::stdin(), opts).await?;
        return Ok(());
    }
    let meta = std::fs::metadata(local).with_context(|| format!("cannot read {local}"))?;
    if meta.is_dir() {
        bail!("{local}: is a directory (put copies one file)");
    }
    let remote = into_dir(c, remote, local).await?;
    let f = tokio::fs::File::open(local).await.with_context(|| format!("cannot read {local}"))?;
    let f = tokio::io::BufReader::with_capacity(1 << 20, f);
    c.put_reader(&remote, f, opts).await?;
    Ok(())
}

async fn get(c: &Client, remote: &str, local: &str) -> Result<()> {
    if local == "-" {
        c.get_writer(remote, &mut tokio::io::stdout()).await?;
        return Ok(());
    }
    let mut target = std::path::PathBuf::from(local);
    if target.is_dir() {
        target.push(basename(remote));
    }
    // A device or a pipe (/dev/null, a FIFO) is written as it is.
    if std::fs::metadata(&target).is_ok_and(|m| !m.is_file()) {
        let f = tokio::fs::OpenOptions::new().write(true).open(&target).await;
        let mut w = f.with_context(|| format!("cannot write {}", target.display()))?;
        c.get_writer(remote, &mut w).await?;
        return Ok(());
    }
    // Write beside the target and rename, so a failed get leaves no partial file.
    let tmp = target.with_file_name(format!(
        ".{}.tierpool-partial",
        target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    let f = tokio::fs::File::create(&tmp).await.with_context(|| format!("cannot write {}", target.display()))?;
    let mut w = tokio::io::BufWriter::with_capacity(1 << 20, f);
    let res = c.get_writer(remote, &mut w).await;
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.into());
    }
    w.shutdown().await?;
    std::fs::rename(&tmp, &target).with_context(|| format!("cannot write {}", target.display()))?;
    Ok(())
}

async fn ls(c: &Client, path: &str, long: bool, json: bool) -> Result<()> {
    let entries = c.list(path).await?;
    if json {
        let v: Vec<_> = entries.iter().map(EntryView::new).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for e in &entries {
        if long {
            println!("{}", output::long_line(e));
        } else if e.info.kind == InodeKind::Dir {
            println!("{}/", e.name);
        } else {
            println!("{}", e.name);
        }
    }
    Ok(())
}

async fn pin(c: &Client, path: &str, pinned: bool) -> Result<()> {
    let n = c.set_attrs(path, None, Some(pinned)).await?;
    println!("{} {n} file{}", if pinned { "pinned" } else { "unpinned" }, if n == 1 { "" } else { "s" });
    Ok(())
}
