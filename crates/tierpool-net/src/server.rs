//! The accept loop. Each connection is served by its own task; a malformed
//! frame or message is logged, answered with a `Protocol` error where the
//! frame could be read whole, and ends that connection only. A request for
//! the other role (a chunk request sent to the coordinator, say) is
//! answered with an error naming the right one; the connection stays.

use crate::Connection;
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use tierpool_proto::frame::{KIND_COORD_REQUEST, KIND_WORKER_REQUEST};
use tierpool_proto::Service;
use tierpool_types::{Error, ErrorKind, Result};
use tokio::net::TcpListener;

/// Answers the requests of one service. Implemented by the coordinator and the worker.
pub trait Handler: Send + Sync + 'static {
    type Service: Service;
    fn handle(
        &self,
        req: <Self::Service as Service>::Request,
        payload: Bytes,
    ) -> impl Future<Output = (Result<<Self::Service as Service>::Response>, Bytes)> + Send;
}

/// A bound listening socket.
pub struct Listener(TcpListener);

impl Listener {
    /// The address it listens on (with the port chosen, if 0 was asked).
    pub fn local_addr(&self) -> Result<String> {
        Ok(self.0.local_addr()?.to_string())
    }
}

/// Binds `addr` (port 0 picks a free port).
pub async fn bind(addr: &str) -> Result<Listener> {
    TcpListener::bind(addr).await.map(Listener).map_err(|e| Error::from(e).context(format!("cannot listen on {addr}")))
}

/// Serves until the listener fails.
pub async fn serve<H: Handler>(listener: Listener, handler: Arc<H>) -> std::io::Result<()> {
    loop {
        let (stream, _) = match listener.0.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: log, back off, go on.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let h = handler.clone();
        tokio::spawn(async move { serve_conn(Connection::new(stream), h).await });
    }
}

fn other_role(kind: u8) -> &'static str {
    match kind {
        KIND_COORD_REQUEST => "the coordinator",
        KIND_WORKER_REQUEST => "a worker",
        _ => "no server",
    }
}

async fn serve_conn<H: Handler>(mut conn: Connection, handler: Arc<H>) {
    let role = <H::Service as Service>::ROLE;
    loop {
        let frame = match conn.read_frame().await {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(e) if e.kind == ErrorKind::Protocol => {
                tracing::warn!("dropping connection from {}: {}", conn.peer(), e);
                return;
            }
            Err(_) => return,
        };
        if frame.kind != <H::Service as Service>::KIND {
            let e = Error::invalid(format!("this is a {role}; that request is for {}", other_role(frame.kind)));
            let answer: Result<()> = Err(e);
            if conn.send_response(&answer, &[]).await.is_err() {
                return;
            }
            continue;
        }
        let req = match tierpool_proto::decode::<<H::Service as Service>::Request>(&frame.header) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("dropping connection from {}: {}", conn.peer(), e);
                let answer: Result<()> = Err(Error::new(ErrorKind::Protocol, e.message));
                let _ = conn.send_response(&answer, &[]).await;
                return;
            }
        };
        let (resp, out) = handler.handle(req, frame.payload).await;
        if conn.send_response(&resp, &out).await.is_err() {
            return;
        }
    }
}
