//! A handler that panics costs its request only: the peer gets an
//! `Internal` error answer and its connection goes on.

mod common;

use common::*;
use std::time::Duration;
use tierpool_net::{Dropped, Limits};
use tierpool_proto::{Worker, WorkerRequest, WorkerResponse};
use tierpool_types::ErrorKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_an_internal_error_and_the_connection_stays() {
    let (addr, stats) = start(Limits::default(), Duration::ZERO).await;
    let mut conn = connect(&addr).await;
    let e = conn.call::<Worker>(&WorkerRequest::Stats, &[]).await.unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Internal, "the worker's handler panicked: no figures kept here")
    );
    let (r, _) = conn.call::<Worker>(&WorkerRequest::Ping, &[]).await.unwrap();
    assert_eq!(r, WorkerResponse::Pong);
    let s = stats.snapshot();
    assert_eq!((s.connections_accepted, s.bytes_held, s.dropped), (1, 0, Dropped::default()));
}
