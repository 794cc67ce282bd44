//! A bound on the memory DISK reads hold: each chunk read from DISK is a
//! fresh buffer that lives until its reader drops it (for a worker, until
//! the answer is written to the socket), so a burst of readers of cold
//! chunks would otherwise allocate one chunk each. At most `permits`
//! DISK-read buffers exist at once; a reader past that waits (it runs on a
//! blocking thread). A MEM hit costs no permit: it shares the stored bytes.
//!
//! Invariant: `in_use <= permits`; a permit is released exactly once, when
//! the buffer holding it is dropped.

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct ReadPermits {
    permits: usize,
    in_use: Mutex<usize>,
    freed: Condvar,
}

/// One DISK-read buffer's permit, released when dropped.
pub(crate) struct Permit(Arc<ReadPermits>);

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.in_use.lock() -= 1;
        self.0.freed.notify_one();
    }
}

/// A buffer and the permit it holds.
struct Held {
    data: Bytes,
    _permit: Permit,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// `data` holding `permit` until the last of its clones and slices is
/// dropped. (Another handle to the same buffer taken before, such as the
/// copy a promotion keeps in MEM, holds no permit: MEM's budget counts it.)
pub(crate) fn hold(data: Bytes, permit: Permit) -> Bytes {
    Bytes::from_owner(Held { data, _permit: permit })
}

impl ReadPermits {
    pub(crate) fn new(permits: usize) -> Arc<ReadPermits> {
        Arc::new(ReadPermits { permits: permits.max(1), in_use: Mutex::new(0), freed: Condvar::new() })
    }

    /// Waits for a permit.
    pub(crate) fn acquire(self: &Arc<Self>) -> Permit {
        let mut n = self.in_use.lock();
        while *n >= self.permits {
            self.freed.wait(&mut n);
        }
        *n += 1;
        Permit(self.clone())
    }

    /// Waits for a permit, then reads with `read`; the bytes returned hold
    /// the permit for as long as they live.
    #[cfg(test)]
    pub(crate) fn read<E>(self: &Arc<Self>, read: impl FnOnce() -> Result<Bytes, E>) -> Result<Bytes, E> {
        let permit = self.acquire();
        Ok(hold(read()?, permit))
    }

    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        *self.in_use.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_their_permit_until_dropped() {
        let p = ReadPermits::new(2);
        let a = p.read(|| Ok::<_, ()>(Bytes::from(vec![1u8; 10]))).unwrap();
        let b = p.read(|| Ok::<_, ()>(Bytes::from(vec![2u8; 10]))).unwrap();
        assert_eq!((p.in_use(), &a[..3], &b[..3]), (2, &[1u8, 1, 1][..], &[2u8, 2, 2][..]));
        let slice = a.slice(2..4);
        drop(a);
        assert_eq!(p.in_use(), 2, "a slice keeps the buffer and its permit");
        let p2 = p.clone();
        let waiter = std::thread::spawn(move || p2.read(|| Ok::<_, ()>(Bytes::from_static(b"c"))).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a third reader waits");
        drop(slice);
        assert_eq!(&waiter.join().unwrap()[..], b"c");
        drop(b);
        assert_eq!(p.in_use(), 0);
    }

    #[test]
    fn a_failed_read_gives_its_permit_back() {
        let p = ReadPermits::new(1);
        assert!(p.read(|| Err::<Bytes, _>("disk")).is_err());
        assert_eq!(p.in_use(), 0);
    }
}
