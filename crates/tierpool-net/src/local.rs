//! Local sockets: a peer on the server's machine skips TCP.
//!
//! A server listening on a TCP address also listens on a Unix socket in
//! the abstract namespace named after that address (`tierpool/ADDR`, for
//! example `tierpool/127.0.0.1:7001`). A client about to connect to an
//! address first tries the Unix sockets that address names and connects
//! over TCP only if none answers. Loopback carries a byte through the
//! TCP stack twice (checksums, segments, acknowledgements); a Unix socket
//! copies it once from sender to receiver, with no protocol around it.
//!
//! Invariants:
//! - a client reaches over a local socket only a server it would reach
//!   over TCP: abstract names live in a network namespace, as TCP ports
//!   do, and one address is bound by one server at a time (the kernel
//!   drops the name with its process, as it does the port);
//! - so peers in other network namespaces (a pool spread over namespaces
//!   with shaped links) still cross their links;
//! - a local connection opens with the same handshake as a TCP one: a
//!   process that squats a name cannot pass for the server, and a server
//!   that finds its name taken serves over TCP alone. A client whose local
//!   handshake fails in any way (a refusal included: anyone may send one)
//!   connects over TCP, and reports what TCP says;
//! - nothing but the transport differs: frames, limits and budgets are the
//!   same, and errors name the address dialled.
//!
//! `TIERPOOL_LOCAL_SOCKETS=0` turns them off in a process: its servers do
//! not listen on them and its clients do not try them.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};

/// The send buffer a local socket asks for (the kernel caps it at
/// `net.core.wmem_max`), so that a 4 MiB chunk crosses in a few wakeups
/// rather than dozens. A Unix stream socket's sender's buffer bounds what is
/// in flight; the receiver's plays no part.
const SOCKET_BUFFER: usize = 1 << 20;

/// The longest a handshake over a local socket may take before the client
/// tries TCP instead (or the connect timeout, if shorter): a server on the
/// same machine answers in microseconds unless it is stopped or swamped.
pub const HANDSHAKE: Duration = Duration::from_secs(1);

/// Whether this process uses local sockets: `$TIERPOOL_LOCAL_SOCKETS`
/// (`0`, `off`, `false`, `no` turn them off), else on; read once, at the
/// first connection or server.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("TIERPOOL_LOCAL_SOCKETS") {
        Err(_) => true,
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "false" | "no" => false,
            "1" | "on" | "true" | "yes" | "" => true,
            _ => {
                tracing::warn!("TIERPOOL_LOCAL_SOCKETS={v:?} is neither on nor off; using local sockets");
                true
            }
        },
    })
}

/// The abstract name of a server bound to `addr`.
fn name(addr: SocketAddr) -> String {
    format!("tierpool/{addr}")
}

/// The names a server reached at `addrs` (what the address dialled
/// resolves to, in TCP's order) may listen on, in the order to try: for
/// each address its own name, then, for a loopback address, that of a
/// server bound to every address of its family (which loopback reaches
/// too, and which cannot be bound beside a server on loopback itself).
pub(crate) fn names(addrs: &[SocketAddr]) -> Vec<String> {
    let mut names = Vec::new();
    for &addr in addrs {
        names.push(name(addr));
        if addr.ip().is_loopback() {
            let any = match addr {
                SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port())),
                SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, addr.port())),
            };
            names.push(name(any));
        }
    }
    names
}

/// What `dialed` stands for: itself if it is an address; the loopback
/// addresses `localhost` resolves to, in the resolver's order; nothing for
/// another host name, which may be another machine.
async fn resolve(dialed: &str) -> Vec<SocketAddr> {
    if let Ok(a) = dialed.parse::<SocketAddr>() {
        return vec![a];
    }
    match dialed.rsplit_once(':') {
        Some(("localhost", _)) => match tokio::net::lookup_host(dialed).await {
            Ok(addrs) => addrs.filter(|a| a.ip().is_loopback()).collect(),
            Err(_) => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The abstract address `name` stands for, as tokio takes it.
fn abstract_path(name: &str) -> String {
    format!("\0{name}")
}

/// Listens on the local socket of a server bound to `addr`; `None` (said
/// so) if another process holds its name.
pub(crate) fn listen(addr: SocketAddr) -> Option<UnixListener> {
    let n = name(addr);
    match UnixListener::bind(abstract_path(&n)) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("cannot listen on the local socket {n} ({e}): peers on this machine connect over TCP");
            None
        }
    }
}

/// A connection to the server at `dialed` through its local socket, if it
/// has one in this network namespace.
pub(crate) async fn connect(dialed: &str) -> Option<UnixStream> {
    for n in names(&resolve(dialed).await) {
        if let Ok(s) = UnixStream::connect(abstract_path(&n)).await {
            return Some(s);
        }
    }
    None
}

/// Sets a local socket's send buffer (either end's; `Connection` does, for both).
pub(crate) fn tune(s: &UnixStream) {
    let _ = socket2::SockRef::from(s).set_send_buffer_size(SOCKET_BUFFER);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(a: &[&str]) -> Vec<SocketAddr> {
        a.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn an_address_names_its_own_socket_and_loopback_also_its_familys_wildcard() {
        assert_eq!(names(&addrs(&["10.0.0.2:7001"])), ["tierpool/10.0.0.2:7001"]);
        assert_eq!(names(&addrs(&["127.0.0.1:7001"])), ["tierpool/127.0.0.1:7001", "tierpool/0.0.0.0:7001"]);
        assert_eq!(names(&addrs(&["[::1]:9"])), ["tierpool/[::1]:9", "tierpool/[::]:9"]);
        assert_eq!(
            names(&addrs(&["[::1]:7001", "127.0.0.1:7001"])),
            ["tierpool/[::1]:7001", "tierpool/[::]:7001", "tierpool/127.0.0.1:7001", "tierpool/0.0.0.0:7001"],
            "in the order given"
        );
    }

    #[tokio::test]
    async fn only_addresses_and_localhost_resolve_here() {
        assert_eq!(resolve("10.0.0.2:7001").await, addrs(&["10.0.0.2:7001"]));
        let local = resolve("localhost:7001").await;
        assert!(!local.is_empty() && local.iter().all(|a| a.ip().is_loopback() && a.port() == 7001), "{local:?}");
        assert!(resolve("db.example.com:7001").await.is_empty(), "another machine, perhaps");
        assert!(resolve("localhost:x").await.is_empty());
        assert!(resolve("nonsense").await.is_empty());
    }

    #[tokio::test]
    async fn a_client_reaches_a_listener_by_the_address_it_dials_and_nothing_else() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        // Port 1 is never a tierpool server's here; no other test binds it.
        let l = listen(addr).expect("the name is free");
        assert!(connect("127.0.0.1:1").await.is_some());
        assert!(connect("localhost:1").await.is_some());
        assert!(connect("127.0.0.1:2").await.is_none(), "another port");
        assert!(connect("10.9.9.9:1").await.is_none(), "another address");
        assert!(listen(addr).is_none(), "one holder per name");
        drop(l);
        assert!(connect("127.0.0.1:1").await.is_none(), "gone with its listener");
        assert!(listen(addr).is_some(), "and free again");
    }
}
