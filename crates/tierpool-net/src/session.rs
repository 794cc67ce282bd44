//! One server connection: read a frame, hand it to the handler, answer,
//! until the peer leaves or breaks a limit.
//!
//! The handshake comes first: the peer must prove it knows the pool's
//! secret within `handshake_timeout` of accepting, or it is refused and
//! dropped with nothing read beyond its proof (`auth`). Then time limits by
//! phase: each frame header must come within `idle_timeout` of the
//! handshake or the last answer; inside a frame (the rest of its header, its body,
//! waits for the budget) and while answering, `stall_timeout` bounds every
//! step that moves no byte. A frame announcing more than `max_message` or
//! `max_payload` is refused before its body is read.
//!
//! A frame's bytes are charged to the server's budget (`budget.rs`) from
//! the first byte read until the handler has answered; what the handler
//! keeps of the payload (a chunk stored in memory) is its own to account
//! from then on.
//!
//! A malformed message is answered with a `Protocol` error where the frame
//! could be read whole, and ends the connection. A request for the other
//! role (a chunk request sent to the coordinator, say) is answered with an
//! error naming the right one, and the connection stays; so does one whose
//! handler panicked, answered with an `Internal` error. So every whole
//! frame within the limits gets an answer. A dropped peer is logged once,
//! with its address and the reason; a peer that just leaves (end of
//! stream, reset) is not a drop. No locks: the session owns its connection.

use crate::auth::{Refusal, Secret};
use crate::budget::Budget;
use crate::buffers::ChunkBuffers;
use crate::conn::{Connection, Frame};
use crate::frame_io::FrameError;
use crate::limits::Limits;
use crate::stats::{Counters, DropReason, LARGE_PAYLOAD};
use crate::Handler;
use bytes::Bytes;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tierpool_proto::frame::{FrameHeader, KIND_COORD_REQUEST, KIND_WORKER_REQUEST};
use tierpool_proto::{Payload, Service};
use tierpool_types::{ByteSize, Error, ErrorKind, Result};
use tokio::time::Instant;

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub limits: Limits,
    /// What every peer must prove it knows.
    pub secret: Secret,
    pub budget: Arc<Budget>,
    pub counters: Arc<Counters>,
    /// Where chunk-sized payloads are read into, if the server keeps buffers.
    pub buffers: Option<Arc<ChunkBuffers>>,
}

/// How a connection ended.
enum End {
    /// The peer left or the connection failed.
    Left,
    Dropped(DropReason, String),
}

impl From<Refusal> for End {
    fn from(r: Refusal) -> End {
        match r {
            Refusal::Left => End::Left,
            Refusal::TooSlow(_) => End::Dropped(DropReason::HandshakeTimeout, r.to_string()),
            _ => End::Dropped(DropReason::Unauthenticated, r.to_string()),
        }
    }
}

impl From<FrameError> for End {
    fn from(e: FrameError) -> End {
        match e {
            FrameError::Truncated | FrameError::Io(_) => End::Left,
            FrameError::Malformed(e) => End::Dropped(DropReason::Malformed, e.message),
            FrameError::Refused(reason, detail) => End::Dropped(reason, detail),
        }
    }
}

/// Serves `conn` until it ends, then logs a drop and counts it.
pub(crate) async fn serve_conn<H: Handler>(conn: Connection, handler: Arc<H>, shared: Arc<Shared>) {
    let peer = conn.peer().to_string();
    let session = Session { conn, handler, shared: shared.clone() };
    if let End::Dropped(reason, detail) = session.run().await {
        shared.counters.dropped(reason);
        tracing::warn!("dropping connection from {peer}: {reason}: {detail}");
    }
}

struct Session<H> {
    conn: Connection,
    handler: Arc<H>,
    shared: Arc<Shared>,
}

/// The handler's answer; a panic in it becomes an `Internal` error answer
/// (the panic itself is reported by the panic hook), so the peer is told
/// and the connection, whose framing is intact, goes on.
async fn answer<H: Handler>(handler: &H, req: Request<H>, payload: Bytes) -> (Result<Response<H>>, Payload) {
    let mut handling = std::pin::pin!(handler.handle(req, payload));
    let caught = std::future::poll_fn(|cx| match catch_unwind(AssertUnwindSafe(|| handling.as_mut().poll(cx))) {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(answer)) => Poll::Ready(Ok(answer)),
        Err(panic) => Poll::Ready(Err(panic)),
    });
    match caught.await {
        Ok(answer) => answer,
        Err(panic) => {
            let what = tierpool_types::panic_message(&*panic);
            let role = <H::Service as Service>::ROLE;
            tracing::error!("the {role}'s handler panicked: {what}");
            (Err(Error::internal(format!("the {role}'s handler panicked: {what}"))), Payload::empty())
        }
    }
}

/// The wait for a connection's next frame, bounded by the idle timeout.
/// One timer per connection, re-armed lazily: restarting the wait
/// after each answer only moves the deadline, and the timer, when it fires
/// early, is set to the deadline then. So a busy connection costs the
/// timer wheel nothing per request.
struct Wait {
    deadline: Instant,
    limit: Duration,
    reason: DropReason,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// When the timer fires (never after `deadline`, unless re-armed).
    armed: Instant,
}

impl Wait {
    fn new(limit: Duration, reason: DropReason) -> Wait {
        let deadline = Instant::now() + limit;
        let timer = Box::pin(tokio::time::sleep_until(deadline));
        Wait { deadline, limit, reason, timer, armed: deadline }
    }

    fn restart(&mut self, limit: Duration, reason: DropReason) {
        (self.deadline, self.limit, self.reason) = (Instant::now() + limit, limit, reason);
        if self.deadline < self.armed {
            self.arm();
        }
    }

    fn arm(&mut self) {
        self.timer.as_mut().reset(self.deadline);
        self.armed = self.deadline;
    }

    /// `Ok(true)` once a byte of the next frame is there, `Ok(false)` if the
    /// peer left first, `Err` when the deadline passes first.
    async fn for_frame(&mut self, conn: &mut Connection) -> Result<bool, End> {
        loop {
            tokio::select! {
                biased;
                r = conn.readable() => return r.map_err(|e| FrameError::from(e).into()),
                _ = &mut self.timer => {
                    if Instant::now() >= self.deadline {
                        return Err(End::Dropped(self.reason, format!("no frame for {:?}", self.limit)));
                    }
                    self.arm();
                }
            }
        }
    }
}

type Request<H> = <<H as Handler>::Service as Service>::Request;
type Response<H> = <<H as Handler>::Service as Service>::Response;

fn other_role(kind: u8) -> &'static str {
    match kind {
        KIND_COORD_REQUEST => "the coordinator",
        KIND_WORKER_REQUEST => "a worker",
        _ => "no server",
    }
}

impl<H: Handler> Session<H> {
    async fn run(mut self) -> End {
        let l = self.shared.limits.clone();
        if let Err(refused) = self.conn.accept_handshake(&self.shared.secret, l.handshake_timeout).await {
            return refused.into();
        }
        let mut wait = Wait::new(l.idle_timeout, DropReason::IdleTimeout);
        loop {
            match wait.for_frame(&mut self.conn).await {
                Ok(true) => {}
                Ok(false) => return End::Left,
                Err(end) => return end,
            }
            let head = match self.conn.read_head(None, Some(l.stall_timeout)).await {
                Ok(Some(h)) => h,
                Ok(None) => return End::Left,
                Err(e) => return e.into(),
            };
            if let Some(too_large) = self.check_size(&head) {
                return too_large;
            }
            if let Err(end) = self.serve_frame(&head).await {
                return end;
            }
            wait.restart(l.idle_timeout, DropReason::IdleTimeout);
        }
    }

    fn check_size(&self, h: &FrameHeader) -> Option<End> {
        let l = &self.shared.limits;
        let over = |what: &str, len: u32, max: ByteSize| {
            let detail = format!("a {what} of {len} bytes is more than this server's {max}");
            Some(End::Dropped(DropReason::FrameTooLarge, detail))
        };
        if u64::from(h.header_len) > l.max_message.0 {
            return over("message", h.header_len, l.max_message);
        }
        if u64::from(h.payload_len) > l.max_payload.0 {
            return over("payload", h.payload_len, l.max_payload);
        }
        None
    }

    /// Reads the body of the frame `head` begins, has it handled and answers.
    async fn serve_frame(&mut self, head: &FrameHeader) -> Result<(), End> {
        let stall = Some(self.shared.limits.stall_timeout);
        let mut charge = self.shared.budget.frame(u64::from(head.header_len) + u64::from(head.payload_len));
        // A local socket is not a link: its rate would say nothing of one.
        let large = head.payload_len as usize >= LARGE_PAYLOAD && !self.conn.is_local();
        let transfer = large.then(|| self.shared.counters.transfer());
        let frame = self.conn.read_body(head, &mut charge, stall, self.shared.buffers.as_ref()).await?;
        if let Some(t) = transfer {
            t.done(head.payload_len as u64);
        }
        let role = <H::Service as Service>::ROLE;
        if frame.kind != <H::Service as Service>::KIND {
            let e = Error::invalid(format!("this is a {role}; that request is for {}", other_role(frame.kind)));
            drop((frame, charge));
            return Ok(self.conn.send_response(&Err::<(), _>(e), &Payload::empty()).await?);
        }
        let Frame { header, payload, .. } = frame;
        let req = match tierpool_proto::decode::<<H::Service as Service>::Request>(&header) {
            Ok(r) => r,
            Err(e) => {
                drop((header, payload, charge));
                let answer: Result<()> = Err(Error::new(ErrorKind::Protocol, e.message.clone()));
                let _ = self.conn.send_response(&answer, &Payload::empty()).await;
                return Err(End::Dropped(DropReason::Malformed, e.message));
            }
        };
        drop(header);
        let (resp, out) = answer(&*self.handler, req, payload).await;
        let (resp, out) = <H::Service as Service>::detach(resp, out);
        // Answered: what the handler kept of the payload is its own to account.
        drop(charge);
        // Responses are not timed: one that fits in the socket's send buffer
        // is written long before its link has carried it.
        Ok(self.conn.send_response(&resp, &out).await?)
    }
}
