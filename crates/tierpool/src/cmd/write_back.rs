//! The write-back of attachments in `back` mode, run by the coordinator
//! process: every `--write-back-every`, each such attachment with files not
//! yet below has them written to its under-store (`Client::sync`), as a
//! client of the pool, so workers need no store credentials.
//!
//! What is owed is the metadata's own record (each file's origin is dirty
//! until `Persisted` names exactly the chunks written below), so the queue
//! outlives every crash: after a restart, the first round writes whatever
//! was acknowledged and not yet below. Each file is written whole with its
//! latest bytes; a file changed while being written is written again, so
//! an older version never lands after a newer one. A failing store is
//! retried with a growing pause (up to `MAX_PAUSE`), logged each time;
//! `status` keeps showing what is owed.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tierpool_client::{Client, ClientConfig};
use tierpool_coordinator::CoordinatorConfig;
use tierpool_types::ByteSize;

/// Longest pause between tries of an attachment whose store keeps failing.
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Runs until the process ends; the coordinator's address is read from
/// `DIR/coordinator.addr` once it serves, with its secret.
pub async fn run(cfg: CoordinatorConfig, every: Duration) {
    let client = connect(&cfg).await;
    // Per attachment path: when to try again, and the pause after the next failure.
    let mut failing: HashMap<String, (Instant, Duration)> = HashMap::new();
    loop {
        tokio::time::sleep(every).await;
        let status = match client.status().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("write-back: cannot read the pool's status: {e}");
                continue;
            }
        };
        for a in status.attachments.iter().filter(|a| a.mode == "back" && a.dirty_files > 0) {
            if failing.get(&a.path).is_some_and(|(at, _)| Instant::now() < *at) {
                continue;
            }
            let started = Instant::now();
            match client.sync(&a.path, &|_| {}).await {
                Ok(done) => {
                    failing.remove(&a.path);
                    if done.files > 0 {
                        tracing::info!(
                            "write-back: {} files ({}) of {} written to {} in {:.1?}",
                            done.files,
                            ByteSize(done.bytes),
                            a.path,
                            a.uri,
                            started.elapsed()
                        );
                    }
                }
                Err(e) => {
                    let pause = failing.get(&a.path).map_or(every, |(_, p)| (*p * 2).min(MAX_PAUSE));
                    tracing::warn!(
                        "write-back: {} files ({}) of {} not written to {} (trying again in {:?}): {e}",
                        a.dirty_files,
                        ByteSize(a.dirty_bytes),
                        a.path,
                        a.uri,
                        pause
                    );
                    failing.insert(a.path.clone(), (Instant::now() + pause, pause));
                }
            }
        }
        failing.retain(|path, _| status.attachments.iter().any(|a| &a.path == path));
    }
}

/// A client of the coordinator of `cfg`, once it answers.
async fn connect(cfg: &CoordinatorConfig) -> Client {
    let addr_file = cfg.dir.join("coordinator.addr");
    loop {
        if let (Ok(addr), Ok(secret)) = (std::fs::read_to_string(&addr_file), cfg.secret()) {
            let mut client = ClientConfig::new(addr.trim());
            client.secret = Some(secret);
            if let Ok(c) = Client::connect(client).await {
                return c;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
