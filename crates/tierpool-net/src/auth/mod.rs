//! Who may talk to a pool: the pool's secret, where a process finds it,
//! and the handshake by which both ends of every connection prove they
//! know it before any frame is read or answered.
//!
//! - `secret`: the key and its file (private, hex, written atomically);
//! - [`registry`]: `~/.tierpool/pools/<addr>`, where `tierpool up` records
//!   the secret file of the pools it starts;
//! - `handshake`: the exchange itself, server side ([`accept`]) and client
//!   side ([`introduce`]).
//!
//! Invariants: the key never crosses the wire nor appears in a message; a
//! server serves no frame of a peer that has not proved the key on that
//! connection; a client sends no frame to a server that has not proved it
//! back. The handshake authenticates, it does not encrypt: what follows it
//! travels in clear and could be altered by someone on the path.

mod handshake;
pub mod registry;
mod secret;
#[cfg(test)]
mod tests;

pub use handshake::{accept, introduce, Refusal};
pub use secret::{Secret, MAX_KEY_LEN, MIN_KEY_LEN, NEW_KEY_LEN};

use std::path::Path;
use tierpool_types::Result;

/// The environment variable naming a secret file, for every role but the coordinator.
pub const SECRET_FILE_ENV: &str = "TIERPOOL_SECRET_FILE";

/// What a process proves itself with when it connects: the pool's secret,
/// or none (then every server refuses it, saying so). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Credentials(Option<Secret>);

impl Credentials {
    /// No secret.
    pub fn none() -> Credentials {
        Credentials(None)
    }

    pub fn secret(&self) -> Option<&Secret> {
        self.0.as_ref()
    }
}

impl From<Secret> for Credentials {
    fn from(s: Secret) -> Credentials {
        Credentials(Some(s))
    }
}

/// The secret a process that connects to the pool at `addr` uses: the file
/// `given`, else the one `tierpool up` recorded for `addr` in the
/// [`registry`], else the one `$TIERPOOL_SECRET_FILE` names; none if nothing
/// names one. The record comes before the variable because it names the
/// secret of exactly the pool at `addr` (started on this machine), where the
/// variable names one for whichever pool: a client of a local pool is not
/// led astray by a variable set for another. A file that is named but
/// cannot be used (missing, readable by others, not a key) is an error,
/// never silently skipped.
pub fn find_secret(given: Option<&Path>, addr: &str) -> Result<Credentials> {
    if let Some(path) = given {
        return Secret::load(path).map(Credentials::from);
    }
    if let Some(path) = registry::lookup(addr) {
        let s = Secret::load(&path)?;
        let origin = format!("{}, recorded for {addr} by `tierpool up`", s.origin());
        return Ok(s.with_origin(origin).into());
    }
    match std::env::var_os(SECRET_FILE_ENV).filter(|p| !p.is_empty()) {
        Some(path) => Secret::load(Path::new(&path)).map(Credentials::from),
        None => Ok(Credentials::none()),
    }
}
