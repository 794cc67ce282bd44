//! The byte budget of one server: every byte a frame holds is charged
//! before it is allocated and released when the frame is done.
//!
//! Each frame first spends its connection's allowance ([`ALLOWANCE`]
//! bytes, set aside for every possible connection, so never waited for).
//! A frame that outgrows it reserves the whole rest of its length at once
//! from a shared byte-counting semaphore, whose permits are the budget
//! less all allowances, waiting in line (first come, first served) until
//! frames before it give enough back. Memory is still allocated only as
//! bytes arrive; reserving the rest up front means a frame holding part of
//! the shared budget never waits for more, so frames cannot deadlock each
//! other half-read, and a peer must send a whole allowance before its
//! claim weighs on anyone.
//!
//! Invariant: the `held` counter is raised only after the bytes are
//! granted and lowered when the [`Charge`] holding them drops, so it never
//! exceeds the budget (see [`crate::Limits::validate`]). A cancelled wait
//! takes nothing. No locks: a semaphore and the server's atomic counters.

use crate::limits::{Limits, ALLOWANCE};
use crate::stats::Counters;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) struct Budget {
    shared: Arc<Semaphore>,
    shared_total: u64,
    counters: Arc<Counters>,
}

/// More bytes than the shared budget holds in all: they could never be granted.
#[derive(Debug)]
pub(crate) struct Unaffordable {
    pub asked: u64,
    pub total: u64,
}

impl Budget {
    pub(crate) fn new(limits: &Limits, counters: Arc<Counters>) -> Arc<Budget> {
        let shared_total = limits.shared().min(Semaphore::MAX_PERMITS as u64);
        Arc::new(Budget { shared: Arc::new(Semaphore::new(shared_total as usize)), shared_total, counters })
    }

    /// The charge of a new frame whose body is `len` bytes long.
    pub(crate) fn frame(self: &Arc<Self>, len: u64) -> Charge {
        Charge { budget: Some(self.clone()), len, allowance: ALLOWANCE, held: 0, reserved: None }
    }
}

/// The bytes one frame holds; dropping it gives them back.
pub(crate) struct Charge {
    budget: Option<Arc<Budget>>,
    /// The frame's body length.
    len: u64,
    /// What is left of the allowance.
    allowance: u64,
    /// Bytes charged, allowance and shared together.
    held: u64,
    /// The rest of the frame, once it outgrew its allowance.
    reserved: Option<OwnedSemaphorePermit>,
}

impl Charge {
    /// No budget: the client side, bounded by the protocol maxima only.
    pub(crate) fn unbounded() -> Charge {
        Charge { budget: None, len: 0, allowance: 0, held: 0, reserved: None }
    }

    /// `step`, cut to what is left of the allowance if any is, so that a
    /// frame reserves shared bytes only once its allowance is all used.
    pub(crate) fn fit(&self, step: usize) -> usize {
        match self.allowance {
            0 => step,
            left => step.min(left as usize),
        }
    }

    /// Charges `n` more bytes: from the allowance while it lasts; beyond
    /// it, reserves the rest of the frame from the shared budget, waiting
    /// until other frames give enough back.
    pub(crate) async fn grow(&mut self, n: u64) -> Result<(), Unaffordable> {
        let Some(budget) = self.budget.clone() else { return Ok(()) };
        if self.reserved.is_some() {
            return Ok(());
        }
        if n <= self.allowance {
            self.allowance -= n;
            self.held += n;
            budget.counters.charged(n);
            return Ok(());
        }
        let rest = self.len.saturating_sub(self.held).max(n);
        if rest > budget.shared_total || rest > u64::from(u32::MAX) {
            return Err(Unaffordable { asked: rest, total: budget.shared_total });
        }
        let permit = (budget.shared.clone().acquire_many_owned(rest as u32).await)
            .expect("the budget's semaphore is never closed");
        self.reserved = Some(permit);
        self.allowance = 0;
        self.held += rest;
        budget.counters.charged(rest);
        Ok(())
    }

    /// Bytes this frame holds.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.counters.released(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_types::ByteSize;

    fn budget(conns: usize, shared: u64) -> (Arc<Budget>, Arc<Counters>) {
        let limits =
            Limits { budget: ByteSize(conns as u64 * ALLOWANCE + shared), max_connections: conns, ..Limits::default() };
        let counters = Counters::new(limits.budget);
        (Budget::new(&limits, counters.clone()), counters)
    }

    fn held(c: &Arc<Counters>) -> u64 {
        crate::StatsHandle(c.clone()).snapshot().bytes_held
    }

    #[tokio::test]
    async fn allowance_first_then_the_rest_of_the_frame_at_once() {
        let (b, c) = budget(2, 1000);
        let mut a = b.frame(ALLOWANCE + 300);
        assert_eq!(a.fit(1 << 20), ALLOWANCE as usize);
        a.grow(ALLOWANCE - 10).await.unwrap();
        assert_eq!((held(&c), b.shared.available_permits()), (ALLOWANCE - 10, 1000));
        assert_eq!(a.fit(1 << 20), 10);
        a.grow(10).await.unwrap();
        a.grow(100).await.unwrap();
        assert_eq!((a.held(), held(&c), b.shared.available_permits()), (ALLOWANCE + 300, ALLOWANCE + 300, 700));
        a.grow(200).await.unwrap();
        assert_eq!((held(&c), a.fit(1 << 20)), (ALLOWANCE + 300, 1 << 20), "the rest was reserved");
        drop(a);
        assert_eq!((held(&c), b.shared.available_permits()), (0, 1000));
    }

    #[tokio::test]
    async fn a_frame_waits_until_bytes_are_given_back() {
        let (b, c) = budget(2, 1000);
        let mut a = b.frame(ALLOWANCE + 800);
        a.grow(ALLOWANCE).await.unwrap();
        a.grow(1).await.unwrap();
        let mut second = b.frame(ALLOWANCE + 300);
        second.grow(ALLOWANCE).await.unwrap();
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), second.grow(1)).await;
        assert!(waiting.is_err(), "300 bytes granted with 200 left");
        assert_eq!(held(&c), 2 * ALLOWANCE + 800, "a cancelled wait takes nothing");
        drop(a);
        second.grow(1).await.unwrap();
        assert_eq!(held(&c), ALLOWANCE + 300);
    }

    #[tokio::test]
    async fn more_than_the_whole_budget_is_refused_at_once() {
        let (b, _) = budget(1, 1000);
        let mut a = b.frame(ALLOWANCE + 1001);
        a.grow(ALLOWANCE).await.unwrap();
        let e = a.grow(1).await.unwrap_err();
        assert_eq!((e.asked, e.total), (1001, 1000));
        let mut free = Charge::unbounded();
        free.grow(u64::MAX).await.unwrap();
        assert_eq!(free.fit(1 << 20), 1 << 20);
    }
}
