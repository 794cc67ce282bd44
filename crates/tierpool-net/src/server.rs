//! Binding, and the accept loop that feeds requests to a [`Handler`] under
//! a server's [`Limits`] (see `limits.rs` for each bound and its default).
//!
//! A server listens on its TCP address and on the local socket named after
//! it (`local.rs`), and serves both alike, within one connection limit.
//! Each connection is served by its own task (`session.rs`), which first
//! has the peer prove it knows the pool's secret (`auth`). A connection
//! beyond `max_connections` is closed as soon as it is accepted, before
//! anything is read from it, and logged. The memory a server holds for
//! its peers' requests is then at most the budget, plus per open
//! connection a 16 KiB read buffer, a frame header and a task.
//!
//! Answers are not charged: their bytes are the handler's (a chunk read
//! from MEM is shared, not copied: a [`Payload`] is a list of such buffers,
//! written after the message in vectored writes), and each write must make progress
//! within `stall_timeout`. A chunk a worker reads from DISK to answer is a
//! fresh buffer, so peers that ask for large chunks and never read the
//! answers hold up to one chunk per connection until that timeout.
//!
//! No locks: connection slots are a semaphore, figures are atomics.

use crate::auth::Secret;
use crate::budget::Budget;
use crate::buffers::ChunkBuffers;
use crate::local;
use crate::session::{serve_conn, Shared};
use crate::stats::{Counters, DropReason, StatsHandle};
use crate::stream::Stream;
use crate::{Connection, Limits};
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use tierpool_proto::{Payload, Service};
use tierpool_types::{Error, Result};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Answers the requests of one service. Implemented by the coordinator and the worker.
pub trait Handler: Send + Sync + 'static {
    type Service: Service;
    fn handle(
        &self,
        req: <Self::Service as Service>::Request,
        payload: Bytes,
    ) -> impl Future<Output = (Result<<Self::Service as Service>::Response>, Payload)> + Send;
}

/// A bound listening socket, and the local socket named after it.
pub struct Listener {
    tcp: TcpListener,
    local: Option<UnixListener>,
}

impl Listener {
    /// The address it listens on (with the port chosen, if 0 was asked).
    pub fn local_addr(&self) -> Result<String> {
        Ok(self.tcp.local_addr()?.to_string())
    }

    /// Whether peers on this machine may connect through a local socket.
    pub fn has_local_socket(&self) -> bool {
        self.local.is_some()
    }
}

/// Whether `addr` can be listened on now (a port in use cannot), to say so
/// before starting a server that would fail to bind it.
pub fn can_listen(addr: &str) -> bool {
    std::net::TcpListener::bind(addr).is_ok()
}

/// Binds `addr` (port 0 picks a free port), and the local socket named
/// after the address bound, unless this process does not use them.
pub async fn bind(addr: &str) -> Result<Listener> {
    let tcp = TcpListener::bind(addr).await.map_err(|e| Error::from(e).context(format!("cannot listen on {addr}")))?;
    let local = match local::enabled() {
        true => local::listen(tcp.local_addr()?),
        false => None,
    };
    Ok(Listener { tcp, local })
}

/// A listener with its limits, ready to serve; its figures can be read
/// before and while it runs.
pub struct Server {
    listener: Listener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
}

impl Server {
    /// A server whose peers must prove they know `secret`; checks `limits`
    /// (see [`Limits::validate`]).
    pub fn new(listener: Listener, limits: Limits, secret: Secret) -> Result<Server> {
        limits.validate()?;
        let counters = Counters::new(limits.budget);
        let budget = Budget::new(&limits, counters.clone());
        let slots = Arc::new(Semaphore::new(limits.max_connections));
        let shared = Arc::new(Shared { limits, secret, budget, counters, buffers: None });
        Ok(Server { listener, shared, slots })
    }

    /// Has the server read chunk-sized payloads into `buffers`' buffers.
    pub fn with_buffers(mut self, buffers: Arc<ChunkBuffers>) -> Server {
        let shared = Arc::get_mut(&mut self.shared).expect("buffers are set before the server runs");
        shared.buffers = Some(buffers);
        self
    }

    pub fn local_addr(&self) -> Result<String> {
        self.listener.local_addr()
    }

    /// Reads this server's figures.
    pub fn stats(&self) -> StatsHandle {
        StatsHandle(self.shared.counters.clone())
    }

    /// Serves until the process ends.
    pub async fn run<H: Handler>(self, handler: Arc<H>) -> Result<()> {
        let Listener { tcp, local } = &self.listener;
        loop {
            let accepted = tokio::select! {
                r = tcp.accept() => r.map(|(s, addr)| (Stream::Tcp(s), addr.to_string())),
                r = accept_local(local.as_ref()) => r.map(|s| {
                    let peer = local_peer(&s);
                    (Stream::Local(s), peer)
                }),
            };
            let (stream, peer) = match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: log, back off, go on.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                self.shared.counters.dropped(DropReason::TooManyConnections);
                let max = self.shared.limits.max_connections;
                tracing::warn!("dropping connection from {peer}: {}: {max} are open", DropReason::TooManyConnections);
                continue;
            };
            tokio::spawn(serve_slot(stream, peer, slot, handler.clone(), self.shared.clone()));
        }
    }
}

/// The next peer on the local socket; never, without one.
async fn accept_local(l: Option<&UnixListener>) -> std::io::Result<UnixStream> {
    match l {
        Some(l) => l.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// How a peer on the local socket is named in logs: by its process.
fn local_peer(s: &UnixStream) -> String {
    match s.peer_cred().ok().and_then(|c| c.pid()) {
        Some(pid) => format!("process {pid} on this machine"),
        None => "a process on this machine".to_string(),
    }
}

/// Serves one accepted connection, holding its slot until it ends.
async fn serve_slot<H: Handler>(
    stream: Stream,
    peer: String,
    slot: OwnedSemaphorePermit,
    handler: Arc<H>,
    shared: Arc<Shared>,
) {
    struct Open {
        counters: Arc<Counters>,
        _slot: OwnedSemaphorePermit,
    }
    impl Drop for Open {
        fn drop(&mut self) {
            self.counters.closed();
        }
    }
    shared.counters.opened(stream.is_local());
    let _open = Open { counters: shared.counters.clone(), _slot: slot };
    let conn = Connection::accepted(stream, peer, shared.limits.stall_timeout);
    serve_conn(conn, handler, shared).await;
}

/// Serves peers that know `secret` with `limits` until the process ends;
/// invalid limits are an error at once.
pub async fn serve<H: Handler>(listener: Listener, handler: Arc<H>, limits: Limits, secret: Secret) -> Result<()> {
    Server::new(listener, limits, secret)?.run(handler).await
}
