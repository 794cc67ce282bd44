//! Sockets and the runtime's background work: authenticated, framed
//! request/response transport over TCP (or a
//! local socket to a server on the same machine), and the loops that keep a
//! process's peers informed.
//!
//! - [`auth`]: the pool's secret, where it is found, and the handshake every connection opens with;
//! - `conn`: one connection, writing frames and reading them through `frame_io`;
//! - `frame_io`: frame headers and bodies read as bytes arrive, under time and memory bounds;
//! - [`local`]: Unix sockets beside each server's TCP address, for peers on the same machine;
//! - `stream`: the byte streams a connection runs over (TCP or local);
//! - `pool`: a pool of idle connections to one address, with timeouts;
//! - `server`: binding, and the accept loop that feeds requests to a [`Handler`];
//! - `session`: one server connection, its time limits and drops;
//! - `limits`: what a server lets its peers hold ([`Limits`], with defaults);
//! - `budget`: the byte budget every frame a server reads is charged to;
//! - `buffers`: chunk-sized buffers a server or a client reads payloads into and reuses ([`ChunkBuffers`]);
//! - `small_buffers`: a worker's shorter ones, by size class;
//! - `stats`: a server's figures ([`ServerStats`]);
//! - [`background`]: loops that repeat work on the runtime (heartbeats, renewals, policy ticks).
//!
//! Every connection starts with the handshake: a server reads no frame of a
//! peer that has not proved it knows the pool's secret, and a client sends
//! none to a server that has not proved it back.
//!
//! One request is in flight per connection; concurrency comes from several
//! connections. Chunk payloads are written straight from the caller's
//! buffer and read into one buffer that grows as they arrive and ends
//! exactly sized, or on a server that keeps chunk buffers, into a reused
//! one ([`ChunkBuffers`]): no serialiser copies bulk bytes, and no peer makes a
//! server allocate what it has only claimed. A server holds at most its
//! budget (256 MiB by default) of frame bytes for all its peers together,
//! at most `max_connections` (1024) connections, and drops a peer that
//! breaks a size or time bound without disturbing the others.

pub mod auth;
pub mod background;
mod budget;
mod buffers;
mod conn;
mod frame_io;
mod limits;
pub mod local;
mod pool;
mod server;
mod session;
mod small_buffers;
mod stats;
mod stream;

pub use auth::{Credentials, Secret};
pub use background::{Background, Step};
pub use buffers::ChunkBuffers;
pub use conn::Connection;
pub use limits::{Limits, ALLOWANCE};
pub use pool::{runtime_ended, stayed_busy, Pool, PoolConfig, DEFAULT_MAX_OPEN, REUSE_WITHIN};
pub use server::{bind, can_listen, serve, Handler, Listener, Server};
pub use stats::{DropReason, Dropped, ServerStats, StatsHandle, LARGE_PAYLOAD};
