//! What `fork()` does to the binding's state, and the two holders that make
//! a forked child safe.
//!
//! A child made by `fork()` (multiprocessing's default on Linux, PyTorch's
//! DataLoader, gunicorn) gets a copy of the parent's memory but only the
//! forking thread, and shares the parent's open descriptors. For tokio that
//! means: the runtime's threads are gone (a child that waits on it hangs),
//! its epoll instance is the parent's own (a socket the child registers on it
//! reports to the parent's I/O driver, with a token that is an address in the
//! child's memory: the parent dereferenced such a token and crashed), and
//! dropping an inherited socket deregisters it from that shared epoll (the
//! parent's next request on it hangs). Locks that parent threads held at the
//! fork stay held in the child forever.
//!
//! So everything tied to a process records its pid:
//! - [`PerProcess`] holds a value that each process makes for itself on first
//!   use: the shared runtime, a client's connections. A child installs its
//!   own and leaks the inherited one. (A thread's own runtime, `runtime.rs`,
//!   records its pid the same way.)
//! - [`OpenedHere`] holds a value that cannot be made again (an open reader or
//!   writer, a region's mapping): in another process every use is refused with
//!   an `Io` error (an `OSError` with `errno.EIO` in Python) that names both
//!   processes, and dropping it there leaks it.
//!
//! Invariants: a value made by one process is never used or dropped by
//! another; these paths take no lock, so a lock held by a parent thread at the
//! fork cannot block a child.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use tierpool_types::{Error, ErrorKind, Result};

/// This process's id (`getpid`, not cached: right after a fork too).
pub fn pid() -> u32 {
    std::process::id()
}

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

impl<T> PerProcess<T> {
    /// Empty: the first use in each process makes the value.
    pub const fn new() -> Self {
        PerProcess { slot: AtomicPtr::new(ptr::null_mut()), _owns: PhantomData }
    }

    /// Holding `value`, which belongs to this process.
    pub fn with(value: T) -> Self {
        let slot = Box::into_raw(Box::new(Slot { pid: pid(), value }));
        PerProcess { slot: AtomicPtr::new(slot), _owns: PhantomData }
    }

    /// This process's value, made by `init` if this process has none yet.
    /// Threads that race to make it all run `init`; one value is kept.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> std::result::Result<T, E>) -> std::result::Result<&T, E> {
        let me = pid();
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
                drop(unsafe { Box::from_raw(fresh) });
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
        if unsafe { p.as_ref() }.is_some_and(|s| s.pid == pid()) {
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A value usable only in the process that made it (see the module header).
pub struct OpenedHere<T> {
    pid: u32,
    value: ManuallyDrop<T>,
}

impl<T> OpenedHere<T> {
    pub fn new(value: T) -> Self {
        OpenedHere { pid: pid(), value: ManuallyDrop::new(value) }
    }

    /// The value, or an `Io` error naming `what` in a process forked after it was made.
    pub fn get(&self, what: &str) -> Result<&T> {
        if self.pid == pid() {
            Ok(&self.value)
        } else {
            Err(inherited(what, self.pid))
        }
    }
}

impl<T> Drop for OpenedHere<T> {
    fn drop(&mut self) {
        if self.pid == pid() {
            // SAFETY: dropped once, here; never touched again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// The error for a use of `what`, made by process `owner`, in a forked child.
pub fn inherited(what: &str, owner: u32) -> Error {
    Error::new(
        ErrorKind::Io,
        format!(
            "{what} was opened in process {owner} before a fork; this process ({}) cannot use it: open it again here",
            pid()
        ),
    )
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
    fn racing_threads_all_see_the_one_value_kept() {
        let v: PerProcess<usize> = PerProcess::new();
        let seen: Vec<usize> = std::thread::scope(|s| {
            let v = &v;
            let hs: Vec<_> = (0..8).map(|i| s.spawn(move || *v.get_or_try_init(|| Ok::<_, ()>(i)).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|x| *x == seen[0]), "{seen:?}");
    }

    #[test]
    fn another_process_gets_its_own_value_and_is_refused_opened_values() {
        // A slot and an opened value as a child sees them: made by its parent.
        let parent = pid() + 1;
        let v: PerProcess<u32> = PerProcess::new();
        let inherited_slot = Box::into_raw(Box::new(Slot { pid: parent, value: 1 }));
        v.slot.store(inherited_slot, Ordering::SeqCst);
        assert_eq!(v.get_or_try_init(|| Ok::<_, ()>(2)), Ok(&2));
        // The parent's slot was left alone (a child leaks it); free it here.
        drop(unsafe { Box::from_raw(inherited_slot) });

        let opened = OpenedHere { pid: parent, value: ManuallyDrop::new(vec![1u8]) };
        let e = opened.get("/f").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.starts_with(&format!("/f was opened in process {parent} before a fork")), "{e}");
        assert_eq!(OpenedHere::new(5).get("/g"), Ok(&5));
    }
}
