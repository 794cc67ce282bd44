//! The handshake that opens every connection, before any frame: both ends
//! prove they know the pool's secret key K, and K never crosses the wire.
//!
//! ```text
//! server -> client  hello   "TP" | version | 0x10 | server nonce Ns (32)                   36 bytes
//! client -> server  proof   "TP" | version | 0x11 | client nonce Nc (32) | client MAC (32)  68 bytes
//! server -> client  accept  "TP" | version | 0x12 | server MAC (32)                        36 bytes
//!               or  refuse  "TP" | version | 0x13 | reason u8                              5 bytes
//!
//! client MAC = HMAC-SHA256(K, "tierpool client" | Ns | Nc)
//! server MAC = HMAC-SHA256(K, "tierpool server" | Nc | Ns)
//! ```
//!
//! The server speaks first, as soon as it accepts; a client sends its proof
//! only after the hello, and its first frame only after the accept. Nonces
//! are 32 fresh random bytes per connection and per side, so a recorded
//! exchange proves nothing on another connection; the two labels keep a
//! server's MAC from ever serving as a client's. A client without a secret
//! sends 32 zero bytes as its MAC, so the server can say so in its log.
//! Refusal reasons: [`REFUSED_SECRET`] (wrong MAC, or none) and
//! [`REFUSED_NOT_A_HANDSHAKE`] (anything but a proof: a frame sent
//! without the handshake, another protocol or version).
//!
//! The step byte of a handshake message is never a frame kind (1..3), so a
//! frame sent where a proof is due is told apart by its fourth byte. This
//! authenticates both ends of a connection at its start; it does not
//! encrypt or protect what follows (see docs/architecture.md).

use crate::frame::{KIND_COORD_REQUEST, KIND_RESPONSE, MAGIC, PROTOCOL_VERSION};
use std::fmt;

pub const NONCE_LEN: usize = 32;
pub const MAC_LEN: usize = 32;
/// Magic, version and step: the start of every handshake message.
pub const HEAD_LEN: usize = 4;
pub const HELLO_LEN: usize = HEAD_LEN + NONCE_LEN;
pub const PROOF_LEN: usize = HEAD_LEN + NONCE_LEN + MAC_LEN;
pub const ACCEPT_LEN: usize = HEAD_LEN + MAC_LEN;
pub const REFUSE_LEN: usize = HEAD_LEN + 1;

/// What the client's MAC covers first.
pub const CLIENT_LABEL: &[u8; 15] = b"tierpool client";
/// What the server's MAC covers first.
pub const SERVER_LABEL: &[u8; 15] = b"tierpool server";

/// The MAC a client without a secret sends.
pub const NO_MAC: [u8; MAC_LEN] = [0; MAC_LEN];

/// The proof's MAC did not verify (a wrong secret, or none).
pub const REFUSED_SECRET: u8 = 1;
/// What came was not a proof.
pub const REFUSED_NOT_A_HANDSHAKE: u8 = 2;

/// The message a handshake step carries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Hello = 0x10,
    Proof = 0x11,
    Accept = 0x12,
    Refuse = 0x13,
}

impl Step {
    fn from_byte(b: u8) -> Option<Step> {
        [Step::Hello, Step::Proof, Step::Accept, Step::Refuse].into_iter().find(|s| *s as u8 == b)
    }
}

/// The head of a message of `step`.
pub fn head(step: Step) -> [u8; HEAD_LEN] {
    [MAGIC[0], MAGIC[1], PROTOCOL_VERSION, step as u8]
}

pub fn hello(server_nonce: &[u8; NONCE_LEN]) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..HEAD_LEN].copy_from_slice(&head(Step::Hello));
    b[HEAD_LEN..].copy_from_slice(server_nonce);
    b
}

pub fn proof(client_nonce: &[u8; NONCE_LEN], mac: &[u8; MAC_LEN]) -> [u8; PROOF_LEN] {
    let mut b = [0u8; PROOF_LEN];
    b[..HEAD_LEN].copy_from_slice(&head(Step::Proof));
    b[HEAD_LEN..HEAD_LEN + NONCE_LEN].copy_from_slice(client_nonce);
    b[HEAD_LEN + NONCE_LEN..].copy_from_slice(mac);
    b
}

pub fn accept(mac: &[u8; MAC_LEN]) -> [u8; ACCEPT_LEN] {
    let mut b = [0u8; ACCEPT_LEN];
    b[..HEAD_LEN].copy_from_slice(&head(Step::Accept));
    b[HEAD_LEN..].copy_from_slice(mac);
    b
}

pub fn refuse(reason: u8) -> [u8; REFUSE_LEN] {
    let h = head(Step::Refuse);
    [h[0], h[1], h[2], h[3], reason]
}

/// What the client's MAC is computed over.
pub fn client_transcript(server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN]) -> [u8; 79] {
    transcript(CLIENT_LABEL, server_nonce, client_nonce)
}

/// What the server's MAC is computed over.
pub fn server_transcript(client_nonce: &[u8; NONCE_LEN], server_nonce: &[u8; NONCE_LEN]) -> [u8; 79] {
    transcript(SERVER_LABEL, client_nonce, server_nonce)
}

fn transcript(label: &[u8; 15], first: &[u8; NONCE_LEN], second: &[u8; NONCE_LEN]) -> [u8; 79] {
    let mut t = [0u8; 15 + 2 * NONCE_LEN];
    t[..15].copy_from_slice(label);
    t[15..15 + NONCE_LEN].copy_from_slice(first);
    t[15 + NONCE_LEN..].copy_from_slice(second);
    t
}

/// Why bytes are not the handshake message expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadHead {
    /// Not "TP": not a tierpool peer.
    Magic([u8; 2]),
    /// A tierpool peer of another protocol version.
    Version(u8),
    /// A frame where a handshake message is due: a request sent without the handshake.
    Frame(u8),
    /// Another handshake step, or an unknown one.
    Step(u8),
}

impl fmt::Display for BadHead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadHead::Magic(m) => write!(f, "not a tierpool peer (it sent {:02x}{:02x})", m[0], m[1]),
            BadHead::Version(v) => {
                write!(f, "a peer of tierpool protocol {v}, where this build speaks {PROTOCOL_VERSION}")
            }
            BadHead::Frame(_) => f.write_str("a request without the handshake"),
            BadHead::Step(s) => write!(f, "handshake step {s:#04x} out of turn"),
        }
    }
}

/// Checks that `b` begins a handshake message of one of the `expected` steps, and which.
pub fn check_head(b: &[u8; HEAD_LEN], expected: &[Step]) -> Result<Step, BadHead> {
    if b[0..2] != MAGIC {
        return Err(BadHead::Magic([b[0], b[1]]));
    }
    if b[2] != PROTOCOL_VERSION {
        return Err(BadHead::Version(b[2]));
    }
    if (KIND_COORD_REQUEST..=KIND_RESPONSE).contains(&b[3]) {
        return Err(BadHead::Frame(b[3]));
    }
    match Step::from_byte(b[3]) {
        Some(s) if expected.contains(&s) => Ok(s),
        _ => Err(BadHead::Step(b[3])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameHeader, KIND_WORKER_REQUEST};

    #[test]
    fn messages_have_their_documented_bytes() {
        let (ns, nc, mac) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let h = hello(&ns);
        assert_eq!((&h[..4], &h[4..]), (&b"TP\x23\x10"[..], &ns[..]));
        let p = proof(&nc, &mac);
        assert_eq!((&p[..4], &p[4..36], &p[36..]), (&b"TP\x23\x11"[..], &nc[..], &mac[..]));
        let a = accept(&mac);
        assert_eq!((&a[..4], &a[4..]), (&b"TP\x23\x12"[..], &mac[..]));
        assert_eq!(refuse(REFUSED_SECRET), *b"TP\x23\x13\x01");
        let t = client_transcript(&ns, &nc);
        assert_eq!((&t[..15], &t[15..47], &t[47..]), (&b"tierpool client"[..], &ns[..], &nc[..]));
        let t = server_transcript(&nc, &ns);
        assert_eq!((&t[..15], &t[15..47], &t[47..]), (&b"tierpool server"[..], &nc[..], &ns[..]));
    }

    #[test]
    fn heads_are_checked_and_a_frame_is_told_apart() {
        assert_eq!(check_head(&head(Step::Proof), &[Step::Proof]), Ok(Step::Proof));
        let both = [Step::Accept, Step::Refuse];
        assert_eq!(check_head(&head(Step::Refuse), &both), Ok(Step::Refuse));
        assert_eq!(check_head(&head(Step::Hello), &[Step::Proof]), Err(BadHead::Step(0x10)));
        let frame = FrameHeader { kind: KIND_WORKER_REQUEST, header_len: 1, payload_len: 0 }.encode();
        let e = check_head(&frame[..4].try_into().unwrap(), &[Step::Proof]).unwrap_err();
        assert_eq!((e.clone(), e.to_string()), (BadHead::Frame(2), "a request without the handshake".into()));
        assert_eq!(check_head(b"GET ", &[Step::Proof]).unwrap_err().to_string(), "not a tierpool peer (it sent 4745)");
        assert_eq!(
            check_head(b"TP\x03\x11", &[Step::Proof]).unwrap_err().to_string(),
            "a peer of tierpool protocol 3, where this build speaks 35"
        );
    }
}
