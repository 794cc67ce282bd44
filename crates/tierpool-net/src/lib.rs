//! Sockets: framed request/response transport over TCP.
//!
//! - [`conn`]: one connection, reading and writing frames;
//! - [`pool`]: a pool of idle connections to one address, with timeouts;
//! - [`server`]: the accept loop that feeds requests to a [`Handler`].
//!
//! One request is in flight per connection; concurrency comes from several
//! connections. Chunk payloads are written straight from the caller's buffer
//! and read into one exactly sized buffer: no serialiser copies bulk bytes.

mod conn;
mod pool;
mod server;

pub use conn::Connection;
pub use pool::{Pool, PoolConfig};
pub use server::{serve, Handler};
