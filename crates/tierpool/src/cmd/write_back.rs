//! The upkeep of under-stores, run by the coordinator process as a client
//! of the pool (so workers need no store credentials), every
//! `--write-back-every`: the write-back of files in `back` mode, their
//! attachment's or their own (each attachment with such files not yet below
//! has them written to its under-store, `Client::write_back`), and room
//! made in a pool nearly full by letting go of clean files (`make_room`).
//! Each round reads the workers' figures (`usage`) and what each
//! attachment's files owe (`owed`), not the whole status: the status walks
//! the namespace under the coordinator's lock for some figures, and `owed`
//! walks only the files that owe (an attachment may hold millions of clean
//! files).
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
    let mut let_go: Option<LetGo> = None;
    loop {
        tokio::time::sleep(every).await;
        // Not the whole status: some of its figures walk the namespace.
        let (status, owed) = match (client.usage(false, false).await, client.owed().await) {
            (Ok(s), Ok(o)) => (s, o),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!("write-back: cannot read the pool's usage: {e}");
                continue;
            }
        };
        for a in owed.iter().filter(|a| a.write_back_files > 0) {
            if failing.get(&a.path).is_some_and(|(at, _)| Instant::now() < *at) {
                continue;
            }
            let started = Instant::now();
            match client.write_back(&a.path).await {
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
                        a.write_back_files,
                        ByteSize(a.write_back_bytes),
                        a.path,
                        a.uri,
                        pause
                    );
                    failing.insert(a.path.clone(), (Instant::now() + pause, pause));
                }
            }
        }
        failing.retain(|path, _| owed.iter().any(|a| &a.path == path));
        if !owed.is_empty() {
            let_go = make_room(&client, &status, let_go).await;
        }
    }
}

/// When the workers' tiers are `FULL` percent used or more (live data,
/// all workers together), lets go of clean files of the attachments
/// (`Client::free_for_room`) until about `ROOMY` percent is used: an
/// attached store larger than the pool keeps being read (a chunk that
/// cannot be kept is served from below meanwhile). Returns what it let go
/// of, or what it still waits to see gone (`room_to_make`).
async fn make_room(client: &Client, status: &tierpool_client::PoolUsage, before: Option<LetGo>) -> Option<LetGo> {
    let (mut used, mut capacity) = (0u64, 0u64);
    for t in status.workers.iter().filter(|w| w.alive).filter_map(|w| w.stats.as_ref()).map(|s| &s.tiers) {
        used += (t.mem_used + t.disk_used).saturating_sub(t.reclaimable_bytes);
        capacity += t.mem_capacity + t.disk_capacity;
    }
    let now = Instant::now();
    let want = match room_to_make(used, capacity, before, now) {
        Room::Enough => return None,
        Room::Awaiting(l) => return Some(l),
        Room::Make(want) => want,
    };
    match client.free_for_room(want).await {
        Ok(r) if r.files > 0 => {
            tracing::info!(
                "the pool's tiers are {}% full: let go of {} clean files ({}) of under-stores",
                used * 100 / capacity,
                r.files,
                ByteSize(r.bytes)
            );
            Some(LetGo { expect: used.saturating_sub(r.bytes), until: Instant::now() + SETTLE })
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("the pool's tiers are full; letting go of clean files failed: {e}");
            None
        }
    }
}

/// Files a round let go of: their chunks leave the workers' figures only
/// once the workers have deleted them and reported since (a heartbeat a
/// second), so until the used bytes fall to `expect`, or `until` passes,
/// later rounds let go of nothing more (else each round of the next second
/// would let go of as much again).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct LetGo {
    expect: u64,
    until: Instant,
}

/// Longest wait for the workers' figures to show what a round let go of.
const SETTLE: Duration = Duration::from_secs(5);

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Room {
    Enough,
    /// Full by the figures, but what was let go of has not shown yet.
    Awaiting(LetGo),
    /// Let go of this many bytes.
    Make(u64),
}

/// What a round does with `used` live bytes of `capacity`, after `before`.
fn room_to_make(used: u64, capacity: u64, before: Option<LetGo>, now: Instant) -> Room {
    if capacity == 0 || used * 100 < capacity * FULL {
        return Room::Enough;
    }
    match before {
        Some(l) if now < l.until && used > l.expect => Room::Awaiting(l),
        _ => Room::Make(used - capacity * ROOMY / 100),
    }
}

/// Used share of the tiers (percent) at which clean files are let go ...
const FULL: u64 = 90;
/// ... and the share they are let go down to.
const ROOMY: u64 = 80;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_made_once_until_the_figures_show_it_or_a_while_passes() {
        let t0 = Instant::now();
        assert_eq!(room_to_make(89, 100, None, t0), Room::Enough);
        assert_eq!(room_to_make(5, 0, None, t0), Room::Enough);
        assert_eq!(room_to_make(95, 100, None, t0), Room::Make(15));
        // 15 let go of: the next rounds wait for the figures to fall to 80.
        let l = LetGo { expect: 80, until: t0 + SETTLE };
        assert_eq!(room_to_make(95, 100, Some(l), t0 + Duration::from_millis(100)), Room::Awaiting(l));
        assert_eq!(room_to_make(81, 100, Some(l), t0 + Duration::from_millis(100)), Room::Enough);
        // Shown, and full again (new data came): room is made again.
        assert_eq!(room_to_make(92, 100, Some(LetGo { expect: 93, ..l }), t0), Room::Make(12));
        // Never shown (the chunks are still read, say): made again after a while.
        assert_eq!(room_to_make(95, 100, Some(l), t0 + SETTLE), Room::Make(15));
    }
}
