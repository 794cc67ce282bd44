//! Idle connections to one address, reused across calls.

use crate::Connection;
use bytes::Bytes;
use parking_lot::Mutex;
use std::time::Duration;
use tierpool_proto::{Request, Response};
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

pub struct Pool {
    addr: String,
    cfg: PoolConfig,
    idle: Mutex<Vec<Connection>>,
}

impl Pool {
    pub fn new(addr: impl Into<String>, cfg: PoolConfig) -> Pool {
        Pool { addr: addr.into(), cfg, idle: Mutex::new(Vec::new()) }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// One request/response. `retry_stale`: if a reused idle connection turns
    /// out dead, try once more on a fresh one (only for idempotent requests).
    /// A `Response::Error` is turned into `Err`.
    pub async fn call(&self, req: &Request, payload: &[u8], retry_stale: bool) -> Result<(Response, Bytes)> {
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

    async fn call_on(&self, mut conn: Connection, req: &Request, payload: &[u8]) -> Result<(Response, Bytes)> {
        let r = tokio::time::timeout(self.cfg.request_timeout, conn.call(req, payload)).await;
        match r {
            Err(_) => Err(Error::new(
                ErrorKind::Unavailable,
                format!("{} did not answer within {:?}", self.addr, self.cfg.request_timeout),
            )),
            Ok(Err(e)) => Err(e),
            Ok(Ok((resp, p))) => {
                let mut idle = self.idle.lock();
                if idle.len() < self.cfg.max_idle {
                    idle.push(conn);
                }
                drop(idle);
                match resp {
                    Response::Error(e) => Err(e),
                    other => Ok((other, p)),
                }
            }
        }
    }
}
