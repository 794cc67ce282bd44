//! `worker drain`, `worker remove`, `rebalance`: changing the shape of a pool, and
//! following the partitions as they move.

use crate::output;
use anyhow::{bail, Result};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tierpool_client::view::StatusView;
use tierpool_client::Client;
use tierpool_placement::PartitionTable;
use tierpool_types::WorkerId;

/// How often `--wait` looks at the pool.
const POLL: Duration = Duration::from_millis(500);
/// How often `--wait` prints a line when its output is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

pub async fn drain(c: &Client, worker: u32, wait: bool) -> Result<()> {
    let id = WorkerId(worker);
    c.drain_worker(id).await?;
    println!("draining worker {id}: its partitions move to the others");
    if wait {
        follow(c, |s| s.workers.iter().find(|w| w.id == worker).is_none_or(|w| w.partitions == 0)).await?;
        println!("worker {id} holds no partitions: stop it, then `tierpool worker remove {worker}`");
    }
    Ok(())
}

pub async fn remove(c: &Client, worker: u32) -> Result<()> {
    let id = WorkerId(worker);
    let (partitions, lost) = c.remove_worker(id).await?;
    println!("removed worker {id}: {} partitions it owned went to the others", partitions.len());
    if !lost.is_empty() {
        println!("{} files or regions had chunks only on it; reading them fails with \"lost\":", lost.len());
        for path in &lost {
            println!("  {path}");
        }
    }
    Ok(())
}

pub async fn rebalance(c: &Client, dry_run: bool, wait: bool) -> Result<()> {
    if dry_run {
        return print_plan(c).await;
    }
    c.rebalance().await?;
    let s = StatusView::new(c.coordinator_addr(), &c.status().await?);
    if !s.migration.active {
        println!("the pool is balanced: nothing to move");
        return Ok(());
    }
    println!("rebalancing: {} partitions to move", s.migration.partitions_left);
    if wait {
        follow(c, |s| !s.migration.active).await?;
        println!("the pool is balanced");
    }
    Ok(())
}

/// What a rebalance would do: each worker's partitions now and after.
async fn print_plan(c: &Client) -> Result<()> {
    let layout = c.refresh_layout().await?;
    let s = StatusView::new(c.coordinator_addr(), &c.status().await?);
    let weights: Vec<(WorkerId, u64)> = (s.workers.iter())
        .filter(|w| !w.draining)
        .map(|w| (WorkerId(w.id), tierpool_placement::weight(w.mem.capacity, w.disk.capacity, w.speed)))
        .collect();
    if weights.is_empty() {
        bail!("the pool has no workers to balance");
    }
    let t: &PartitionTable = &layout.table;
    let next = t.rebalanced(&weights);
    let (now, after) = (t.shares(), next.shares());
    let moves = (0..t.partitions()).filter(|p| t.owner(*p) != next.owner(*p)).count();
    println!("{:<5} {:>10} {:>10}", "ID", "NOW", "AFTER");
    for w in &s.workers {
        let id = WorkerId(w.id);
        let (a, b) = (now.get(&id).copied().unwrap_or(0), after.get(&id).copied().unwrap_or(0));
        println!("{:<5} {a:>10} {b:>10}", format!("w{}", w.id));
    }
    println!("a rebalance would move {moves} of {} partitions", t.partitions());
    Ok(())
}

/// Shows the migration's progress until `done` holds for the pool.
async fn follow(c: &Client, done: impl Fn(&StatusView) -> bool) -> Result<()> {
    let tty = std::io::stderr().is_terminal();
    let mut last_line = Instant::now() - LINE_EVERY;
    loop {
        let s = StatusView::new(c.coordinator_addr(), &c.status().await?);
        if done(&s) {
            if tty {
                eprintln!();
            }
            return Ok(());
        }
        let mut line = output::migration_text(&s.migration);
        if tty {
            line = format!("{} {line}", output::progress_bar(&s.migration));
        }
        let down: Vec<String> = s.workers.iter().filter(|w| !w.alive).map(|w| format!("w{}", w.id)).collect();
        if !down.is_empty() {
            line += &format!(
                " (down: {}; partitions of dead workers wait for them or for `tierpool worker remove`)",
                down.join(", ")
            );
        }
        if tty {
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
        } else if last_line.elapsed() >= LINE_EVERY {
            eprintln!("{line}");
            last_line = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
}
