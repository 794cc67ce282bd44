//! The runtime every under-store call runs on.
//!
//! The S3 client (through reqwest) and the HDFS client leave tasks on the
//! runtime a connection was opened on (the HDFS client: on the runtime
//! current when it was built), and keep the connection for the next call,
//! from whatever runtime that comes. A connection opened on a runtime
//! that is not running then hangs every call that takes it: a current-thread
//! runtime runs only while its thread waits on it (the mount's request
//! threads, each Python thread), and one that was dropped runs never. So
//! every call of an [`UnderStore`](crate::UnderStore) runs on a runtime of
//! this module's own, made on the first call in a process, and HDFS clients
//! are built with it current ([`enter`]); a call made on it runs in place.
//!
//! Invariants: the home runtime is never dropped (its threads end with the
//! process); a task a call put on it is aborted when the caller stops
//! waiting for it, so a call dropped by its caller stops at its next await
//! (one being polled on a thread of the home runtime at that moment
//! finishes that poll first). A child made by `fork()` has none of its parent's
//! threads: it makes a home of its own on first use and leaks the
//! parent's (dropping it would touch descriptors the parent still uses;
//! `tierpool_types::PerProcess`).
//! So does the HTTP client the stores share (`connect.rs`), whose kept
//! connections' tasks stayed in the parent; a child must open its stores
//! again (the client's cache of them is per process).
//! Nothing here takes a lock, so a lock held by a parent thread at a fork
//! cannot block a child.

use std::future::Future;
use tierpool_types::PerProcess;
use tokio::runtime::{Builder, EnterGuard, Handle, Runtime};

/// Threads of the home runtime: one per core, 2 to 8 (under-store calls
/// mostly wait on the network and the disk, but TLS and checksums of a
/// fast store take CPU).
fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

static HOME: PerProcess<Runtime> = PerProcess::new();

/// This process's home runtime, made on first use.
fn home() -> &'static Runtime {
    let make = || {
        Builder::new_multi_thread()
            .worker_threads(threads())
            .thread_name("tierpool-under")
            .enable_all()
            .build()
            .expect("cannot start the under-store runtime (out of threads or file descriptors?)")
    };
    HOME.get_or_init_or(make, Runtime::shutdown_background)
}

/// Makes the home runtime the current one until the guard drops: for a
/// client that keeps the runtime current when it is built (HDFS's).
pub(crate) fn enter() -> EnterGuard<'static> {
    home().enter()
}

/// Runs `call` on the home runtime (in place when already on it) and
/// returns what it returns; a panic in it goes on in the caller.
pub(crate) async fn run<T, F>(call: F) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = home();
    if Handle::try_current().is_ok_and(|h| h.id() == rt.handle().id()) {
        return call.await;
    }
    let mut task = AbortOnDrop(rt.spawn(call));
    match (&mut task.0).await {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("an under-store call was cancelled on its runtime: {e}"),
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_from_another_runtime_runs_on_the_home_runtime() {
        let other = Builder::new_current_thread().enable_all().build().unwrap();
        let on = other.block_on(run(async { Handle::current().id() }));
        assert_eq!(on, home().handle().id());
        assert_ne!(on, other.handle().id());
    }

    #[test]
    fn a_call_made_on_the_home_runtime_runs_in_place() {
        let (outer, inner) = home().block_on(async {
            let outer = Handle::current().id();
            (outer, run(async { Handle::current().id() }).await)
        });
        assert_eq!(outer, inner);
    }

    #[test]
    fn a_call_whose_caller_stops_waiting_is_stopped() {
        let rt = Builder::new_current_thread().enable_all().build().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        struct Dropped(std::sync::mpsc::Sender<()>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        rt.block_on(async {
            let d = Dropped(tx);
            let call = run(async move {
                let _held = d;
                std::future::pending::<()>().await
            });
            let _ = tokio::time::timeout(std::time::Duration::from_millis(20), call).await;
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the call's task was aborted and dropped");
    }

    #[test]
    fn a_panic_in_a_call_reaches_its_caller() {
        let rt = Builder::new_current_thread().enable_all().build().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(run(async { panic!("inside") }))));
        assert_eq!(tierpool_types::panic_message(&*r.unwrap_err()), "inside");
    }
}
