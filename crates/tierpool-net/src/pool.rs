//! Idle connections to one server, reused across calls.
//!
//! Every new connection does the handshake with the pool's credentials
//! ([`PoolConfig::credentials`]) once; a reused one carries calls at no
//! further cost.
//!
//! A server drops connections idle longer than its `idle_timeout` (5
//! minutes by default), so an idle connection is reused only if it has
//! been idle less than [`REUSE_WITHIN`] and the server has not closed it;
//! otherwise the call opens a fresh one. That keeps a request that must
//! not be retried from being sent into a connection the server just closed.
//!
//! At most [`PoolConfig::max_open`] calls are in flight at once; further
//! calls wait their turn (within their `request_timeout`). A call opens a
//! connection only when none is idle, so with `max_idle <= max_open` the
//! pool never holds more than `max_open` connections to its server: many
//! tasks calling at once share them rather than opening (and, past
//! `max_idle`, closing again) one each, which would cost every call a
//! handshake and could fill the server's `max_connections`.
//!
//! A pool may be called from several runtimes (a thread running its own
//! for calls that should wake it directly, beside the client's). A
//! connection's socket belongs to the runtime it was opened on, which
//! alone wakes the calls waiting on it, so an idle connection is handed
//! only to a call on that same runtime, and each runtime keeps at most
//! `max_idle` of them. Those of a runtime that ended are closed at the
//! pool's next call if its owner said so ([`runtime_ended`]: a thread's own
//! runtime ends with the thread), else once too old to reuse.

use crate::auth::Credentials;
use crate::buffers::ChunkBuffers;
use crate::conn::CONNECT_FAILED;
use crate::Connection;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_proto::Service;
use tierpool_types::{Error, ErrorKind, Result};
use tokio::runtime::{Handle, Id as RuntimeId};
use tokio::sync::Semaphore;

/// Calls in flight at once by default: as many connections as a server
/// takes by default (`Limits::max_connections`), so no cap in practice.
pub const DEFAULT_MAX_OPEN: usize = 1024;

/// Ends the error of a call that found every connection of its pool busy
/// for its whole timeout (see [`stayed_busy`]).
const STAYED_BUSY: &str = "connections stayed busy";

/// Idle connections older than this are not reused: well below a server's
/// default `idle_timeout`, so the server does not close one as it is reused.
pub const REUSE_WITHIN: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Bounds the TCP connect, and then the handshake.
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Idle connections kept (at most `max_open` are useful).
    pub max_idle: usize,
    /// Calls in flight at once, so connections open at once (at least 1;
    /// [`DEFAULT_MAX_OPEN`] by default).
    pub max_open: usize,
    /// What new connections prove themselves with.
    pub credentials: Credentials,
    /// Whether new connections try the server's local socket first
    /// (`local.rs`); by default as `$TIERPOOL_LOCAL_SOCKETS` says.
    pub local: bool,
    /// Where answers of exactly a chunk (a chunk read) are read into, kept
    /// for reuse; `None`: a fresh buffer each.
    pub buffers: Option<Arc<ChunkBuffers>>,
}

impl PoolConfig {
    /// The default timeouts with `credentials`.
    pub fn with(credentials: impl Into<Credentials>) -> PoolConfig {
        PoolConfig { credentials: credentials.into(), ..PoolConfig::default() }
    }
}

impl Default for PoolConfig {
    /// No credentials: every server refuses these connections.
    fn default() -> Self {
        PoolConfig {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(60),
            max_idle: 32,
            max_open: DEFAULT_MAX_OPEN,
            credentials: Credentials::none(),
            local: crate::local::enabled(),
            buffers: None,
        }
    }
}

/// Whether `e` is a call's that never left because every connection of
/// its pool stayed busy (this client's own load, not the server's state).
/// Such a call never reached the server: [`Connection::never_sent`] holds
/// for it too.
pub fn stayed_busy(e: &Error) -> bool {
    Connection::never_sent(e) && e.message.contains(STAYED_BUSY)
}

/// The runtime a call runs on, whose sockets it can wait on.
fn runtime() -> Option<RuntimeId> {
    Handle::try_current().ok().map(|h| h.id())
}

/// Idle connections: each with when it went idle and its runtime.
type Idle = Vec<(Connection, Instant, Option<RuntimeId>)>;

/// Runtimes said to have ended, the latest [`ENDED_KEPT`].
static ENDED: Mutex<VecDeque<RuntimeId>> = parking_lot::const_mutex(VecDeque::new());
/// How many runtimes were said to have ended, ever.
static ENDED_COUNT: AtomicU64 = AtomicU64::new(0);
/// Ended runtimes remembered: a pool that makes no call meanwhile closes
/// the connections of older ones by age.
const ENDED_KEPT: usize = 1024;

/// Tells every pool of the process that runtime `id` ended: their idle
/// connections opened on it are closed at their next call, rather than
/// once too old to reuse. For the owner of a runtime that ends while the
/// process goes on (a thread's own). Never waits long: a lock a thread of
/// the parent held at a `fork` stays held in the child, whose connections
/// then go by age.
pub fn runtime_ended(id: RuntimeId) {
    let Some(mut ended) = ENDED.try_lock_for(Duration::from_millis(10)) else { return };
    ended.push_back(id);
    if ended.len() > ENDED_KEPT {
        ended.pop_front();
    }
    ENDED_COUNT.fetch_add(1, Ordering::Release);
}

/// Connections to one server of service `S`.
pub struct Pool<S: Service> {
    addr: String,
    cfg: PoolConfig,
    /// Idle connections, each with the moment it went idle and the
    /// runtime it was opened on, oldest first.
    idle: Mutex<Idle>,
    /// One permit per call that may be in flight (`max_open`).
    turns: Semaphore,
    /// `ENDED_COUNT` when this pool last closed the idle connections of
    /// runtimes that ended (read and written under `idle`'s lock).
    ended_seen: AtomicU64,
    _service: PhantomData<S>,
}

impl<S: Service> Pool<S> {
    pub fn new(addr: impl Into<String>, cfg: PoolConfig) -> Pool<S> {
        let turns = Semaphore::new(cfg.max_open.clamp(1, Semaphore::MAX_PERMITS));
        let ended_seen = AtomicU64::new(ENDED_COUNT.load(Ordering::Acquire));
        Pool { addr: addr.into(), cfg, idle: Mutex::new(Vec::new()), turns, ended_seen, _service: PhantomData }
    }

    /// Closes the idle connections too old to reuse (one clock read for
    /// all), and those of runtimes said to have ended since it last looked.
    fn drop_stale(&self, idle: &mut Idle) {
        let ended = ENDED_COUNT.load(Ordering::Acquire);
        if self.ended_seen.load(Ordering::Relaxed) != ended {
            // Not waited for (see `runtime_ended`): looked at again next time.
            if let Some(gone) = ENDED.try_lock() {
                idle.retain(|(_, _, on)| !on.is_some_and(|id| gone.contains(&id)));
                self.ended_seen.store(ended, Ordering::Relaxed);
            }
        }
        let now = Instant::now();
        idle.retain(|(_, since, _)| now.saturating_duration_since(*since) < REUSE_WITHIN);
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// One request/response. `retry_stale`: if a reused idle connection turns
    /// out dead, try once more on a fresh one (only for idempotent requests).
    /// An error answer is returned as `Err`.
    pub async fn call(&self, req: &S::Request, payload: &[u8], retry_stale: bool) -> Result<(S::Response, Bytes)> {
        let (resp, body) = self.call_into(req, payload, retry_stale, None).await?;
        Ok((resp, body.unwrap_or_default()))
    }

    /// As [`call`](Self::call); with `dst`, an answer's payload of exactly
    /// `dst.len()` bytes is read straight into it (`None` then; see
    /// [`Connection::call_into`]).
    pub async fn call_into(
        &self,
        req: &S::Request,
        payload: &[u8],
        retry_stale: bool,
        mut dst: Option<&mut [u8]>,
    ) -> Result<(S::Response, Option<Bytes>)> {
        let _turn = match tokio::time::timeout(self.cfg.request_timeout, self.turns.acquire()).await {
            Ok(turn) => turn.expect("the pool's semaphore is never closed"),
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "{CONNECT_FAILED} {}: all {} {STAYED_BUSY} for {:?}",
                        self.addr, self.cfg.max_open, self.cfg.request_timeout
                    ),
                ))
            }
        };
        let reused = self.take_idle(!retry_stale);
        let was_reused = reused.is_some();
        let conn = match reused {
            Some(c) => c,
            None => self.connect().await?,
        };
        match self.call_on(conn, req, payload, dst.as_deref_mut()).await {
            Err(e) if was_reused && retry_stale && e.kind == ErrorKind::Unavailable => {
                let conn = self.connect().await?;
                self.call_on(conn, req, payload, dst).await
            }
            r => r,
        }
    }

    async fn connect(&self) -> Result<Connection> {
        Connection::connect_via(&self.addr, self.cfg.connect_timeout, &self.cfg.credentials, self.cfg.local).await
    }

    /// The most recently used idle connection still fit for a call; staler
    /// ones are closed. With `probe`, a connection is first checked not to
    /// have been closed by the server (a system call); a call that may be
    /// retried skips it, since a stale connection costs it one retry.
    fn take_idle(&self, probe: bool) -> Option<Connection> {
        let rt = runtime();
        let mut idle = self.idle.lock();
        self.drop_stale(&mut idle);
        while let Some(i) = idle.iter().rposition(|(_, _, on)| *on == rt) {
            let (c, _, _) = idle.remove(i);
            if !probe || c.is_reusable() {
                return Some(c);
            }
        }
        None
    }

    async fn call_on(
        &self,
        mut conn: Connection,
        req: &S::Request,
        payload: &[u8],
        dst: Option<&mut [u8]>,
    ) -> Result<(S::Response, Option<Bytes>)> {
        let call = async {
            match dst {
                Some(dst) => conn.call_into::<S>(req, payload, dst).await,
                None => conn.call_with::<S>(req, payload, self.cfg.buffers.as_ref()).await.map(|(r, b)| (r, Some(b))),
            }
        };
        let r = tokio::time::timeout(self.cfg.request_timeout, call).await;
        let r = match r {
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("{} did not answer within {:?}", self.addr, self.cfg.request_timeout),
                ))
            }
            Ok(r) => r,
        };
        // A connection that carried a whole exchange (an error answer
        // included) is fit for reuse; one that failed mid-way is dropped.
        if r.is_ok() || r.as_ref().is_err_and(|e| e.kind != ErrorKind::Unavailable && e.kind != ErrorKind::Protocol) {
            let rt = runtime();
            let mut idle = self.idle.lock();
            // Those of a runtime that ended are never taken: they go here.
            self.drop_stale(&mut idle);
            if idle.iter().filter(|(_, _, on)| *on == rt).count() < self.cfg.max_idle {
                idle.push((conn, Instant::now(), rt));
            }
        }
        r
    }
}
