//! Both ends of the handshake over a byte stream (the bytes are
//! `tierpool_proto::handshake`'s).
//!
//! The server side ([`accept`]) reads exactly one proof, 68 bytes, into the
//! connection's read buffer and nothing after it; nothing is charged to the
//! budget, no handler runs, and a peer that fails is refused and dropped.
//! The client side ([`introduce`]) sends nothing but its proof until the
//! server has proved itself, so no request reaches a server that does not
//! know the secret. Each side bounds the whole exchange by one time limit.

use super::{Credentials, Secret};
use std::time::Duration;
use tierpool_proto::handshake::{
    self as hs, BadHead, Step, HEAD_LEN, MAC_LEN, NONCE_LEN, NO_MAC, REFUSED_NOT_A_HANDSHAKE, REFUSED_SECRET,
};
use tierpool_proto::PROTOCOL_VERSION;
use tierpool_types::{Error, ErrorKind, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why a server refused a peer at the handshake.
#[derive(Debug)]
pub enum Refusal {
    /// The handshake did not end within the limit.
    TooSlow(Duration),
    /// The peer left, or the connection failed, before it ended.
    Left,
    /// The peer sent something other than a proof.
    NotAHandshake(BadHead),
    /// The proof carried no MAC: the peer has no secret.
    NoSecret,
    /// The proof's MAC is not the one the pool's secret gives.
    WrongSecret,
    /// No random bytes for a nonce.
    Internal(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooSlow(limit) => write!(f, "no handshake within {limit:?}"),
            Refusal::Left => f.write_str("left during the handshake"),
            Refusal::NotAHandshake(bad) => write!(f, "{bad}"),
            Refusal::NoSecret => f.write_str("it has no secret"),
            Refusal::WrongSecret => f.write_str("wrong secret"),
            Refusal::Internal(e) => write!(f, "no nonce: {e}"),
        }
    }
}

impl From<std::io::Error> for Refusal {
    fn from(_: std::io::Error) -> Refusal {
        Refusal::Left
    }
}

fn nonce() -> std::result::Result<[u8; NONCE_LEN], getrandom::Error> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n)?;
    Ok(n)
}

/// Server side: sends the hello and takes the peer's proof, within `limit`.
/// A peer that fails is sent a refusal where it can read one.
pub async fn accept<S>(s: &mut S, secret: &Secret, limit: Duration) -> std::result::Result<(), Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(limit, exchange_as_server(s, secret)).await {
        Ok(r) => r,
        Err(_) => Err(Refusal::TooSlow(limit)),
    }
}

async fn exchange_as_server<S>(s: &mut S, secret: &Secret) -> std::result::Result<(), Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let ns = nonce().map_err(|e| Refusal::Internal(e.to_string()))?;
    s.write_all(&hs::hello(&ns)).await?;
    s.flush().await?;
    let mut head = [0u8; HEAD_LEN];
    s.read_exact(&mut head).await?;
    if let Err(bad) = hs::check_head(&head, &[Step::Proof]) {
        refuse(s, REFUSED_NOT_A_HANDSHAKE).await;
        return Err(Refusal::NotAHandshake(bad));
    }
    let mut nc = [0u8; NONCE_LEN];
    let mut mac = [0u8; MAC_LEN];
    s.read_exact(&mut nc).await?;
    s.read_exact(&mut mac).await?;
    if mac == NO_MAC {
        refuse(s, REFUSED_SECRET).await;
        return Err(Refusal::NoSecret);
    }
    if !secret.verify(&hs::client_transcript(&ns, &nc), &mac) {
        refuse(s, REFUSED_SECRET).await;
        return Err(Refusal::WrongSecret);
    }
    s.write_all(&hs::accept(&secret.sign(&hs::server_transcript(&nc, &ns)))).await?;
    s.flush().await?;
    Ok(())
}

/// Tells the peer why, if it still listens; the connection ends anyway.
async fn refuse<S: AsyncWrite + Unpin>(s: &mut S, reason: u8) {
    let _ = s.write_all(&hs::refuse(reason)).await;
    let _ = s.flush().await;
}

/// Client side: answers the hello of the server at `peer` with a proof made
/// with `creds` and checks the server's, within `limit`. Errors name `peer`:
/// `Unauthenticated` when either side does not prove the secret,
/// `Protocol` for a peer that is not a tierpool server of this version,
/// `Unavailable` when it is too slow or leaves.
pub async fn introduce<S>(s: &mut S, creds: &Credentials, peer: &str, limit: Duration) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(limit, exchange_as_client(s, creds, peer)).await {
        Ok(r) => r,
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("{peer} did not complete the tierpool handshake within {limit:?} (is it a tierpool server of protocol {PROTOCOL_VERSION}?)"),
        )),
    }
}

async fn exchange_as_client<S>(s: &mut S, creds: &Credentials, peer: &str) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let left = |e: std::io::Error| {
        Error::new(ErrorKind::Unavailable, format!("{peer} closed the connection during the handshake ({e})"))
    };
    let not_tierpool = |bad: BadHead| {
        Error::new(ErrorKind::Protocol, format!("{peer} is not a tierpool server of this version: {bad}"))
    };
    let mut head = [0u8; HEAD_LEN];
    s.read_exact(&mut head).await.map_err(left)?;
    hs::check_head(&head, &[Step::Hello]).map_err(not_tierpool)?;
    let mut ns = [0u8; NONCE_LEN];
    s.read_exact(&mut ns).await.map_err(left)?;
    let nc = nonce().map_err(|e| Error::internal(format!("no random bytes for a nonce: {e}")))?;
    let mac = creds.secret().map_or(NO_MAC, |k| k.sign(&hs::client_transcript(&ns, &nc)));
    s.write_all(&hs::proof(&nc, &mac)).await.map_err(left)?;
    s.flush().await.map_err(left)?;
    s.read_exact(&mut head).await.map_err(left)?;
    match hs::check_head(&head, &[Step::Accept, Step::Refuse]).map_err(not_tierpool)? {
        Step::Accept => {
            let mut server_mac = [0u8; MAC_LEN];
            s.read_exact(&mut server_mac).await.map_err(left)?;
            match creds.secret() {
                Some(k) if k.verify(&hs::server_transcript(&nc, &ns), &server_mac) => Ok(()),
                _ => Err(impostor(peer, creds)),
            }
        }
        _ => {
            let mut reason = [0u8; 1];
            s.read_exact(&mut reason).await.map_err(left)?;
            Err(refused(peer, creds, reason[0]))
        }
    }
}

/// The error of a client the server at `peer` refused.
fn refused(peer: &str, creds: &Credentials, reason: u8) -> Error {
    let m = match (reason, creds.secret()) {
        (REFUSED_SECRET, Some(k)) => {
            format!("the pool at {peer} refused this client's secret (from {}): it is not that pool's", k.origin())
        }
        (REFUSED_SECRET, None) => format!(
            "the pool at {peer} refused this client, which has no secret: name the pool's secret file \
             with --secret-file or TIERPOOL_SECRET_FILE"
        ),
        (other, _) => format!("the pool at {peer} refused this client's handshake (reason {other})"),
    };
    Error::new(ErrorKind::Unauthenticated, m)
}

/// The error of a client whose server did not prove it knows the secret.
fn impostor(peer: &str, creds: &Credentials) -> Error {
    let from = creds.secret().map_or_else(|| "none".to_string(), |k| format!("from {}", k.origin()));
    Error::new(
        ErrorKind::Unauthenticated,
        format!("{peer} accepted this client without proving it knows the pool's secret ({from}): it is not that pool"),
    )
}
