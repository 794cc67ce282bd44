//! A value each process makes for itself on first use: what must not cross
//! a `fork()`.
//!
//! A child made by `fork()` gets a copy of its parent's memory but only the
//! forking thread, and shares the parent's open descriptors: a runtime it
//! inherited has no threads (waiting on it hangs), and dropping an
//! inherited socket or runtime touches descriptors the parent still uses.
//! So a [`PerProcess`] records the pid its value was made by; a child makes
//! its own on first use and leaks the inherited one. The Python binding
//! keeps its shared runtime and its clients' connections in one, the
//! under-stores their runtime and HTTP client.
//!
//! Invariants: a value made by one process is never used or dropped by
//! another; nothing here takes a lock, so a lock held by a parent thread at
//! the fork cannot block a child.

use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

struct Slot<T> {
    pid: u32,
    value: T,
}

/// A value per process, made on first use in each (see the module header).
pub struct PerProcess<T> {
    /// Null, or a leaked `Box<Slot<T>>`. A slot is replaced only by a process
    /// other than its owner, and freed only by its owner's `drop`, so a
    /// reference to this process's slot stays valid as long as `self`.
    slot: AtomicPtr<Slot<T>>,
    _owns: PhantomData<*const T>,
}

// SAFETY: `PerProcess` owns its `T` like a `Box` does (moving it moves the
// `T`); sharing it shares `&T` and lets any thread make (and the owner later
// drop) a `T`, which needs `T: Send + Sync`.
unsafe impl<T: Send> Send for PerProcess<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PerProcess<T> {
    /// Empty: the first use in each process makes the value.
    pub const fn new() -> Self {
        PerProcess { slot: AtomicPtr::new(ptr::null_mut()), _owns: PhantomData }
    }

    /// Holding `value`, which belongs to this process.
    pub fn with(value: T) -> Self {
        let slot = Box::into_raw(Box::new(Slot { pid: std::process::id(), value }));
        PerProcess { slot: AtomicPtr::new(slot), _owns: PhantomData }
    }

    /// This process's value, made by `init` if this process has none yet.
    /// Threads that race to make it all run `init`; one value is kept and
    /// the others are dropped.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        self.get_or_try_init_or(init, drop)
    }

    /// As [`get_or_try_init`](Self::get_or_try_init), for an `init` that
    /// cannot fail.
    pub fn get_or_init_or(&self, init: impl FnOnce() -> T, lost: impl FnOnce(T)) -> &T {
        match self.get_or_try_init_or(|| Ok::<T, std::convert::Infallible>(init()), lost) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// As [`get_or_try_init`](Self::get_or_try_init), giving a value made by
    /// a thread that lost the race to `lost` (a runtime must be shut down in
    /// the background: dropping one in async context panics).
    pub fn get_or_try_init_or<E>(&self, init: impl FnOnce() -> Result<T, E>, lost: impl FnOnce(T)) -> Result<&T, E> {
        let me = std::process::id();
        let seen = self.slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot is a live leaked box (see `slot`); reading
        // its pid is fine even when it belongs to another process.
        if let Some(s) = unsafe { seen.as_ref() } {
            if s.pid == me {
                return Ok(&s.value);
            }
        }
        let fresh = Box::into_raw(Box::new(Slot { pid: me, value: init()? }));
        match self.slot.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // `seen` belonged to another process (or was null): it is leaked.
            // SAFETY: `fresh` is now the slot of this process; see `slot`.
            Ok(_) => Ok(unsafe { &(*fresh).value }),
            Err(won) => {
                // Another thread of this process installed its value first;
                // only this process can have replaced `seen`.
                // SAFETY: `fresh` was never shared; `won` is this process's
                // slot, live as long as `self`.
                lost(unsafe { Box::from_raw(fresh) }.value);
                Ok(unsafe { &(*won).value })
            }
        }
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let p = *self.slot.get_mut();
        // SAFETY: see `slot`; a slot of this process is freed exactly once,
        // here, and one of another process is left alone.
        if unsafe { p.as_ref() }.is_some_and(|s| s.pid == std::process::id()) {
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_value_is_made_once_per_process() {
        let made = AtomicUsize::new(0);
        let v: PerProcess<u32> = PerProcess::new();
        let make = || {
            made.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(7)
        };
        assert_eq!(v.get_or_try_init(make), Ok(&7));
        assert_eq!(v.get_or_try_init(make), Ok(&7));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        let preset = PerProcess::with(3u32);
        assert_eq!(preset.get_or_try_init(|| Err::<u32, _>("not called")), Ok(&3));
    }

    #[test]
    fn a_failed_init_leaves_the_holder_empty() {
        let v: PerProcess<String> = PerProcess::new();
        assert_eq!(v.get_or_try_init(|| Err("down")), Err("down"));
        assert_eq!(v.get_or_try_init(|| Ok::<_, ()>("up".to_string())).map(String::as_str), Ok("up"));
    }

    #[test]
    fn racing_threads_all_see_the_one_value_kept_and_the_others_are_lost() {
        let v: PerProcess<usize> = PerProcess::new();
        let (made, lost) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let seen: Vec<usize> = std::thread::scope(|s| {
            let (v, made, lost) = (&v, &made, &lost);
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    s.spawn(move || {
                        let init = || {
                            made.fetch_add(1, Ordering::SeqCst);
                            i
                        };
                        *v.get_or_init_or(init, |_| {
                            lost.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|x| *x == seen[0]), "{seen:?}");
        assert_eq!(made.load(Ordering::SeqCst), lost.load(Ordering::SeqCst) + 1);
    }

    #[test]
    fn another_process_gets_its_own_value_and_leaves_the_inherited_one() {
        // A slot as a child sees it: made by its parent.
        let parent = std::process::id() + 1;
        let v: PerProcess<u32> = PerProcess::new();
        let inherited = Box::into_raw(Box::new(Slot { pid: parent, value: 1 }));
        v.slot.store(inherited, Ordering::SeqCst);
        assert_eq!(v.get_or_try_init(|| Ok::<_, ()>(2)), Ok(&2));
        // The parent's slot was left alone (a child leaks it); free it here.
        // SAFETY: made above and published nowhere else.
        drop(unsafe { Box::from_raw(inherited) });
    }
}
