//! The contents the kernel may still hold pages of, by inode, so that an
//! open finding the same contents published keeps them
//! (`FOPEN_KEEP_CACHE`) instead of reading them again.
//!
//! The kernel fills its page cache only from reads of this mount's open
//! files (through the handles that use it, `open_flags`), and drops all of
//! an inode's pages at an open that does not keep them. An open file whose
//! reads all returned one publish's contents, opened on those contents,
//! with nothing written or cut here and no other publish taken in until
//! its last close (`OpenFile::kept`), leaves the kernel holding pages of
//! those contents or none. A later open that finds the very same
//! contents published (equal chunk versions, which are never reused) may
//! keep them: they are what a read would fetch.
//!
//! Invariant: an entry holds the contents recorded by the last close of
//! the open file made by the latest open of its inode (its sequence
//! number), or nothing. An open marks its inode as opened with its own
//! number, so the close of an older open file, or of one opened while the
//! pages were being read into, records nothing. Entries beyond [`KEPT_MAX`]
//! are forgotten, which costs only a read.

use crate::open_file::Contents;
use std::collections::HashMap;

/// Inodes remembered at most: a few MiB of entries (files of at most
/// `CACHED_MAX`: a chunk list of at most 16 chunks of the default size
/// each, most a single chunk).
pub const KEPT_MAX: usize = 65_536;

#[derive(Default)]
pub struct KeptPages {
    /// The latest open's sequence number, and what its file's last close kept.
    by_inode: HashMap<u64, (u64, Option<Contents>)>,
}

impl KeptPages {
    /// An open file `seq` is made for `ino`, on contents `now`: whether the
    /// kernel may keep the pages it holds of the inode.
    pub fn opened(&mut self, ino: u64, seq: u64, now: &Contents) -> bool {
        if self.by_inode.len() >= KEPT_MAX && !self.by_inode.contains_key(&ino) {
            self.by_inode.clear();
        }
        let before = self.by_inode.insert(ino, (seq, None));
        matches!(before, Some((_, Some(kept))) if kept == *now)
    }

    /// The last handle of open file `seq` of `ino` closed: the contents its
    /// reads all returned, if they were one publish's.
    pub fn closed(&mut self, ino: u64, seq: u64, kept: Option<Contents>) {
        match self.by_inode.get_mut(&ino) {
            Some(entry) if entry.0 == seq => entry.1 = kept,
            _ => {} // a later open marked it, or it was forgotten
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tierpool_types::ChunkRef;

    fn contents(version: u64) -> Contents {
        (10, vec![ChunkRef { version, len: 10, checksum: 0, home: None }])
    }

    #[test]
    fn an_open_keeps_pages_only_of_the_contents_the_last_close_kept() {
        let mut k = KeptPages::default();
        assert!(!k.opened(7, 1, &contents(1)), "nothing read yet");
        k.closed(7, 1, Some(contents(1)));
        assert!(k.opened(7, 2, &contents(1)));
        k.closed(7, 2, Some(contents(1)));
        assert!(!k.opened(7, 3, &contents(2)), "published again elsewhere");
        k.closed(7, 3, None); // written here
        assert!(!k.opened(7, 4, &contents(2)));
        // An older open file closing after a newer open records nothing.
        k.closed(7, 3, Some(contents(2)));
        assert!(!k.opened(7, 5, &contents(2)));
        assert!(!k.opened(8, 6, &contents(1)), "another inode");
    }

    /// A model of the mount and the kernel's pages. The mount has one
    /// open file per inode, made by the first open and shared by later
    /// ones (which drop the kernel's pages); its last close detaches it
    /// and records what it kept a while later (meanwhile a new open may
    /// make the next one). Whatever order opens, reads, writes here,
    /// publishes elsewhere, refreshes and closes come in, an open that
    /// keeps the pages finds them holding the contents published now.
    #[derive(Debug, Clone)]
    enum Step {
        Open,
        Read,
        Write,
        PublishElsewhere,
        Refresh,
        Close { publish: bool },
        Recorded(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Open),
            Just(Step::Read),
            Just(Step::Write),
            Just(Step::PublishElsewhere),
            Just(Step::Refresh),
            any::<bool>().prop_map(|publish| Step::Close { publish }),
            (0..3usize).prop_map(Step::Recorded),
        ]
    }

    /// The mount's open file: its number, the version it reads (the one
    /// opened on or taken in), whether it is unmoved, written, its handles.
    struct File {
        seq: u64,
        reads: u64,
        unmoved: bool,
        written: bool,
        handles: u32,
    }

    /// What reads of unpublished bytes put in the pages.
    const UNPUBLISHED: u64 = u64::MAX;

    proptest! {
        #[test]
        fn kept_pages_always_hold_the_published_contents(steps in prop::collection::vec(step(), 1..80)) {
            let mut k = KeptPages::default();
            let (mut published, mut seq) = (1u64, 0u64);
            let mut current: Option<File> = None;
            let mut closing: Vec<(u64, Option<Contents>)> = Vec::new();
            let mut pages: Option<u64> = None; // the version the kernel's pages hold
            for s in steps {
                match s {
                    Step::Open => match &mut current {
                        Some(f) => {
                            f.handles += 1;
                            pages = None;
                        }
                        None => {
                            seq += 1;
                            if k.opened(1, seq, &contents(published)) {
                                prop_assert!(
                                    pages.is_none_or(|p| p == published),
                                    "kept pages of {pages:?} with {published} published"
                                );
                            } else {
                                pages = None;
                            }
                            current = Some(File { seq, reads: published, unmoved: true, written: false, handles: 1 });
                        }
                    },
                    Step::Read => {
                        if let Some(f) = &current {
                            pages = Some(if f.written { UNPUBLISHED } else { f.reads });
                        }
                    }
                    // The kernel drops the pages a write covers; the others
                    // are left as they were, stale or not.
                    Step::Write => {
                        if let Some(f) = &mut current {
                            f.unmoved = false;
                            f.written = true;
                        }
                    }
                    Step::PublishElsewhere => published += 1,
                    Step::Refresh => {
                        if let Some(f) = &mut current {
                            if !f.written && f.reads != published {
                                f.reads = published;
                                f.unmoved = false;
                            }
                        }
                    }
                    Step::Close { publish } => {
                        if let Some(f) = &mut current {
                            f.handles -= 1;
                            if f.written && publish {
                                published += 1;
                                f.reads = published;
                                f.written = false;
                            }
                            if f.handles == 0 {
                                let f = current.take().unwrap();
                                let on = f.reads;
                                closing.push((f.seq, f.unmoved.then(|| contents(on))));
                            }
                        }
                    }
                    Step::Recorded(i) if !closing.is_empty() => {
                        let n = closing.len();
                        let (seq, kept) = closing.remove(i % n);
                        k.closed(1, seq, kept);
                    }
                    Step::Recorded(_) => {}
                }
            }
        }
    }
}
