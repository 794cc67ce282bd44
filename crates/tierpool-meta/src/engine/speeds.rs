//! How fast each worker's links carry data, and when that should change its
//! share of partitions (MemEFS: weights by capacity and measured bandwidth).
//! Pure: the shell reports each worker's transfer counters as heartbeats
//! bring them (`report`) and asks what to log (`changes`), passing `now`.
//!
//! - A worker's bandwidth is measured over the last `window`: the bytes of
//!   large payloads it read and wrote over the time they took, between
//!   each of its reports, the median of those. A window with less than
//!   `MIN_BYTES` says nothing (an idle worker is not slow).
//! - Its speed is that bandwidth as a percent of the fastest worker's, in
//!   the same window; a worker within `threshold` of the fastest is at
//!   100%. Nothing is judged with fewer than two workers measured.
//! - A speed is logged (`SetSpeed`) only once it has differed from the
//!   logged one by more than `threshold` points (or crossed 100%) for a
//!   whole `window`: a blip moves nothing, a degraded link moves partitions
//!   away once, a recovered one brings them back.
//!
//! Invariants (tested): no change is proposed before a deviation has lasted
//! `window`; a worker's proposal follows its measurements only; counters
//! that go backwards (a restarted worker) start its samples afresh.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tierpool_types::WorkerId;

/// Least traffic in a window to measure a worker by.
pub const MIN_BYTES: u64 = 4 << 20;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Sample {
    at: Duration,
    bytes: u64,
    nanos: u64,
}

#[derive(Clone, Debug)]
pub struct SpeedWatch {
    /// Percent points; 0 turns the watch off.
    threshold: u8,
    window: Duration,
    samples: BTreeMap<WorkerId, VecDeque<Sample>>,
    /// Worker -> (speed it should have, since when it has differed).
    pending: BTreeMap<WorkerId, (u8, Duration)>,
}

impl SpeedWatch {
    pub fn new(threshold: u8, window: Duration) -> SpeedWatch {
        SpeedWatch {
            threshold: threshold.min(99),
            window: window.max(Duration::from_secs(1)),
            samples: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// Worker `id`'s cumulative counters (large-payload bytes, nanoseconds)
    /// at `now`.
    pub fn report(&mut self, id: WorkerId, now: Duration, bytes: u64, nanos: u64) {
        let q = self.samples.entry(id).or_default();
        if q.back().is_some_and(|s| s.bytes > bytes || s.nanos > nanos || s.at > now) {
            q.clear();
        }
        q.push_back(Sample { at: now, bytes, nanos });
        // Keep one sample at or before the window's start.
        while q.len() > 2 && q[1].at + self.window <= now {
            q.pop_front();
        }
    }

    /// Forgets a worker (removed from the pool).
    pub fn forget(&mut self, id: WorkerId) {
        self.samples.remove(&id);
        self.pending.remove(&id);
    }

    /// Bytes a second worker `id` achieved over the last window, if it
    /// moved at least [`MIN_BYTES`] in it: the median of the rates between
    /// its reports (a burst of slowness shorter than half the window does
    /// not move it; one longer does).
    pub fn measured(&self, id: WorkerId, now: Duration) -> Option<u64> {
        let q = self.samples.get(&id)?;
        if q.back()?.at + self.window < now {
            return None;
        }
        let (mut rates, mut total) = (Vec::new(), 0u64);
        for (a, b) in q.iter().zip(q.iter().skip(1)) {
            let (bytes, nanos) = (b.bytes - a.bytes, b.nanos - a.nanos);
            if bytes > 0 && nanos > 0 {
                total += bytes;
                rates.push((u128::from(bytes) * 1_000_000_000 / u128::from(nanos)) as u64);
            }
        }
        if total < MIN_BYTES {
            return None;
        }
        rates.sort_unstable();
        Some(rates[rates.len() / 2])
    }

    /// The speed each measured worker should have now (percent of the
    /// fastest; 100 within the threshold of it), if two or more are measured.
    pub fn speeds(&self, now: Duration) -> BTreeMap<WorkerId, u8> {
        let bw: BTreeMap<WorkerId, u64> =
            self.samples.keys().filter_map(|w| self.measured(*w, now).map(|b| (*w, b))).collect();
        let best = bw.values().copied().max().unwrap_or(0);
        if bw.len() < 2 || best == 0 {
            return BTreeMap::new();
        }
        let floor = u128::from(best) * u128::from(100 - self.threshold) / 100;
        (bw.into_iter())
            .map(|(w, b)| {
                let p =
                    if u128::from(b) >= floor { 100 } else { (u128::from(b) * 100 / u128::from(best)).max(1) as u8 };
                (w, p)
            })
            .collect()
    }

    /// The speeds to log now, given the logged ones (`current`; a worker
    /// not there is at 100): those that have differed enough for a whole
    /// window. The caller logs `SetSpeed` for each.
    pub fn changes(&mut self, now: Duration, current: &BTreeMap<WorkerId, u8>) -> Vec<(WorkerId, u8)> {
        if self.threshold == 0 {
            return Vec::new();
        }
        let want = self.speeds(now);
        let mut out = Vec::new();
        for (w, p) in &want {
            let logged = current.get(w).copied().unwrap_or(100);
            let differs = (*p == 100) != (logged == 100) || p.abs_diff(logged) > self.threshold;
            if !differs {
                self.pending.remove(w);
                continue;
            }
            let since = match self.pending.get(w) {
                // Still off, by about as much: the deviation goes on.
                Some((q, since)) if q.abs_diff(*p) <= self.threshold && (*q == 100) == (*p == 100) => *since,
                _ => now,
            };
            self.pending.insert(*w, (*p, since));
            if since + self.window <= now {
                self.pending.remove(w);
                out.push((*w, *p));
            }
        }
        // A worker no longer measured (idle) keeps its speed.
        self.pending.retain(|w, _| want.contains_key(w));
        out
    }
}
