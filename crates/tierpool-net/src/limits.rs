//! What a server lets its peers hold: connections, memory, time.
//!
//! A server reads a frame's body as its bytes arrive, in growing steps, and
//! charges every byte it holds to one budget shared by all its connections,
//! from when the byte is read until the handler has answered. The defaults
//! suit both the coordinator and a worker:
//!
//! | field               | default  | why |
//! |---------------------|----------|-----|
//! | `budget`            | 256 MiB  | three maximum-size chunks (or 48 of the default 4 MiB) in flight beyond the connections' allowances |
//! | `max_connections`   | 1024     | a few dozen clients with full connection pools; each holds a descriptor, a task and buffers |
//! | `max_message`       | 16 MiB   | the largest request message: a file of 3 million chunks committed at once |
//! | `max_payload`       | 64 MiB   | one chunk of the largest size (`MAX_CHUNK_SIZE`) |
//! | `handshake_timeout` | 10 s     | a client answers the server's hello at once (one round trip) |
//! | `idle_timeout`      | 5 min    | clients reuse pooled connections idle for less than a minute |
//! | `stall_timeout`     | 30 s     | half a client's request timeout without a byte moving |
//!
//! Invariant (checked by [`Limits::validate`]): every connection's
//! allowance ([`ALLOWANCE`] bytes, which a small request never waits for)
//! and one frame of the largest size fit the budget together, so
//! `max_connections * ALLOWANCE + max_message + max_payload <= budget`.
//! Then bytes held never exceed the budget, and any frame a server accepts
//! can be read once the frames before it are done.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tierpool_types::{ByteSize, Error, Result, MAX_CHUNK_SIZE};

/// Bytes of each frame that come from its connection's own share of the
/// budget: a request this small (a heartbeat, a metadata change, a lookup)
/// is never queued behind bulk frames of other connections.
pub const ALLOWANCE: u64 = 64 << 10;

/// A server's bounds. Every peer over one of them is dropped alone, with a
/// log line naming its address and the reason; other connections go on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes that frames being read or handled may hold, all connections
    /// together. A reader that needs more waits for others to finish, at
    /// most `stall_timeout`.
    pub budget: ByteSize,
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Largest message (a frame's encoded request) this server reads; a
    /// frame announcing more is refused before its body is read.
    pub max_message: ByteSize,
    /// Largest payload (a frame's raw chunk bytes) this server reads.
    pub max_payload: ByteSize,
    /// Time from accepting a connection to the end of its handshake.
    pub handshake_timeout: Duration,
    /// Time a connection may wait for its next frame, its handshake done or its last answer sent.
    pub idle_timeout: Duration,
    /// Time a frame being read or an answer being written may go without a
    /// byte moving, or a reader may wait for the budget.
    pub stall_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            budget: ByteSize(256 << 20),
            max_connections: 1024,
            max_message: ByteSize(16 << 20),
            max_payload: ByteSize(MAX_CHUNK_SIZE),
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            stall_timeout: Duration::from_secs(30),
        }
    }
}

impl Limits {
    /// A worker's bounds: what it holds beyond its MEM budget stays small.
    /// Its requests are small but for chunk payloads, and fewer connections
    /// reach it than a coordinator, so 128 MiB covers 512 connections'
    /// allowances (32 MiB), a 4 MiB message and a 64 MiB chunk.
    pub fn worker() -> Limits {
        Limits {
            budget: ByteSize(128 << 20),
            max_connections: 512,
            max_message: ByteSize(4 << 20),
            ..Limits::default()
        }
    }

    /// Checks the invariant above and that no bound is zero where zero
    /// would refuse every peer.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(format!("server limits: {m}")));
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1".into());
        }
        if self.max_message.0 == 0 {
            return bad("max_message must be at least 1 byte".into());
        }
        for (name, t) in [
            ("handshake_timeout", self.handshake_timeout),
            ("idle_timeout", self.idle_timeout),
            ("stall_timeout", self.stall_timeout),
        ] {
            if t.is_zero() {
                return bad(format!("{name} must be more than zero"));
            }
        }
        let needed = self.allowances().saturating_add(self.max_frame());
        if self.budget.0 < needed {
            return bad(format!(
                "a budget of {} is less than {} connections' allowances of {} and one frame of {} ({} in all)",
                self.budget,
                self.max_connections,
                ByteSize(ALLOWANCE),
                ByteSize(self.max_frame()),
                ByteSize(needed)
            ));
        }
        Ok(())
    }

    /// Bytes set aside for the connections' allowances.
    pub(crate) fn allowances(&self) -> u64 {
        (self.max_connections as u64).saturating_mul(ALLOWANCE)
    }

    /// Bytes of the budget that frames share beyond their allowances.
    pub(crate) fn shared(&self) -> u64 {
        self.budget.0.saturating_sub(self.allowances())
    }

    /// The most one frame's body may hold.
    pub(crate) fn max_frame(&self) -> u64 {
        self.max_message.0.saturating_add(self.max_payload.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_fit_a_chunk() {
        let l = Limits::default();
        l.validate().unwrap();
        assert_eq!(l.max_payload.0, MAX_CHUNK_SIZE);
        assert_eq!(l.shared(), (256 << 20) - 1024 * ALLOWANCE);
    }

    #[test]
    fn a_budget_without_room_for_one_frame_is_refused() {
        let l = Limits { budget: ByteSize(100 << 20), ..Limits::default() };
        let e = l.validate().unwrap_err();
        assert_eq!(
            e.message,
            "server limits: a budget of 100MiB is less than 1024 connections' allowances of 64KiB \
             and one frame of 80MiB (144MiB in all)"
        );
        let l = Limits { stall_timeout: Duration::ZERO, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().message, "server limits: stall_timeout must be more than zero");
        let l = Limits { max_connections: 0, ..Limits::default() };
        assert!(l.validate().is_err());
    }
}
