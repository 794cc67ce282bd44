//! Frame fuzzing of both servers of a real pool (a coordinator and one
//! worker): a few thousand seeded cases of arbitrary bytes, of valid
//! frames carrying every request variant with generated (often hostile)
//! fields, and of such frames with bytes flipped or cut. Each case goes on
//! its own connection, followed by the end of the stream.
//!
//! For each case the test computes what the server owes: a response for
//! every whole frame it accepts, up to and including the first whose
//! message does not decode (answered, then the connection is dropped),
//! and nothing after a frame it refuses (bad header, over its limits) or
//! one cut short. It asserts exactly that many response frames come back,
//! each decodable, that no server process dies, and that afterwards the
//! pool still stores and returns exact bytes.
//!
//! No answer may report that a handler panicked (the server answers a
//! panic with an `Internal` error rather than crash; the fuzzing found one,
//! fixed since, in the tier's message for a range ending past u64::MAX).
//! Requests that would legitimately break the last check are not sent
//! (see [`forbidden_coord`] and [`forbidden_worker`]).

mod common;
#[path = "fuzz_frames/strategies.rs"]
mod strategies;

use common::{authenticated, data, running, Pool};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tierpool_meta::MetaOp;
use tierpool_net::{Credentials, Limits};
use tierpool_proto::frame::{FrameHeader, FRAME_HEADER_LEN, KIND_RESPONSE};
use tierpool_proto::{CoordRequest, CoordResponse, Service, WorkerRequest, WorkerResponse};
use tierpool_types::{Error, ErrorKind, MAX_CHUNK_SIZE};

const SEED: [u8; 32] = *b"tierpool frames: seeded fuzzing.";
const CASES_PER_SERVER: usize = 2000;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Server {
    Coordinator,
    Worker,
}

impl Server {
    fn kind(self) -> u8 {
        match self {
            Server::Coordinator => tierpool_proto::Coordinator::KIND,
            Server::Worker => tierpool_proto::Worker::KIND,
        }
    }

    fn other(self) -> Server {
        match self {
            Server::Coordinator => Server::Worker,
            Server::Worker => Server::Coordinator,
        }
    }
}

fn frame(kind: u8, msg: &[u8], payload: &[u8]) -> Vec<u8> {
    let fh = FrameHeader { kind, header_len: msg.len() as u32, payload_len: payload.len() as u32 };
    [&fh.encode()[..], msg, payload].concat()
}

/// One generated request for `server`, framed.
fn request_frame(server: Server) -> BoxedStrategy<Vec<u8>> {
    let kind = server.kind();
    match server {
        Server::Coordinator => {
            strategies::coord_request().prop_map(move |(r, p)| frame(kind, &tierpool_proto::encode(&r), &p)).boxed()
        }
        Server::Worker => {
            strategies::worker_request().prop_map(move |(r, p)| frame(kind, &tierpool_proto::encode(&r), &p)).boxed()
        }
    }
}

/// One to four frames: requests for `server`, now and then one for the
/// other server or one of the response kind.
fn valid_case(server: Server) -> BoxedStrategy<Vec<u8>> {
    let response = prop::collection::vec(any::<u8>(), 1..32).prop_map(|b| frame(KIND_RESPONSE, &b, &[]));
    let one = prop_oneof![8 => request_frame(server), 1 => request_frame(server.other()), 1 => response];
    prop::collection::vec(one, 1..4).prop_map(|frames| frames.concat()).boxed()
}

/// A valid case with bytes flipped, a run of 0xff inserted (inflating a
/// length or count) and/or its end cut off.
fn mutated_case(server: Server) -> BoxedStrategy<Vec<u8>> {
    let flips = prop::collection::vec((any::<Index>(), 1..=255u8), 0..4);
    let inflate = proptest::option::of((any::<Index>(), 1..6usize));
    (valid_case(server), flips, inflate, proptest::option::of(any::<Index>()))
        .prop_map(|(mut b, flips, inflate, cut)| {
            for (at, x) in flips {
                let i = at.index(b.len());
                b[i] ^= x;
            }
            if let Some((at, n)) = inflate {
                let i = at.index(b.len());
                b.splice(i..i, std::iter::repeat_n(0xff, n));
            }
            if let Some(at) = cut {
                b.truncate(at.index(b.len()));
            }
            b
        })
        .boxed()
}

/// Bytes, some starting like a frame of this protocol.
fn arbitrary_case(server: Server) -> BoxedStrategy<Vec<u8>> {
    let kind = server.kind();
    let bytes = prop::collection::vec(any::<u8>(), 0..300);
    let v = tierpool_proto::PROTOCOL_VERSION;
    prop_oneof![bytes.clone(), bytes.prop_map(move |b| [&[b'T', b'P', v, kind][..], &b].concat())].boxed()
}

fn case(server: Server) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![2 => valid_case(server), 2 => mutated_case(server), 1 => arbitrary_case(server)].boxed()
}

/// Requests the coordinator would rightly carry out to the pool's harm: a
/// worker registered at a made-up address takes partitions from the real
/// one; allocating most of the inode id space leaves none for the final put;
/// the root placed `local-only` sends the final put to a worker on this
/// machine's host label, which the test's worker does not carry.
fn forbidden_coord(r: &CoordRequest) -> bool {
    match r {
        CoordRequest::Meta { op, .. } => forbidden_op(op),
        CoordRequest::MetaMany { ops, .. } => ops.iter().any(forbidden_op),
        CoordRequest::MetaStat { op, .. } => forbidden_op(op),
        CoordRequest::MetaManyStat { ops, .. } => ops.iter().any(forbidden_op),
        _ => false,
    }
}

fn forbidden_op(op: &MetaOp) -> bool {
    match op {
        MetaOp::RegisterWorker { .. } => true,
        MetaOp::SetPlacement { placement, .. } => *placement == tierpool_types::Placement::LocalOnly,
        MetaOp::AllocInodes { count } => *count > 1 << 40 && *count < u64::MAX - (1 << 40),
        _ => false,
    }
}

/// Zero-filled chunks of more than 1 MiB each would soon fill the worker;
/// a made-up partition table would have it serve by that table.
fn forbidden_worker(r: &WorkerRequest) -> bool {
    matches!(r, WorkerRequest::CreateChunk { len, .. } if *len > 1 << 20 && *len <= MAX_CHUNK_SIZE)
        || matches!(r, WorkerRequest::Table { .. })
}

/// How a decodable request for `server` is treated.
enum Verdict {
    Send { may_panic: bool },
    Forbidden,
}

fn verdict(server: Server, msg: &[u8]) -> Option<Verdict> {
    let v = |forbidden: bool, may_panic: bool| if forbidden { Verdict::Forbidden } else { Verdict::Send { may_panic } };
    match server {
        Server::Coordinator => tierpool_proto::decode::<CoordRequest>(msg).ok().map(|r| v(forbidden_coord(&r), false)),
        Server::Worker => tierpool_proto::decode::<WorkerRequest>(msg).ok().map(|r| v(forbidden_worker(&r), false)),
    }
}

/// The responses `server` owes `bytes` (see the module header), each
/// saying whether it may report the known panic; `None` if they carry a
/// forbidden request.
fn owed(server: Server, bytes: &[u8]) -> Option<Vec<bool>> {
    let limits = Limits::default();
    let (mut at, mut owed) = (0, Vec::new());
    while bytes.len() - at >= FRAME_HEADER_LEN {
        let Ok(fh) = FrameHeader::decode(bytes[at..at + FRAME_HEADER_LEN].try_into().unwrap()) else { break };
        if u64::from(fh.header_len) > limits.max_message.0 || u64::from(fh.payload_len) > limits.max_payload.0 {
            break;
        }
        let msg_at = at + FRAME_HEADER_LEN;
        let end = msg_at + fh.header_len as usize + fh.payload_len as usize;
        if end > bytes.len() {
            break;
        }
        if fh.kind != server.kind() {
            owed.push(false);
        } else {
            match verdict(server, &bytes[msg_at..msg_at + fh.header_len as usize]) {
                None => {
                    owed.push(false);
                    break;
                }
                Some(Verdict::Forbidden) => return None,
                Some(Verdict::Send { may_panic }) => owed.push(may_panic),
            }
        }
        at = end;
    }
    Some(owed)
}

/// What came back for one case: per response frame, whether it is a
/// success, and whether it reports a panic of the handler.
#[derive(Debug, Default)]
struct Answers {
    ok: Vec<bool>,
    panicked: Vec<bool>,
}

/// Whether a response body decodes, and if so, as a success, and as a panic.
fn classify(server: Server, msg: &[u8]) -> Option<(bool, bool)> {
    let kind = |r: Result<(), Error>| match r {
        Ok(()) => (true, false),
        Err(e) => (false, e.kind == ErrorKind::Internal && e.message.contains("handler panicked")),
    };
    match server {
        Server::Coordinator => {
            tierpool_proto::decode::<Result<CoordResponse, Error>>(msg).ok().map(|r| kind(r.map(drop)))
        }
        Server::Worker => tierpool_proto::decode::<Result<WorkerResponse, Error>>(msg).ok().map(|r| kind(r.map(drop))),
    }
}

/// Sends `bytes` and the end of the stream; reads the response frames
/// until the server closes, checking each is whole and decodes.
fn exchange(addr: &str, creds: &Credentials, server: Server, bytes: &[u8]) -> Result<Answers, String> {
    let mut s = authenticated(addr, creds);
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may drop the connection before taking every byte.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut got = Answers::default();
    loop {
        let n = got.ok.len();
        let mut head = [0u8; FRAME_HEADER_LEN];
        match s.read(&mut head[..1]) {
            Ok(0) => return Ok(got),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => return Err(format!("after {n} responses: {e}")),
            Ok(_) => {}
        }
        s.read_exact(&mut head[1..]).map_err(|e| format!("response {n} cut short: {e}"))?;
        let fh = FrameHeader::decode(&head).map_err(|e| format!("response {n}: {e}"))?;
        if fh.kind != KIND_RESPONSE {
            return Err(format!("response {n} is of kind {}", fh.kind));
        }
        let mut body = vec![0u8; fh.header_len as usize + fh.payload_len as usize];
        s.read_exact(&mut body).map_err(|e| format!("response {n} cut short: {e}"))?;
        let msg = &body[..fh.header_len as usize];
        let (ok, panicked) =
            classify(server, msg).ok_or_else(|| format!("response {n} does not decode: {msg:02x?}"))?;
        got.ok.push(ok);
        got.panicked.push(panicked);
    }
}

/// Whether `got` is what `owed` says, and the panics only known ones.
fn as_owed(owed: &[bool], got: &Answers) -> bool {
    got.ok.len() == owed.len() && got.panicked.iter().zip(owed).all(|(panicked, may)| !panicked || *may)
}

struct Case {
    server: Server,
    bytes: Vec<u8>,
    owed: Vec<bool>,
}

/// The seeded cases for both servers, forbidden ones left out; and how many were.
fn cases() -> (Vec<Case>, usize) {
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &SEED));
    let (mut out, mut skipped) = (Vec::new(), 0);
    for server in [Server::Coordinator, Server::Worker] {
        let strategy = case(server);
        for _ in 0..CASES_PER_SERVER {
            let bytes = strategy.new_tree(&mut runner).unwrap().current();
            match owed(server, &bytes) {
                Some(owed) => out.push(Case { server, bytes, owed }),
                None => skipped += 1,
            }
        }
    }
    (out, skipped)
}

/// What running the cases found.
#[derive(Default)]
struct Tally {
    failures: Vec<String>,
    ok: usize,
    known_panics: usize,
}

/// Runs every case on `threads` threads, each on a connection whose handshake is done.
fn run(cases: &[Case], addrs: [&str; 2], creds: &Credentials, threads: usize) -> Tally {
    let (next, tally) = (AtomicUsize::new(0), Mutex::new(Tally::default()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = cases.get(i) else { return };
                let addr = addrs[(c.server == Server::Worker) as usize];
                let got = exchange(addr, creds, c.server, &c.bytes);
                let mut t = tally.lock().unwrap();
                match got {
                    Ok(got) if as_owed(&c.owed, &got) => {
                        t.ok += got.ok.iter().filter(|ok| **ok).count();
                        t.known_panics += got.panicked.iter().filter(|p| **p).count();
                    }
                    got => t.failures.push(format!(
                        "case {i} to the {:?}: owed {} responses (may panic: {:?}), got {got:?}; bytes {:02x?}",
                        c.server,
                        c.owed.len(),
                        c.owed,
                        &c.bytes[..c.bytes.len().min(96)]
                    )),
                }
            });
        }
    });
    tally.into_inner().unwrap()
}

#[test]
fn servers_answer_every_whole_frame_and_survive_fuzzed_frames() {
    // Every variant of both enums is found on the wire (one that did not
    // decode from zeros would be missed), and each has a strategy.
    assert_eq!(strategies::every_variant::<CoordRequest>().len(), 35);
    assert_eq!(strategies::every_variant::<WorkerRequest>().len(), 25);
    let mut pool = Pool::start(1, "64MiB", "256MiB");
    let worker = pool.status()["workers"][0]["address"].as_str().unwrap().to_string();
    let t = Instant::now();
    let (cases, skipped) = cases();
    let owed: usize = cases.iter().map(|c| c.owed.len()).sum();
    eprintln!("generated {} cases ({skipped} forbidden left out) in {:?}", cases.len(), t.elapsed());
    let t = Instant::now();
    let Tally { failures, ok, known_panics } = run(&cases, [&pool.addr, &worker], &pool.credentials(), 4);
    eprintln!("sent them in {:?}: {owed} responses owed, {ok} successes", t.elapsed());
    assert_eq!(known_panics, 0, "no request may make a handler panic");
    assert!(running(pool.coordinator.as_mut().unwrap()), "the coordinator died");
    assert!(running(pool.workers[0].child.as_mut().unwrap()), "the worker died");
    assert!(failures.is_empty(), "{} failures, first: {:#?}", failures.len(), &failures[..failures.len().min(5)]);
    let bytes = data(77, 300_000);
    pool.put("/after-fuzzing", &bytes);
    assert_eq!(pool.get("/after-fuzzing"), bytes);
}
