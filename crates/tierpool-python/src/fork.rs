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
//! - [`PerProcess`] (`tierpool_types`) holds a value that each process makes
//!   for itself on first use: the shared runtime, a client's connections. A
//!   child installs its own and leaks the inherited one. (A thread's own
//!   runtime, `runtime.rs`, records its pid the same way.)
//! - [`OpenedHere`] holds a value that cannot be made again (an open reader or
//!   writer, a region's mapping): in another process every use is refused with
//!   an `Io` error (an `OSError` with `errno.EIO` in Python) that names both
//!   processes, and dropping it there leaks it.
//!
//! Invariants: a value made by one process is never used or dropped by
//! another; these paths take no lock, so a lock held by a parent thread at the
//! fork cannot block a child.

use std::mem::ManuallyDrop;
pub use tierpool_types::PerProcess;
use tierpool_types::{Error, ErrorKind, Result};

/// This process's id (`getpid`, not cached: right after a fork too).
pub fn pid() -> u32 {
    std::process::id()
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

    #[test]
    fn another_process_is_refused_opened_values() {
        // An opened value as a child sees it: made by its parent.
        let parent = pid() + 1;
        let opened = OpenedHere { pid: parent, value: ManuallyDrop::new(vec![1u8]) };
        let e = opened.get("/f").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.starts_with(&format!("/f was opened in process {parent} before a fork")), "{e}");
        assert_eq!(OpenedHere::new(5).get("/g"), Ok(&5));
    }
}
