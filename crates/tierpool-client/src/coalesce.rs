//! Concurrent small requests of one client share round trips: a lane lets
//! up to `limit` requests of its kind travel on their own, and calls made
//! while that many are in flight wait in its queue; each request that comes
//! back sends what waits as one batch (`StatMany`, `MetaMany`). A caller
//! alone sends its request at once, as without a lane; 32 tasks of one
//! process stat'ing or writing small files send about `32 / limit` calls
//! a request, so the coordinator wakes, reads, answers and (for changes)
//! waits for the log once for all of them.
//!
//! Invariants:
//! - at most `limit` requests of a lane are in flight (single or batched);
//! - a call is sent once: a batch carries only calls that were queued, and
//!   takes them off the queue under the lock that queued them;
//! - a queued call is answered with its own result or its batch's error, or
//!   dropped with its caller (then it is not sent, if it was not yet);
//! - a request that ends (answered, failed, or dropped with its caller)
//!   hands its place to the queue before freeing it, so nothing queued waits
//!   for a request that is not in flight. The batch is sent by a task of
//!   the runtime the lane was made on (the client's), so a caller is
//!   answered when its own request is, not after the batch that follows
//!   it. A task dropped unrun (that runtime shutting down) still hands its
//!   place on, and its callers are told.
//!
//! A queued call waits for a request in flight before its own is sent, so
//! it may take up to twice as long to fail as a call alone (a coordinator
//! that cannot be reached is retried for a while by each).

use parking_lot::Mutex;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tierpool_types::{Error, Result};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Calls of one kind, at most `limit` in flight, the rest batched.
pub(crate) struct Lane<T, R> {
    limit: usize,
    max_batch: usize,
    rt: Handle,
    state: Mutex<State<T, R>>,
    /// Calls sent in a request with others, so far.
    shared: AtomicU64,
}

struct State<T, R> {
    in_flight: usize,
    queue: Vec<(T, oneshot::Sender<Result<R>>)>,
}

/// Sends calls (one or a batch) and answers each, in order: one result per
/// call. A failure of the whole request is every call's error.
pub(crate) trait Batches<T, R>: Clone + Send + Sync + 'static {
    fn send(&self, calls: Vec<T>) -> impl Future<Output = Vec<Result<R>>> + Send + 'static;
}

impl<T: Send + 'static, R: Send + 'static> Lane<T, R> {
    /// A lane on the current runtime; `limit` 0 sends every call alone.
    pub(crate) fn new(limit: usize, max_batch: usize) -> Lane<T, R> {
        Lane::on(Handle::current(), limit, max_batch)
    }

    /// A lane whose batches are sent by tasks of `rt`.
    pub(crate) fn on(rt: Handle, limit: usize, max_batch: usize) -> Lane<T, R> {
        Lane {
            limit,
            max_batch: max_batch.max(1),
            rt,
            state: Mutex::new(State { in_flight: 0, queue: Vec::new() }),
            shared: AtomicU64::new(0),
        }
    }

    /// `call`'s result, sent alone or in a batch with others.
    pub(crate) async fn call<S: Batches<T, R>>(self: &Arc<Self>, call: T, sender: S) -> Result<R> {
        if self.limit == 0 {
            return one(sender.send(vec![call]).await);
        }
        let waiting = {
            let mut s = self.state.lock();
            if s.in_flight < self.limit {
                s.in_flight += 1;
                Ok(call)
            } else {
                let (tx, rx) = oneshot::channel();
                s.queue.push((call, tx));
                Err(rx)
            }
        };
        match waiting {
            Ok(call) => {
                let _place = Place { lane: self.clone(), sender: sender.clone() };
                one(sender.send(vec![call]).await)
            }
            Err(rx) => rx.await.unwrap_or_else(|_| Err(Error::internal("a batched request ended unanswered"))),
        }
    }

    /// A request ended: the queue's next batch takes its place, else the place is free.
    fn hand_on<S: Batches<T, R>>(self: &Arc<Self>, sender: S) {
        let batch: Vec<_> = {
            let mut s = self.state.lock();
            // Callers that left no longer need their calls sent.
            s.queue.retain(|(_, tx)| !tx.is_closed());
            if s.queue.is_empty() {
                s.in_flight -= 1;
                return;
            }
            let n = s.queue.len().min(self.max_batch);
            s.queue.drain(..n).collect()
        };
        // Made before the task: a task dropped unrun (its runtime shutting
        // down) still hands the place on, and its callers are told.
        let place = Place { lane: self.clone(), sender: sender.clone() };
        self.rt.spawn(async move {
            let (calls, answers): (Vec<T>, Vec<_>) = batch.into_iter().unzip();
            let n = calls.len();
            if n > 1 {
                place.lane.shared.fetch_add(n as u64, Ordering::Relaxed);
            }
            let mut results = sender.send(calls).await;
            if results.len() != n {
                let e = Error::internal(format!("a batch of {n} calls came back with {} results", results.len()));
                results = (0..n).map(|_| Err(e.clone())).collect();
            }
            for (tx, r) in answers.into_iter().zip(results) {
                let _ = tx.send(r);
            }
        });
    }

    /// The runtime whose tasks send this lane's batches.
    pub(crate) fn runtime(&self) -> &Handle {
        &self.rt
    }

    /// Calls sent in a request with others, so far.
    pub(crate) fn shared(&self) -> u64 {
        self.shared.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    fn in_flight(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.in_flight, s.queue.len())
    }
}

fn one<R>(mut results: Vec<Result<R>>) -> Result<R> {
    match (results.pop(), results.is_empty()) {
        (Some(r), true) => r,
        _ => Err(Error::internal("a single call came back with other than one result")),
    }
}

/// A place in flight; when it ends, however it ends, it is handed on.
struct Place<T: Send + 'static, R: Send + 'static, S: Batches<T, R>> {
    lane: Arc<Lane<T, R>>,
    sender: S,
}

impl<T: Send + 'static, R: Send + 'static, S: Batches<T, R>> Drop for Place<T, R, S> {
    fn drop(&mut self) {
        self.lane.hand_on(self.sender.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tierpool_types::ErrorKind;

    /// Answers each call `n` with `n * 10` (an error for 13), after `delay`;
    /// records the size of every request and the most in flight at once.
    #[derive(Clone, Default)]
    struct Recorder {
        sizes: Arc<Mutex<Vec<usize>>>,
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        delay_ms: u64,
        fail_batches: bool,
    }

    impl Batches<u32, u32> for Recorder {
        fn send(&self, calls: Vec<u32>) -> impl Future<Output = Vec<Result<u32>>> + Send + 'static {
            let me = self.clone();
            async move {
                me.sizes.lock().push(calls.len());
                let now = me.now.fetch_add(1, Ordering::SeqCst) + 1;
                me.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(me.delay_ms)).await;
                me.now.fetch_sub(1, Ordering::SeqCst);
                if me.fail_batches && calls.len() > 1 {
                    return calls.iter().map(|_| Err(Error::new(ErrorKind::Unavailable, "gone"))).collect();
                }
                calls.into_iter().map(|n| if n == 13 { Err(Error::invalid("13")) } else { Ok(n * 10) }).collect()
            }
        }
    }

    async fn run_all(lane: &Arc<Lane<u32, u32>>, rec: &Recorder, n: u32) -> Vec<Result<u32>> {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (lane, rec) = (lane.clone(), rec.clone());
                tokio::spawn(async move { lane.call(i, rec).await })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_gets_its_own_answer_and_no_more_than_the_limit_are_in_flight() {
        let lane = Arc::new(Lane::new(2, 8));
        let rec = Recorder { delay_ms: 5, ..Default::default() };
        let out = run_all(&lane, &rec, 100).await;
        for (i, r) in out.into_iter().enumerate() {
            match i {
                13 => assert_eq!(r.unwrap_err().message, "13"),
                i => assert_eq!(r.unwrap(), i as u32 * 10),
            }
        }
        let sizes = rec.sizes.lock().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 100, "each call sent exactly once: {sizes:?}");
        assert!(sizes.iter().all(|s| (1..=8).contains(s)), "{sizes:?}");
        assert!(sizes.len() < 100, "concurrent calls were batched: {sizes:?}");
        assert_eq!(lane.shared(), sizes.iter().filter(|s| **s > 1).sum::<usize>() as u64);
        assert!(rec.most.load(Ordering::SeqCst) <= 2);
        // A batch's task answers its callers before it hands its place on.
        until(&lane, (0, 0)).await;
    }

    #[tokio::test]
    async fn a_caller_alone_sends_its_call_alone() {
        let lane = Arc::new(Lane::new(2, 8));
        let rec = Recorder::default();
        for i in 0..5 {
            assert_eq!(lane.call(i, rec.clone()).await.unwrap(), i * 10);
        }
        assert_eq!(*rec.sizes.lock(), vec![1; 5]);
        assert_eq!(lane.in_flight(), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_batch_fails_each_of_its_calls_and_the_lane_goes_on() {
        let lane = Arc::new(Lane::new(1, 8));
        let rec = Recorder { delay_ms: 5, fail_batches: true, ..Default::default() };
        let out = run_all(&lane, &rec, 20).await;
        let sizes = rec.sizes.lock().clone();
        let failed = out.iter().filter(|r| r.as_ref().is_err_and(|e| e.kind == ErrorKind::Unavailable)).count();
        assert_eq!(failed, sizes.iter().filter(|s| **s > 1).sum::<usize>(), "{sizes:?}");
        assert!(failed > 0);
        until(&lane, (0, 0)).await;
        assert_eq!(lane.call(3, rec.clone()).await.unwrap(), 30);
    }

    /// Waits (up to 10 s) until the lane has `want` in flight and queued.
    async fn until(lane: &Arc<Lane<u32, u32>>, want: (usize, usize)) {
        for _ in 0..10_000 {
            if lane.in_flight() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the lane never had {want:?} in flight and queued: {:?}", lane.in_flight());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_that_leave_free_their_places_and_their_queued_calls_are_not_sent() {
        let lane = Arc::new(Lane::new(1, 8));
        let rec = Recorder { delay_ms: 60_000, ..Default::default() };
        let call = |i: u32| {
            let (lane, rec) = (lane.clone(), rec.clone());
            tokio::spawn(async move { lane.call(i, rec).await })
        };
        // The first takes the only place; the next five wait in the queue.
        let first = call(0);
        until(&lane, (1, 0)).await;
        let mut queued: Vec<_> = (1..6).map(call).collect();
        until(&lane, (1, 5)).await;
        let last = queued.pop().unwrap();
        for q in queued {
            q.abort();
            assert!(q.await.unwrap_err().is_cancelled());
        }
        // The first leaves: its place goes to the one caller still waiting,
        // whose call is sent alone.
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        until(&lane, (1, 0)).await;
        for _ in 0..10_000 {
            if rec.sizes.lock().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(*rec.sizes.lock(), vec![1, 1]);
        // A call sent stays in flight (holding its place) even if its
        // caller leaves: it cannot be taken back.
        last.abort();
        assert!(last.await.unwrap_err().is_cancelled());
        assert_eq!(lane.in_flight(), (1, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lane_of_limit_zero_sends_every_call_alone() {
        let lane = Arc::new(Lane::new(0, 8));
        let rec = Recorder { delay_ms: 5, ..Default::default() };
        let out = run_all(&lane, &rec, 20).await;
        assert_eq!(out.iter().filter(|r| r.is_ok()).count(), 19);
        assert_eq!(*rec.sizes.lock(), vec![1; 20]);
        assert!(rec.most.load(Ordering::SeqCst) > 1, "calls went at once");
        assert_eq!((lane.in_flight(), lane.shared()), ((0, 0), 0));
    }

    #[test]
    fn a_batch_whose_runtime_is_gone_answers_its_callers_and_frees_its_place() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let lane: Arc<Lane<u32, u32>> = rt.block_on(async { Arc::new(Lane::new(1, 8)) });
        let rec = Recorder { delay_ms: 60_000, ..Default::default() };
        let first = rt.spawn({
            let (lane, rec) = (lane.clone(), rec.clone());
            async move { lane.call(0, rec).await }
        });
        while lane.in_flight() != (1, 0) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // A caller on another runtime waits in the queue.
        let queued = std::thread::spawn({
            let (lane, rec) = (lane.clone(), rec.clone());
            move || {
                let own = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                own.block_on(lane.call(1, rec))
            }
        });
        while lane.in_flight() != (1, 1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The first request goes with its runtime; the batch it hands its
        // place to has no runtime to run on, and is dropped unrun.
        drop(first);
        rt.shutdown_background();
        let e = queued.join().unwrap().unwrap_err();
        assert_eq!(e.message, "a batched request ended unanswered");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lane.in_flight() != (0, 0) {
            assert!(std::time::Instant::now() < deadline, "the place never came back: {:?}", lane.in_flight());
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(*rec.sizes.lock(), vec![1], "the batch was never sent");
    }
}
