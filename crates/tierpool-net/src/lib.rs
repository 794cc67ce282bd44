//! Sockets and the runtime's background work: framed request/response
//! transport over TCP, and the loops that keep a process's peers informed.
//!
//! - [`conn`]: one connection, reading and writing frames;
//! - [`pool`]: a pool of idle connections to one address, with timeouts;
//! - [`server`]: binding, and the accept loop that feeds requests to a [`Handler`];
//! - [`background`]: loops that repeat work on the runtime (heartbeats, renewals, policy ticks).
//!
//! One request is in flight per connection; concurrency comes from several
//! connections. Chunk payloads are written straight from the caller's buffer
//! and read into one exactly sized buffer: no serialiser copies bulk bytes.

pub mod background;
mod conn;
mod pool;
mod server;

pub use background::{Background, Step};
pub use conn::Connection;
pub use pool::{Pool, PoolConfig};
pub use server::{bind, serve, Handler, Listener};
