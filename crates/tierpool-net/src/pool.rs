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

use crate::auth::Credentials;
use crate::buffers::ChunkBuffers;
use crate::Connection;
use bytes::Bytes;
use parking_lot::Mutex;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_proto::Service;
use tierpool_types::{Error, ErrorKind, Result};

/// Idle connections older than this are not reused: well below a server's
/// default `idle_timeout`, so the server does not close one as it is reused.
pub const REUSE_WITHIN: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Bounds the TCP connect, and then the handshake.
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_idle: usize,
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
            credentials: Credentials::none(),
            local: crate::local::enabled(),
            buffers: None,
        }
    }
}

/// Connections to one server of service `S`.
pub struct Pool<S: Service> {
    addr: String,
    cfg: PoolConfig,
    /// Idle connections, each with the moment it went idle, oldest first.
    idle: Mutex<Vec<(Connection, Instant)>>,
    _service: PhantomData<S>,
}

impl<S: Service> Pool<S> {
    pub fn new(addr: impl Into<String>, cfg: PoolConfig) -> Pool<S> {
        Pool { addr: addr.into(), cfg, idle: Mutex::new(Vec::new()), _service: PhantomData }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// One request/response. `retry_stale`: if a reused idle connection turns
    /// out dead, try once more on a fresh one (only for idempotent requests).
    /// An error answer is returned as `Err`.
    pub async fn call(&self, req: &S::Request, payload: &[u8], retry_stale: bool) -> Result<(S::Response, Bytes)> {
        let reused = self.take_idle(!retry_stale);
        let was_reused = reused.is_some();
        let conn = match reused {
            Some(c) => c,
            None => self.connect().await?,
        };
        match self.call_on(conn, req, payload).await {
            Err(e) if was_reused && retry_stale && e.kind == ErrorKind::Unavailable => {
                let conn = self.connect().await?;
                self.call_on(conn, req, payload).await
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
        let mut idle = self.idle.lock();
        idle.retain(|(_, since)| since.elapsed() < REUSE_WITHIN);
        while let Some((c, _)) = idle.pop() {
            if !probe || c.is_reusable() {
                return Some(c);
            }
        }
        None
    }

    async fn call_on(&self, mut conn: Connection, req: &S::Request, payload: &[u8]) -> Result<(S::Response, Bytes)> {
        let call = conn.call_with::<S>(req, payload, self.cfg.buffers.as_ref());
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
            let mut idle = self.idle.lock();
            if idle.len() < self.cfg.max_idle {
                idle.push((conn, Instant::now()));
            }
        }
        r
    }
}
