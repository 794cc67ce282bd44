//! `tierpool`: one binary for the CLI, the embedded pool, the coordinator
//! and worker processes, and the benchmark.

mod cli;
mod cmd;
mod output;

use clap::error::ErrorKind;
use clap::Parser;

fn main() {
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
