//! The accept loop. Each connection is served by its own task; a malformed
//! frame or message is logged, answered with a `Protocol` error where the
//! frame could be read whole, and ends that connection only.

use crate::Connection;
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use tierpool_proto::{Request, Response};
use tierpool_types::{Error, ErrorKind};
use tokio::net::TcpListener;

/// Answers requests. Implemented by the coordinator and the worker.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request, payload: Bytes) -> impl Future<Output = (Response, Bytes)> + Send;
}

/// Serves until the listener fails.
pub async fn serve<H: Handler>(listener: TcpListener, handler: Arc<H>) -> std::io::Result<()> {
    loop {
        let (stream, _) = match listener.accept().await {
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

async fn serve_conn<H: Handler>(mut conn: Connection, handler: Arc<H>) {
    loop {
        let (req, payload) = match conn.next_request().await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if e.kind == ErrorKind::Protocol => {
                tracing::warn!("dropping connection from {}: {}", conn.peer(), e);
                return;
            }
            Err(_) => return,
        };
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("dropping connection from {}: {}", conn.peer(), e);
                let _ = conn.send_response(&Response::Error(Error::new(ErrorKind::Protocol, e.message)), &[]).await;
                return;
            }
        };
        let (resp, out) = handler.handle(req, payload).await;
        if conn.send_response(&resp, &out).await.is_err() {
            return;
        }
    }
}
