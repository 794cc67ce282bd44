//! What the ops changed, for clients that keep copies of what they read
//! (a mount's kernel keeps names and attributes): the inodes changed,
//! made or removed, and the directory entries added or removed.
//!
//! While noting is on, every inode an op is about to change is noted (the
//! hook `before` uses, so nothing that changes an inode escapes it), and
//! every entry added or removed (`link` and `unlink`, which every
//! namespace change goes through) is noted by directory and name. The
//! shell takes the notes after each op. Like the other notes, they say
//! what just happened, not what the state is: two states compare equal
//! whatever they hold, and nothing of it is stored. An op that fails, or
//! steps undone, may leave notes of inodes they did not change in the end:
//! a reader drops a copy it did not need to, never keeps a stale one.
//!
//! Each changed inode is reported with its `ctime` after the ops only if
//! they moved it forward (or made the inode); otherwise with 0, which no
//! client can have seen: a change that leaves the `ctime` as it was (a link
//! count lowered by the removal of a tree) or takes it back (a restore)
//! must not pass for the change a client made at that `ctime`.
//!
//! An inode whose changes leave what a `stat` shows of it as it was
//! ([`Shown`]: a file's record of being written below, its chunks loaded,
//! let go of or moved) is not reported: a copy of its attributes stays
//! true, and so do its bytes, since every change of a file's bytes moves
//! its `mtime` and `ctime`.

use super::inode::{Body, Inode, Owner};
use super::MetaState;
use crate::{InodeKind, Timestamp};
use tierpool_types::InodeId;

/// The notes taken since they were last taken.
#[derive(Clone, Debug, Default)]
pub(super) struct Noted {
    on: bool,
    /// Each inode as first noted, with what a `stat` showed of it then
    /// (`None`: not live).
    inodes: Vec<(InodeId, Option<Shown>)>,
    entries: Vec<(InodeId, String)>,
}

/// What a `stat` shows of an inode (times, mode, owner, links, kind and
/// size): what a client's copy of its attributes holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shown {
    ctime: Timestamp,
    mtime: Timestamp,
    atime: Timestamp,
    mode: u32,
    owner: Owner,
    links: u32,
    kind: InodeKind,
    size: u64,
}

impl Shown {
    fn of(n: &Inode) -> Shown {
        let size = match &n.body {
            Body::File { size, .. } | Body::Region { size, .. } => *size,
            Body::Symlink { target } => target.len() as u64,
            Body::Dir { .. } | Body::Special { .. } => 0,
        };
        Shown {
            ctime: n.ctime,
            mtime: n.mtime,
            atime: n.atime,
            mode: n.mode,
            owner: n.owner,
            links: n.links,
            kind: n.kind(),
            size,
        }
    }
}

impl PartialEq for Noted {
    fn eq(&self, _: &Noted) -> bool {
        true
    }
}

impl Eq for Noted {}

/// What ops changed, each item once, in id (then name) order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Inodes changed, made or removed, each with its `ctime` after the
    /// ops if they moved it forward, else 0 (also: no longer live).
    pub inodes: Vec<(InodeId, Timestamp)>,
    /// Entries added or removed: directory, name, and the directory's
    /// `ctime` as reported in `inodes`.
    pub entries: Vec<(InodeId, String, Timestamp)>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.inodes.is_empty() && self.entries.is_empty()
    }
}

impl MetaState {
    /// Turns the notes of changes on or off (off drops any taken).
    pub fn note_changes(&mut self, on: bool) {
        self.changes = Noted { on, ..Noted::default() };
    }

    /// What the ops run since the last call changed.
    pub fn take_changes(&mut self) -> Changes {
        let mut noted = std::mem::take(&mut self.changes.inodes);
        let mut entries = std::mem::take(&mut self.changes.entries);
        // Stable: the first note of each inode, from before the ops, stays.
        noted.sort_by_key(|(id, _)| *id);
        noted.dedup_by_key(|(id, _)| *id);
        entries.sort_unstable();
        entries.dedup();
        let inodes: Vec<(InodeId, Timestamp)> = noted
            .into_iter()
            .filter_map(|(id, before)| {
                let after = self.inodes.get(&id).map(Shown::of);
                let moved = match (before, after) {
                    (_, None) => 0,
                    (Some(b), Some(a)) if a == b => return None,
                    (Some(b), Some(a)) if a.ctime <= b.ctime => 0,
                    (_, Some(a)) => a.ctime,
                };
                Some((id, moved))
            })
            .collect();
        let ctime = |dir: InodeId| inodes.binary_search_by_key(&dir, |(id, _)| *id).map_or(0, |i| inodes[i].1);
        let entries = entries.into_iter().map(|(dir, name)| (dir, name, ctime(dir))).collect();
        Changes { inodes, entries }
    }

    pub(super) fn note_inode(&mut self, id: InodeId) {
        if self.changes.on {
            let before = self.inodes.get(&id).map(Shown::of);
            self.changes.inodes.push((id, before));
        }
    }

    pub(super) fn note_entry(&mut self, dir: InodeId, name: &str) {
        if self.changes.on {
            self.changes.entries.push((dir, name.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{MetaOp, MetaState};
    use tierpool_types::InodeId;

    fn mkdir(s: &mut MetaState, path: &str, now: u64) -> InodeId {
        s.execute(&MetaOp::Mkdir { path: path.into(), parents: false, mode: 0o755 }, now).unwrap();
        s.stat(path).unwrap().id
    }

    #[test]
    fn every_inode_and_entry_an_op_changes_is_noted_once_with_its_ctime_after() {
        let mut s = MetaState::new();
        s.execute(&MetaOp::Init { partitions: 4 }, 1).unwrap();
        assert!(s.take_changes().is_empty(), "off: nothing noted");
        s.note_changes(true);
        let d = mkdir(&mut s, "/d", 10);
        let c = s.take_changes();
        assert_eq!(c.inodes, vec![(InodeId::ROOT, 10), (d, 10)]);
        assert_eq!(c.entries, vec![(InodeId::ROOT, "d".to_string(), 10)]);
        let f = mkdir(&mut s, "/d/f", 20);
        s.take_changes();
        s.execute(&MetaOp::Rename { from: "/d/f".into(), to: "/g".into() }, 30).unwrap();
        let c = s.take_changes();
        assert_eq!(c.inodes, vec![(InodeId::ROOT, 30), (d, 30), (f, 30)]);
        assert_eq!(c.entries, vec![(InodeId::ROOT, "g".to_string(), 30), (d, "f".to_string(), 30)]);
        s.execute(&MetaOp::Remove { path: "/g".into(), recursive: false }, 40).unwrap();
        let c = s.take_changes();
        assert_eq!(c.inodes, vec![(InodeId::ROOT, 40), (f, 0)], "a removed inode: ctime 0");
        assert_eq!(c.entries, vec![(InodeId::ROOT, "g".to_string(), 40)]);
        assert!(s.execute(&MetaOp::Remove { path: "/nope".into(), recursive: false }, 50).is_err());
        assert!(s.take_changes().is_empty(), "a failed op validates before it changes anything");
        // A change that leaves a ctime as it was (or takes it back) is no one's.
        s.execute(&MetaOp::Mkdir { path: "/h".into(), parents: false, mode: 0o755 }, 45).unwrap();
        let h = s.stat("/h").unwrap().id;
        s.take_changes();
        s.execute(&MetaOp::Mkdir { path: "/h/i".into(), parents: false, mode: 0o755 }, 44).unwrap();
        let c = s.take_changes();
        assert_eq!(c.inodes.iter().find(|(id, _)| *id == h), Some(&(h, 0)), "a clock that went back");
        assert_eq!(c.entries, vec![(h, "i".to_string(), 0)]);
        s.execute(&MetaOp::Remove { path: "/h".into(), recursive: true }, 46).unwrap();
        let c = s.take_changes();
        assert!(c.entries.contains(&(h, "i".to_string(), 0)), "entries of a removed tree: {:?}", c.entries);
        s.note_changes(false);
        s.execute(&MetaOp::Mkdir { path: "/e".into(), parents: false, mode: 0o755 }, 60).unwrap();
        assert!(s.take_changes().is_empty());
    }
}
