//! `replicas`, `placement` and `fsck`: how many copies of each chunk a
//! path keeps and where they are written, and which files are short of them.
//!
//! `fsck`'s findings are its exit status as well as its output (see
//! `cli::FSCK_EXIT_STATUS`): 0 healthy, 1 a chunk lost, 3 chunks short of
//! copies only.

use crate::cmd::ExitStatus;
use crate::output::{self, count};
use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tierpool_client::view::{FsckView, ReplicatedView};
use tierpool_client::{Client, InodeKind};
use tierpool_types::{ByteSize, Placement};

/// `fsck` found a chunk with no copy left.
pub const FSCK_LOST: i32 = 1;
/// `fsck` found chunks short of copies, none lost.
pub const FSCK_UNDER: i32 = 3;

/// How often the progress bar is drawn again on a terminal.
const DRAW_EVERY: Duration = Duration::from_millis(100);
/// How often a progress line is printed when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

pub async fn set(c: &Client, path: &str, copies: u8, recursive: bool, json: bool) -> Result<()> {
    let before = c.stat(path).await?;
    let mut progress = Progress::new();
    let done = c.set_replicas(path, copies, recursive, &mut |d, t| progress.show(d, t)).await;
    progress.finish();
    let done = ReplicatedView::new(&done?);
    if json {
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(());
    }
    let keep = count(u64::from(copies), "copy", "copies");
    if before.kind == InodeKind::Dir && !recursive {
        println!("{path}: new entries keep {keep} (what exists is unchanged: -r changes it too)");
    } else if done.files == 0 {
        println!("{path}: {} {keep} already", if recursive { "everything keeps" } else { "keeps" });
    } else {
        let what = match before.replicas.cmp(&copies) {
            std::cmp::Ordering::Less => "copied",
            std::cmp::Ordering::Greater => "of extra copies dropped",
            std::cmp::Ordering::Equal => "copied or dropped",
        };
        let files = count(done.files, "file keeps", "files keep");
        let chunks = count(done.chunks, "chunk", "chunks");
        println!("{path}: {files} {keep} ({chunks}, {} {what})", ByteSize(done.bytes));
    }
    Ok(())
}

/// `placement`: sets a path's placement policy.
pub async fn place(c: &Client, path: &str, policy: Placement, recursive: bool, json: bool) -> Result<()> {
    let before = c.stat(path).await?;
    let inodes = c.set_placement(path, policy, recursive).await?;
    if json {
        let v = serde_json::json!({ "path": path, "placement": policy.name(), "inodes": inodes });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if before.kind == InodeKind::Dir && !recursive {
        println!("{path}: new entries are placed {policy} (what exists is unchanged: -r changes it too)");
    } else {
        let what = count(inodes, "path", "paths");
        println!("{path}: {what} placed {policy} from now on (chunks already written stay where they are)");
    }
    Ok(())
}

pub async fn fsck(c: &Client, path: &str, json: bool) -> Result<()> {
    let entries: Vec<FsckView> = c.fsck(path).await?.iter().map(FsckView::new).collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
    } else {
        print!("{}", output::fsck_text(path, &entries));
    }
    std::io::stdout().flush()?;
    if entries.iter().any(|e| e.lost > 0) {
        return Err(ExitStatus(FSCK_LOST).into());
    }
    if entries.iter().any(|e| e.under > 0) {
        return Err(ExitStatus(FSCK_UNDER).into());
    }
    Ok(())
}

/// The bytes copied so far, on stderr: a bar redrawn in place on a
/// terminal, else a line now and then.
pub(crate) struct Progress {
    tty: bool,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    pub(crate) fn new() -> Progress {
        let tty = std::io::stderr().is_terminal();
        // Off a terminal, a change that takes less than a line's interval says nothing.
        Progress { tty, last: (!tty).then(Instant::now), drawn: false }
    }

    pub(crate) fn show(&mut self, done: u64, total: u64) {
        let every = if self.tty { DRAW_EVERY } else { LINE_EVERY };
        if total == 0 || self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let line = format!("{} of {} handled", ByteSize(done), ByteSize(total));
        if self.tty {
            eprint!("\r\x1b[2K{} {line}", output::bar(done, total));
            let _ = std::io::stderr().flush();
            self.drawn = true;
        } else if done < total {
            eprintln!("{line}");
        }
    }

    /// Clears the bar, so what follows starts on a clean line.
    pub(crate) fn finish(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}
