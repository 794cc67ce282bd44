//! Buffers shorter than a chunk kept for reuse, by size class: the bodies
//! a worker reads that are not whole chunks (the last chunk of a file, a
//! request carrying many small chunks) and the small chunks it keeps in
//! memory. Part of [`ChunkBuffers`](crate::ChunkBuffers), which lends them
//! as it lends chunk buffers.
//!
//! Without them each small chunk stored takes fresh memory from the C
//! allocator, which hands freed memory back to the system (a worker keeps
//! its resident size to its budget), so the next one faults its pages in
//! and zeroes them again: most of a worker's time when many small files
//! are written and deleted. Kept here, the pages of a deleted small chunk
//! are the next one's.
//!
//! Invariants: a body of `len` bytes goes into a buffer of capacity
//! [`class_of`]`(len)`, at most an eighth more than it needs (or 63 bytes,
//! for the shortest); spare buffers hold at most `room` bytes together (a
//! worker's fixed overhead beside its MEM budget, as its spare chunk
//! buffers are), and a spare buffer is kept only in the list of its own
//! class, so whatever is taken has its class's capacity. Lengths whose
//! class reaches the chunk size are not taken here.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The finest step between classes.
const MIN_STEP: usize = 64;

/// The capacity a buffer for `len` bytes (`len > 0`) is taken with: `len`
/// rounded up to a sixteenth of its power of two (so the step is at most
/// an eighth of `len`), at least [`MIN_STEP`].
pub(crate) fn class_of(len: usize) -> usize {
    let step = (len.next_power_of_two() / 16).max(MIN_STEP);
    len.div_ceil(step) * step
}

#[derive(Debug, Default)]
struct Spare {
    by_class: HashMap<usize, Vec<Vec<u8>>>,
    bytes: usize,
}

/// Buffers of many sizes, below a chunk, kept for reuse.
#[derive(Debug)]
pub(crate) struct SmallBuffers {
    /// Buffers at least this long go elsewhere (a chunk's size).
    below: usize,
    room: usize,
    spare: Mutex<Spare>,
    /// Bytes (capacities) taken and not given back yet.
    lent: AtomicU64,
    reused: AtomicU64,
    fresh: AtomicU64,
}

impl SmallBuffers {
    /// Buffers whose class is below `below` bytes, at most `room` bytes of them spare.
    pub(crate) fn new(below: usize, room: usize) -> SmallBuffers {
        SmallBuffers {
            below,
            room,
            spare: Mutex::new(Spare::default()),
            lent: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            fresh: AtomicU64::new(0),
        }
    }

    /// The capacity a body of `len` bytes is read into here, if it is one of these.
    pub(crate) fn class(&self, len: usize) -> Option<usize> {
        (len > 0).then(|| class_of(len)).filter(|c| *c < self.below)
    }

    /// An empty buffer of capacity `class` (one [`class`](Self::class)
    /// gave), lent until given back: a spare one if there is one.
    pub(crate) fn take(&self, class: usize) -> Vec<u8> {
        self.take_spare(class).unwrap_or_else(|| {
            self.lent.fetch_add(class as u64, Ordering::Relaxed);
            self.fresh.fetch_add(1, Ordering::Relaxed);
            Vec::with_capacity(class)
        })
    }

    /// A spare buffer of capacity `class`, lent until given back; `None`
    /// (nothing lent, nothing allocated) if none is spare.
    pub(crate) fn take_spare(&self, class: usize) -> Option<Vec<u8>> {
        let buf = {
            let mut spare = self.spare.lock();
            let found = spare.by_class.get_mut(&class).and_then(Vec::pop)?;
            spare.bytes -= class;
            found
        };
        self.lent.fetch_add(class as u64, Ordering::Relaxed);
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(buf)
    }

    /// Takes back `buf` (taken from here): spare if its class is one of
    /// these and there is room for it, else freed.
    pub(crate) fn give_back(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        self.lent.fetch_sub(cap as u64, Ordering::Relaxed);
        if self.class(cap) != Some(cap) {
            return;
        }
        buf.clear();
        let mut spare = self.spare.lock();
        if spare.bytes + cap <= self.room {
            spare.bytes += cap;
            spare.by_class.entry(cap).or_default().push(buf);
            return;
        }
        drop(spare);
        drop(buf);
    }

    /// Spare bytes at most, spare bytes now, bytes lent, and the bodies
    /// that found a spare buffer and that took fresh memory.
    pub(crate) fn figures(&self) -> (u64, u64, u64, u64, u64) {
        (
            self.room as u64,
            self.spare.lock().bytes as u64,
            self.lent.load(Ordering::Relaxed),
            self.reused.load(Ordering::Relaxed),
            self.fresh.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classes_are_sixteenths_of_a_power_of_two() {
        let cases = [(1, 64), (100, 128), (4096, 4096), (4097, 4608), (5000, 5120), (16 << 10, 16 << 10)];
        for (len, class) in cases {
            assert_eq!(class_of(len), class, "{len}");
        }
        assert_eq!(class_of(65537), 73728);
        assert_eq!(class_of(131072), 131072);
        assert_eq!(class_of((4 << 20) - 1), 4 << 20);
        let b = SmallBuffers::new(4 << 20, 1 << 20);
        assert_eq!(b.class(0), None);
        assert_eq!(b.class((4 << 20) - 1), None, "its class is a chunk");
        assert_eq!(b.class(3 << 20), Some(3 << 20));
    }

    proptest! {
        #[test]
        fn a_class_holds_its_length_with_little_slack(len in 1usize..(8 << 20)) {
            let c = class_of(len);
            prop_assert!(c >= len);
            prop_assert!(c - len < MIN_STEP || (c - len) * 8 <= len, "{len} in {c}");
            prop_assert_eq!(class_of(c), c, "a class is its own class");
        }
    }

    #[test]
    fn a_buffer_given_back_is_reused_within_the_room() {
        let b = SmallBuffers::new(4 << 20, 4096 + 5120);
        let c = b.class(100).unwrap();
        let mut first = b.take(b.class(4000).unwrap());
        first.extend_from_slice(&[1; 4000]);
        let at = first.as_ptr();
        let second = b.take(b.class(5000).unwrap());
        assert_eq!((c, first.capacity(), second.capacity()), (128, 4096, 5120));
        assert_eq!(b.figures(), (9216, 0, 9216, 0, 2));
        b.give_back(first);
        b.give_back(second);
        assert_eq!(b.figures(), (9216, 9216, 0, 0, 2), "both fit the room");
        let again = b.take(4096);
        assert_eq!((again.as_ptr(), again.len(), again.capacity()), (at, 0, 4096));
        let third = b.take(4096);
        assert_eq!(b.figures().3, 1, "the second one of its class is fresh");
        b.give_back(again);
        b.give_back(third);
        assert_eq!(b.figures().1, 9216, "one beyond the room is freed");
        let other = b.take(b.class(100).unwrap());
        b.give_back(other);
        assert_eq!(b.figures().1, 9216, "nor is one of a class with no room left");
    }
}
