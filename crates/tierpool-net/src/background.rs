//! Background loops: named work repeated every period on the runtime, with
//! one way to start, stop and report errors (the coordinator's policy tick,
//! a worker's heartbeat, a mount's hold renewal).
//!
//! A loop logs its own errors, once per outage: the first failure after a
//! success at `warn`, repeats at `debug`, the recovery at `info`, so a peer
//! down for an hour fills no log. A loop stops when its [`Background`]
//! handle is dropped or stopped, or when a step returns [`Step::Stop`].

use std::future::Future;
use std::time::Duration;
use tierpool_types::Result;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// What a loop does after a step.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Continue,
    /// The loop's work is over (what it served is gone).
    Stop,
}

/// A running loop; dropping it stops the loop.
pub struct Background {
    name: &'static str,
    task: JoinHandle<()>,
}

impl Background {
    /// Runs `step` every `period` on the current runtime, the first time at once.
    pub fn every<F, Fut>(name: &'static str, period: Duration, step: F) -> Background
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Step>> + Send + 'static,
    {
        Background::every_on(&Handle::current(), name, period, step)
    }

    /// [`Background::every`] on the runtime of `rt`.
    pub fn every_on<F, Fut>(rt: &Handle, name: &'static str, period: Duration, mut step: F) -> Background
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Step>> + Send + 'static,
    {
        let task = rt.spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tick.tick().await;
                match step().await {
                    Ok(Step::Continue) => {
                        if std::mem::take(&mut failing) {
                            tracing::info!("{name}: working again");
                        }
                    }
                    Ok(Step::Stop) => return,
                    Err(e) if failing => tracing::debug!("{name}: {e}"),
                    Err(e) => {
                        failing = true;
                        tracing::warn!("{name}: {e} (retrying every {period:?})");
                    }
                }
            }
        });
        Background { name, task }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the loop has ended by itself.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the loop (a step in progress is cancelled at its next await).
    pub fn stop(self) {
        drop(self)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.task.abort();
    }
}
