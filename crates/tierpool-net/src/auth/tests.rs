//! The handshake between two ends of an in-memory stream: the right secret
//! passes both ways, a wrong one or none fails both ways, a recorded
//! exchange replayed on another connection fails (fresh nonces), and slow
//! or silent peers run out of time.

use super::*;
use std::time::{Duration, Instant};
use tierpool_proto::handshake::{self as hs, BadHead, HELLO_LEN, PROOF_LEN};
use tierpool_types::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const LIMIT: Duration = Duration::from_secs(5);

fn secret(byte: u8) -> Secret {
    Secret::from_key(&[byte; 32], format!("/keys/{byte}")).unwrap()
}

/// Runs both sides on one stream: the server's outcome and the client's.
async fn both(server_key: Secret, creds: Credentials) -> (std::result::Result<(), Refusal>, Result<()>) {
    let (mut c, mut s) = tokio::io::duplex(1024);
    let server = tokio::spawn(async move { accept(&mut s, &server_key, LIMIT).await });
    let client = introduce(&mut c, &creds, "127.0.0.1:7700", LIMIT).await;
    (server.await.unwrap(), client)
}

#[tokio::test]
async fn the_right_secret_passes_both_ways() {
    let (server, client) = both(secret(1), secret(1).into()).await;
    assert!(server.is_ok(), "{server:?}");
    assert!(client.is_ok(), "{client:?}");
}

#[tokio::test]
async fn a_wrong_secret_or_none_is_refused_and_the_client_told_why() {
    let (server, client) = both(secret(1), secret(2).into()).await;
    assert!(matches!(server, Err(Refusal::WrongSecret)), "{server:?}");
    let e = client.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    assert_eq!(
        e.message,
        "the pool at 127.0.0.1:7700 refused this client's secret (from /keys/2): it is not that pool's"
    );
    let (server, client) = both(secret(1), Credentials::none()).await;
    assert!(matches!(server, Err(Refusal::NoSecret)), "{server:?}");
    let e = client.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    assert_eq!(
        e.message,
        "the pool at 127.0.0.1:7700 refused this client, which has no secret: name the pool's secret file \
         with --secret-file or TIERPOOL_SECRET_FILE"
    );
}

/// A server that does not know the secret but accepts every client,
/// answering with a MAC under `key`: what the client must not trust.
async fn impostor(mut s: DuplexStream, key: Secret) {
    s.write_all(&hs::hello(&[7; 32])).await.unwrap();
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).await.unwrap();
    let nc: [u8; 32] = proof[4..36].try_into().unwrap();
    s.write_all(&hs::accept(&key.sign(&hs::server_transcript(&nc, &[7; 32])))).await.unwrap();
}

#[tokio::test]
async fn a_server_without_the_secret_is_not_trusted() {
    let (mut c, s) = tokio::io::duplex(1024);
    tokio::spawn(impostor(s, secret(9)));
    let e = introduce(&mut c, &secret(1).into(), "10.0.0.1:7700", LIMIT).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    assert_eq!(
        e.message,
        "10.0.0.1:7700 accepted this client without proving it knows the pool's secret (from /keys/1): \
         it is not that pool"
    );
}

/// One whole exchange as a client sees it: (hello, proof, accept) bytes,
/// recorded by playing the server by hand with the right key.
async fn record(key: &Secret) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (mut c, mut s) = tokio::io::duplex(1024);
    let creds: Credentials = key.clone().into();
    let client = tokio::spawn(async move { introduce(&mut c, &creds, "p", LIMIT).await });
    let ns = [3u8; 32];
    let hello = hs::hello(&ns);
    s.write_all(&hello).await.unwrap();
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).await.unwrap();
    let nc: [u8; 32] = proof[4..36].try_into().unwrap();
    let accepted = hs::accept(&key.sign(&hs::server_transcript(&nc, &ns)));
    s.write_all(&accepted).await.unwrap();
    client.await.unwrap().unwrap();
    (hello.to_vec(), proof.to_vec(), accepted.to_vec())
}

#[tokio::test]
async fn a_replayed_exchange_fails_both_ways_because_nonces_differ() {
    let key = secret(1);
    let (hello, proof, accepted) = record(&key).await;
    // The client's recorded proof, replayed to the server: its nonce is new.
    let (mut attacker, mut s) = tokio::io::duplex(1024);
    let server_key = key.clone();
    let server = tokio::spawn(async move { accept(&mut s, &server_key, LIMIT).await });
    let mut fresh = [0u8; HELLO_LEN];
    attacker.read_exact(&mut fresh).await.unwrap();
    assert_ne!(&fresh[..], &hello[..], "every connection gets a new nonce");
    attacker.write_all(&proof).await.unwrap();
    assert!(matches!(server.await.unwrap(), Err(Refusal::WrongSecret)));
    // The server's recorded hello and accept, replayed to a client: its nonce is new.
    let (mut c, mut attacker) = tokio::io::duplex(1024);
    let creds: Credentials = key.into();
    let client = tokio::spawn(async move { introduce(&mut c, &creds, "p", LIMIT).await });
    attacker.write_all(&hello).await.unwrap();
    let mut new_proof = [0u8; PROOF_LEN];
    attacker.read_exact(&mut new_proof).await.unwrap();
    assert_ne!(&new_proof[..], &proof[..]);
    attacker.write_all(&accepted).await.unwrap();
    assert_eq!(client.await.unwrap().unwrap_err().kind, ErrorKind::Unauthenticated);
}

#[tokio::test]
async fn a_frame_sent_without_the_handshake_is_refused_unread() {
    let (mut peer, mut s) = tokio::io::duplex(1024);
    let server = tokio::spawn(async move { accept(&mut s, &secret(1), LIMIT).await });
    let msg = tierpool_proto::encode(&tierpool_proto::CoordRequest::Ping);
    let frame =
        tierpool_proto::FrameHeader { kind: tierpool_proto::frame::KIND_COORD_REQUEST, header_len: 1, payload_len: 0 };
    peer.write_all(&[&frame.encode()[..], &msg].concat()).await.unwrap();
    assert!(matches!(server.await.unwrap(), Err(Refusal::NotAHandshake(BadHead::Frame(1)))));
    let mut got = Vec::new();
    peer.read_to_end(&mut got).await.unwrap();
    assert_eq!(&got[HELLO_LEN..], b"TP\x23\x13\x02", "the hello, then a refusal");
}

#[tokio::test]
async fn silent_and_slow_peers_run_out_of_time_on_either_side() {
    let limit = Duration::from_millis(200);
    // A client that never answers the hello, and one that sends half a proof.
    for sent in [0usize, 30] {
        let (mut peer, mut s) = tokio::io::duplex(1024);
        peer.write_all(&hs::proof(&[1; 32], &[1; 32])[..sent]).await.unwrap();
        let t = Instant::now();
        let r = accept(&mut s, &secret(1), limit).await;
        assert!(matches!(r, Err(Refusal::TooSlow(l)) if l == limit), "{r:?}");
        assert!(t.elapsed() >= limit && t.elapsed() < 10 * limit, "{:?}", t.elapsed());
        drop(peer);
    }
    // A server that never says hello (an older tierpool, or not tierpool).
    let (mut c, _silent) = tokio::io::duplex(1024);
    let e = introduce(&mut c, &secret(1).into(), "10.0.0.1:80", limit).await.unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Unavailable,
            "10.0.0.1:80 did not complete the tierpool handshake within 200ms (is it a tierpool server of protocol 35?)"
        )
    );
}

#[tokio::test]
async fn a_peer_that_is_not_a_tierpool_server_is_named() {
    let (mut c, mut s) = tokio::io::duplex(1024);
    s.write_all(b"HTTP/1.1 400 Bad Request\r\n").await.unwrap();
    let e = introduce(&mut c, &secret(1).into(), "10.0.0.1:80", LIMIT).await.unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Protocol,
            "10.0.0.1:80 is not a tierpool server of this version: not a tierpool peer (it sent 4854)"
        )
    );
}
