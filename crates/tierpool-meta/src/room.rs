//! Which files of attachments to let go when the pool is nearly full: the
//! choice, as pure logic. The coordinator's upkeep carries it out
//! (`Client::free_for_room`: each chosen file's stored chunks become chunks
//! below again, their space garbage the workers drop first).
//!
//! Only a file whose bytes the store below holds exactly (clean), that is not
//! pinned and that holds bytes in the pool can go: letting it go loses
//! nothing, its chunks are read from below again when next read. Among
//! those, lower priority goes first (RCSS's order), then the file used
//! longest ago (the later of its last change, which the metadata knows, and
//! its last read, which the workers report), then the lower inode.
//!
//! Invariants of [`choose_to_free`], for candidates `files` and `want` bytes:
//! - every file chosen may go, and none is chosen twice;
//! - the choice is a prefix of the order above over the files that may go;
//! - it holds at least `want` bytes if those files hold that many, else it
//!   is all of them; and it is the shortest such prefix (without its last
//!   file it holds less than `want`).

/// What the choice needs to know of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomCandidate {
    pub inode: u64,
    /// 0 (let go first) to 255.
    pub priority: u8,
    pub pinned: bool,
    /// Has changes the store below does not have (or is not of an attachment).
    pub dirty: bool,
    /// Bytes of it the pool stores.
    pub held: u64,
    /// Last modification, nanoseconds since the epoch.
    pub mtime: u64,
    /// Last read or write seen by a worker, nanoseconds since the epoch
    /// (0: none seen).
    pub last_read: u64,
}

impl RoomCandidate {
    /// Whether letting it go loses nothing and frees something.
    pub fn may_go(&self) -> bool {
        !self.dirty && !self.pinned && self.held > 0
    }

    /// When it was last used, changed or read.
    pub fn last_used(&self) -> u64 {
        self.mtime.max(self.last_read)
    }

    /// Its place in the order: smaller goes first.
    fn order(&self) -> (u8, u64, u64) {
        (self.priority, self.last_used(), self.inode)
    }
}

/// The files to let go, in the order to let them go, to free `want` bytes.
pub fn choose_to_free(files: &[RoomCandidate], want: u64) -> Vec<&RoomCandidate> {
    let mut eligible: Vec<&RoomCandidate> = files.iter().filter(|f| f.may_go()).collect();
    eligible.sort_by_key(|f| f.order());
    eligible.dedup_by_key(|f| f.inode);
    let mut chosen = Vec::new();
    let mut total = 0u64;
    for f in eligible {
        if total >= want {
            break;
        }
        total = total.saturating_add(f.held);
        chosen.push(f);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(inode: u64, priority: u8, mtime: u64, held: u64) -> RoomCandidate {
        RoomCandidate { inode, priority, pinned: false, dirty: false, held, mtime, last_read: 0 }
    }

    #[test]
    fn lower_priority_then_older_then_lower_inode_goes_first() {
        let files = vec![file(1, 5, 10, 100), file(2, 1, 50, 100), file(3, 1, 20, 100), file(4, 1, 20, 100)];
        let order: Vec<u64> = choose_to_free(&files, u64::MAX).iter().map(|f| f.inode).collect();
        assert_eq!(order, vec![3, 4, 2, 1]);
        let two: Vec<u64> = choose_to_free(&files, 150).iter().map(|f| f.inode).collect();
        assert_eq!(two, vec![3, 4], "stops once 150 bytes are chosen");
        assert!(choose_to_free(&files, 0).is_empty());
    }

    #[test]
    fn a_file_read_lately_goes_after_one_changed_lately_but_read_long_ago() {
        let mut read = file(1, 1, 10, 100);
        read.last_read = 90;
        let files = vec![read, file(2, 1, 50, 100), file(3, 1, 20, 100)];
        let order: Vec<u64> = choose_to_free(&files, u64::MAX).iter().map(|f| f.inode).collect();
        assert_eq!(order, vec![3, 2, 1]);
        let mut stale = file(4, 1, 60, 100);
        stale.last_read = 5;
        assert_eq!(stale.last_used(), 60, "a read before the last change does not make it older");
    }

    #[test]
    fn pinned_dirty_and_empty_files_stay() {
        let mut pinned = file(1, 0, 0, 100);
        pinned.pinned = true;
        let mut dirty = file(2, 0, 0, 100);
        dirty.dirty = true;
        let files = vec![pinned, dirty, file(3, 0, 0, 0), file(4, 9, 9, 7)];
        let chosen: Vec<u64> = choose_to_free(&files, 1000).iter().map(|f| f.inode).collect();
        assert_eq!(chosen, vec![4], "all that may go, though short of the bytes wanted");
    }
}
