//! A server's figures: connections, bytes held under its budget, and
//! peers dropped for each reason, as plain counters any task may bump and
//! a [`ServerStats`] snapshot a status can show.
//!
//! Counters are independent atomics (no lock): a snapshot is not one
//! instant, but each figure is exact for its own instant, and
//! `bytes_held <= budget` holds for every value `bytes_held` ever takes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tierpool_types::ByteSize;

/// Why a server dropped a peer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DropReason {
    /// The server already had `max_connections` open.
    TooManyConnections,
    /// A frame announced more than `max_message` or `max_payload`.
    FrameTooLarge,
    /// No handshake within `handshake_timeout` of connecting.
    HandshakeTimeout,
    /// No frame within `idle_timeout` of the last answer.
    IdleTimeout,
    /// A frame or an answer made no progress, or waited for the budget,
    /// for `stall_timeout`.
    Stalled,
    /// Not a tierpool frame, or a message that does not decode.
    Malformed,
    /// Failed the handshake: a wrong secret or none, or something other
    /// than a handshake (a request sent without one, another protocol).
    Unauthenticated,
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        DropReason::TooManyConnections,
        DropReason::FrameTooLarge,
        DropReason::HandshakeTimeout,
        DropReason::IdleTimeout,
        DropReason::Stalled,
        DropReason::Malformed,
        DropReason::Unauthenticated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::TooManyConnections => "too many connections",
            DropReason::FrameTooLarge => "frame too large",
            DropReason::HandshakeTimeout => "no handshake in time",
            DropReason::IdleTimeout => "idle too long",
            DropReason::Stalled => "stalled",
            DropReason::Malformed => "malformed frame",
            DropReason::Unauthenticated => "failed the handshake",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Peers dropped so far, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub too_many_connections: u64,
    pub frame_too_large: u64,
    pub handshake_timeout: u64,
    pub idle_timeout: u64,
    pub stalled: u64,
    pub malformed: u64,
    pub unauthenticated: u64,
}

impl Dropped {
    pub fn get(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::TooManyConnections => self.too_many_connections,
            DropReason::FrameTooLarge => self.frame_too_large,
            DropReason::HandshakeTimeout => self.handshake_timeout,
            DropReason::IdleTimeout => self.idle_timeout,
            DropReason::Stalled => self.stalled,
            DropReason::Malformed => self.malformed,
            DropReason::Unauthenticated => self.unauthenticated,
        }
    }

    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.get(*r)).sum()
    }
}

/// A server's figures at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStats {
    pub connections_open: u64,
    pub connections_accepted: u64,
    /// Of those accepted, the ones through the local socket (peers on this
    /// machine, see `local.rs`).
    pub connections_local: u64,
    /// Bytes held now by frames being read or handled.
    pub bytes_held: u64,
    /// The most `bytes_held` has been.
    pub bytes_held_peak: u64,
    /// What `bytes_held` may reach.
    pub budget: ByteSize,
    pub dropped: Dropped,
    /// Payload bytes of large requests (at least [`LARGE_PAYLOAD`]) read,
    /// and the nanoseconds during which at least one was being read (from
    /// its header to its last byte), over TCP: what the links to this server achieve
    /// when they carry data (the rate of the link, or of the peers,
    /// whichever is slower). Concurrent requests share one busy time, so
    /// requests queued behind each other on a link do not count it slower.
    pub transfer_bytes: u64,
    pub transfer_nanos: u64,
}

/// Frames with a payload this large are timed over TCP (see `ServerStats::transfer_bytes`).
pub const LARGE_PAYLOAD: usize = 256 << 10;

/// The live counters of one server.
pub(crate) struct Counters {
    budget: u64,
    open: AtomicU64,
    accepted: AtomicU64,
    local: AtomicU64,
    held: AtomicU64,
    peak: AtomicU64,
    dropped: [AtomicU64; DropReason::ALL.len()],
    transfer_bytes: AtomicU64,
    busy: parking_lot::Mutex<Busy>,
}

/// Time during which at least one large request was being read.
#[derive(Default)]
struct Busy {
    active: u32,
    since: Option<std::time::Instant>,
    nanos: u64,
}

/// One large request being read: [`Transfer::done`] with its bytes once
/// read; dropped before (an error), it counts its time and no bytes.
pub(crate) struct Transfer<'a> {
    counters: &'a Counters,
    bytes: u64,
}

impl Transfer<'_> {
    pub(crate) fn done(mut self, bytes: u64) {
        self.bytes = bytes;
    }
}

impl Drop for Transfer<'_> {
    fn drop(&mut self) {
        self.counters.transfer_bytes.fetch_add(self.bytes, Ordering::Relaxed);
        let mut b = self.counters.busy.lock();
        b.active -= 1;
        if b.active == 0 {
            if let Some(since) = b.since.take() {
                b.nanos += since.elapsed().as_nanos() as u64;
            }
        }
    }
}

impl Counters {
    pub(crate) fn new(budget: ByteSize) -> Arc<Counters> {
        Arc::new(Counters {
            budget: budget.0,
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            local: AtomicU64::new(0),
            held: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            dropped: Default::default(),
            transfer_bytes: AtomicU64::new(0),
            busy: parking_lot::Mutex::new(Busy::default()),
        })
    }

    pub(crate) fn opened(&self, local: bool) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        if local {
            // After `accepted`, read before it: no snapshot has more local
            // connections than accepted ones.
            self.local.fetch_add(1, Ordering::Release);
        }
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn charged(&self, n: u64) {
        let now = self.held.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn released(&self, n: u64) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    /// A large request starts being read.
    pub(crate) fn transfer(&self) -> Transfer<'_> {
        let mut b = self.busy.lock();
        if b.active == 0 {
            b.since = Some(std::time::Instant::now());
        }
        b.active += 1;
        Transfer { counters: self, bytes: 0 }
    }

    pub(crate) fn dropped(&self, reason: DropReason) {
        self.dropped[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ServerStats {
        let d = |r: DropReason| self.dropped[r.index()].load(Ordering::Relaxed);
        let local = self.local.load(Ordering::Acquire);
        ServerStats {
            connections_open: self.open.load(Ordering::Relaxed),
            connections_accepted: self.accepted.load(Ordering::Relaxed),
            connections_local: local,
            bytes_held: self.held.load(Ordering::Relaxed),
            bytes_held_peak: self.peak.load(Ordering::Relaxed),
            budget: ByteSize(self.budget),
            dropped: Dropped {
                too_many_connections: d(DropReason::TooManyConnections),
                frame_too_large: d(DropReason::FrameTooLarge),
                handshake_timeout: d(DropReason::HandshakeTimeout),
                idle_timeout: d(DropReason::IdleTimeout),
                stalled: d(DropReason::Stalled),
                malformed: d(DropReason::Malformed),
                unauthenticated: d(DropReason::Unauthenticated),
            },
            transfer_bytes: self.transfer_bytes.load(Ordering::Relaxed),
            transfer_nanos: {
                let b = self.busy.lock();
                b.nanos + b.since.map_or(0, |s| s.elapsed().as_nanos() as u64)
            },
        }
    }
}

/// Reads a running server's figures; cheap to clone, valid after the server stops.
#[derive(Clone)]
pub struct StatsHandle(pub(crate) Arc<Counters>);

impl StatsHandle {
    pub fn snapshot(&self) -> ServerStats {
        self.0.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_transfers_share_one_busy_time() {
        let c = Counters::new(ByteSize(100));
        let t0 = std::time::Instant::now();
        let a = c.transfer();
        let b = c.transfer();
        std::thread::sleep(std::time::Duration::from_millis(50));
        a.done(1000);
        b.done(3000);
        let wall = t0.elapsed().as_nanos() as u64;
        let s = c.snapshot();
        assert_eq!(s.transfer_bytes, 4000);
        assert!(s.transfer_nanos >= 50_000_000 && s.transfer_nanos <= wall, "{} of {wall}", s.transfer_nanos);
        // One dropped before its end (an error) counts its time, no bytes.
        drop(c.transfer());
        assert_eq!(c.snapshot().transfer_bytes, 4000);
    }

    #[test]
    fn counts_by_reason_and_tracks_the_peak() {
        let c = Counters::new(ByteSize(100));
        c.charged(60);
        c.released(60);
        c.charged(30);
        c.dropped(DropReason::Stalled);
        c.dropped(DropReason::Stalled);
        c.dropped(DropReason::Malformed);
        let s = StatsHandle(c).snapshot();
        assert_eq!((s.bytes_held, s.bytes_held_peak, s.budget), (30, 60, ByteSize(100)));
        assert_eq!(s.dropped, Dropped { stalled: 2, malformed: 1, ..Dropped::default() });
        assert_eq!(s.dropped.total(), 3);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
