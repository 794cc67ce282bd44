//! `tierpool`: one binary for the CLI, the embedded pool, the coordinator
//! and worker processes, and the benchmark.

mod cli;
mod cmd;
mod output;

use clap::error::ErrorKind;
use clap::Parser;

fn main() {
    keep_freed_memory();
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        Err(e) => {
            // One line, like every other error; `--help` has the rest.
            let text = e.render().to_string();
            let head: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            let line = if head.is_empty() { "invalid arguments".to_string() } else { head.join(" ") };
            eprintln!("tierpool: {}", line.trim_start_matches("error: "));
            std::process::exit(2);
        }
    };
    let code = match cmd::run(cli) {
        Ok(()) => 0,
        Err(e) => match e.downcast_ref::<cmd::ExitStatus>() {
            // The command printed its findings; the status is its verdict.
            Some(status) => status.0,
            None => {
                eprintln!("tierpool: {}", one_line(&e));
                1
            }
        },
    };
    std::process::exit(code);
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

/// Chunk buffers (4 MiB) come and go all the time in a process that moves
/// data (a mount, a transfer, the coordinator's page writer). By default
/// the C allocator maps each one afresh and unmaps it when freed, so every
/// chunk pays page faults and zeroing again (and, on a virtual machine that
/// hands freed memory back to its host, the host's first touch too).
/// Serving them from the heap (up to 32 MiB, the most glibc allows) and
/// keeping up to 1 GiB of freed memory reuses the same pages. A worker,
/// whose memory is its tiers' budget, sets its own (`return_freed_memory`).
fn keep_freed_memory() {
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
