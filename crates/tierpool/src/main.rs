//! `tierpool`: one binary for the CLI, the embedded pool, the coordinator
//! and worker processes, and the benchmark.

mod cli;
mod cmd;
mod output;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let code = match cmd::run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tierpool: {}", one_line(&e));
            1
        }
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
