//! Idle connections to one server, reused across calls.

use crate::Connection;
use bytes::Bytes;
use parking_lot::Mutex;
use std::marker::PhantomData;
use std::time::Duration;
use tierpool_proto::Service;
use tierpool_types::{Error, ErrorKind, Result};

#[derive(Clone, Debug)]
pub struct PoolConfig {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_idle: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig { connect_timeout: Duration::from_secs(3), request_timeout: Duration::from_secs(60), max_idle: 32 }
    }
}

/// Connections to one server of service `S`.
pub struct Pool<S: Service> {
    addr: String,
    cfg: PoolConfig,
    idle: Mutex<Vec<Connection>>,
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
        let reused = self.idle.lock().pop();
        let was_reused = reused.is_some();
        let conn = match reused {
            Some(c) => c,
            None => Connection::connect(&self.addr, self.cfg.connect_timeout).await?,
        };
        match self.call_on(conn, req, payload).await {
            Err(e) if was_reused && retry_stale && e.kind == ErrorKind::Unavailable => {
                let conn = Connection::connect(&self.addr, self.cfg.connect_timeout).await?;
                self.call_on(conn, req, payload).await
            }
            r => r,
        }
    }

    async fn call_on(&self, mut conn: Connection, req: &S::Request, payload: &[u8]) -> Result<(S::Response, Bytes)> {
        let r = tokio::time::timeout(self.cfg.request_timeout, conn.call::<S>(req, payload)).await;
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
                idle.push(conn);
            }
        }
        r
    }
}
