//! Creates answered by the mount itself: a new file in a directory the
//! mount knows whole is made in the pool by its first publish (its `close`,
//! `fsync`), in the same request, rather than by a commit of its own at
//! `create`. `tar`, `cp` and compilers make a file, write it and close it:
//! one round trip to the coordinator per file instead of two.
//!
//! Only where the answer is certain: the directory is known whole
//! (`known.rs`: the name is free, as far as any client's change the feed
//! brought says), and a file made there before by the pool shows what a
//! new one is given (its copies, placement and attributes, no under-store
//! beneath, the group of a set-group-id directory): its [`Template`]. The
//! id comes from a batch the client reserved. The kernel is answered with
//! the file as it will be made, but for its times, which are the mount's
//! clock's: the make sets the coordinator's, milliseconds later, and a
//! file closed without a write or a time set shows the mount's until the
//! kernel asks for its attributes again (a write makes it ask).
//!
//! Invariants:
//! - a file still to be made is open here (the kernel only has it through
//!   the create's handle): every other change or query of this mount that
//!   reaches the coordinator makes all such files first
//!   ([`TierpoolFs::settle`], from `block` and `inode`), so what it meets
//!   there is as if each had been made at its create; its own attributes
//!   are answered by its open file meanwhile;
//! - none waits longer than [`MAKE_WITHIN`]: a background task makes those
//!   that did, so other clients see the name soon even if it stays open;
//! - a make that fails (another client took the name, the directory went
//!   away meanwhile) fails the publish that carried it, as a create that
//!   failed would have; the file's bytes go with it at its last close.

use crate::fresh::Fresh;
use crate::fs::TierpoolFs;
use crate::known::KnownDirs;
use crate::open_file::{Io, OpenFile};
use crate::watch::Watch;
use fuser::Request;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tierpool_client::{Background, InodeInfo, InodeKind, NewFileAt, Step};
use tierpool_types::{InodeId, DEFAULT_CHUNK_SIZE};

/// How long a file answered here may wait for its publish to make it.
pub(crate) const MAKE_WITHIN: Duration = Duration::from_millis(500);
/// Directories with a template at most (then all are forgotten).
const TEMPLATES_MAX: usize = 4096;

/// What the pool gave a new file in one directory.
#[derive(Clone, Debug)]
pub(crate) struct Template {
    /// A file the pool made there (its copies, placement, attributes).
    file: InodeInfo,
    /// The directory's group if it has the set-group-id bit.
    group: Option<u32>,
}

/// Files answered here and not yet made, with when they were answered.
pub(crate) type Unmade = Arc<Mutex<UnmadeFiles>>;
pub(crate) type UnmadeFiles = Vec<(Instant, Arc<OpenFile>)>;

/// Templates by directory.
#[derive(Default)]
pub(crate) struct Templates(HashMap<u64, Template>);

impl Templates {
    /// The pool made `file` in `dir` (as the make left it): what new files there are given.
    pub(crate) fn learn(&mut self, dir: &InodeInfo, file: &InodeInfo) {
        if file.kind != InodeKind::File || file.origin.is_some() || dir.kind != InodeKind::Dir {
            self.0.remove(&dir.id.0);
            return;
        }
        if self.0.len() >= TEMPLATES_MAX {
            self.0.clear();
        }
        let group = (dir.mode & libc::S_ISGID != 0).then_some(dir.gid);
        self.0.insert(dir.id.0, Template { file: file.clone(), group });
    }

    /// This mount changes `dir`'s own attributes, or the pool's settings
    /// beneath it: new files there are made by the pool again first.
    pub(crate) fn forget(&mut self, dir: u64) {
        self.0.remove(&dir);
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

impl Template {
    /// The file `id` as the pool will make it: `mode`, owned by `owner`
    /// (the directory's group if it has the set-group-id bit), empty,
    /// made `now` (ns).
    fn file(&self, id: InodeId, mode: u32, owner: (u32, u32), now: u64) -> InodeInfo {
        InodeInfo {
            id,
            size: 0,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mode: mode & 0o7777,
            uid: owner.0,
            gid: self.group.unwrap_or(owner.1),
            nlink: 1,
            atime: now,
            mtime: now,
            ctime: now,
            chunks: Vec::new(),
            inline: None,
            ..self.file.clone()
        }
    }
}

impl TierpoolFs {
    /// Answers the create of `parent/name` here if its outcome is certain
    /// (see the module's documentation): the new file, open, and its
    /// handle; `None` if the pool must make it now.
    pub(crate) fn create_here(
        &self,
        req: &Request,
        parent: u64,
        name: &str,
        mode: u32,
        flags: i32,
    ) -> Option<(InodeInfo, u64)> {
        let template = self.templates.lock().0.get(&parent).cloned();
        let free = self.watch.following(Instant::now()) && self.known.lock().lacks(parent, name);
        let valid = tierpool_client::check_name(name).is_ok() && name != crate::snapshots::SNAPSHOTS;
        let Some(template) = template.filter(|_| free && valid) else {
            tracing::debug!("{name}: made by the pool (free here: {free}, a valid name: {valid})");
            return None;
        };
        let id = match self.io.wait(self.io.client.reserve_inode()) {
            Ok(id) => id,
            Err(e) => {
                tracing::debug!("{name}: no inode id reserved ({e}); made by the pool");
                return None;
            }
        };
        let owner = (req.uid(), req.gid());
        let info = template.file(id, mode, owner, crate::attr::time_ns());
        let make = NewFileAt {
            parent: InodeId(parent),
            name: name.to_string(),
            inode: id,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mode: mode & 0o7777,
            owner,
        };
        let file = Arc::new(OpenFile::making(info.clone(), make));
        self.known.lock().added(parent, name);
        self.names.lock().met(id.0, parent, name);
        // The directory as last kept lacks the name: asked again.
        self.fresh.lock().forget(parent);
        self.unmade.lock().push((Instant::now(), file.clone()));
        let fh = self.add_open(file, flags);
        Some((info, fh))
    }

    /// Makes in the pool every file answered here and not yet made, before
    /// a change or query that must find them there. A file another thread
    /// is making meanwhile is waited for (its make holds the file's lock).
    pub(crate) fn settle(&self) {
        let waiting: Vec<Arc<OpenFile>> = self.unmade.lock().iter().map(|(_, f)| f.clone()).collect();
        make_all(&self.io, &self.unmade, waiting, &self.watch, &self.known, &self.fresh);
    }

    /// After a publish of `file`: if its make was tried and failed for
    /// good, the kernel drops what it was told of the file.
    pub(crate) fn made_or_dropped(&self, file: &OpenFile) {
        if let Some(e) = file.take_make_error() {
            if for_good(&e) {
                not_made(&self.watch, &self.known, file, &e);
                self.unmade.lock().retain(|(_, f)| f.inode() != file.inode());
            }
        }
    }

    /// Makes, every `MAKE_WITHIN / 2`, the files answered here that waited
    /// `MAKE_WITHIN` for their publish.
    pub(crate) fn start_making(&self) -> Background {
        let parts = Parts {
            io: self.io.clone(),
            unmade: Arc::downgrade(&self.unmade),
            watch: Arc::downgrade(&self.watch),
            known: Arc::downgrade(&self.known),
            fresh: Arc::downgrade(&self.fresh),
        };
        Background::every_on(&self.io.rt, "making files", MAKE_WITHIN / 2, move || {
            let parts = parts.clone();
            async move {
                let done = tokio::task::spawn_blocking(move || make_due(&parts)).await;
                Ok(if matches!(done, Ok(true)) { Step::Continue } else { Step::Stop })
            }
        })
    }
}

/// What the background task that makes files needs of the mount.
#[derive(Clone)]
struct Parts {
    io: Io,
    unmade: Weak<Mutex<UnmadeFiles>>,
    watch: Weak<Watch>,
    known: Weak<Mutex<KnownDirs>>,
    fresh: Weak<Mutex<Fresh>>,
}

/// Makes `files` (of `unmade`), noting each as this mount's own change;
/// they leave `unmade` once made, or once their make failed for good
/// (their publish reports it). A make that failed otherwise (the
/// coordinator out of reach) is tried again by the next call.
fn make_all(
    io: &Io,
    unmade: &Mutex<UnmadeFiles>,
    files: Vec<Arc<OpenFile>>,
    watch: &Watch,
    known: &Mutex<KnownDirs>,
    fresh: &Mutex<Fresh>,
) {
    if files.is_empty() {
        return;
    }
    let mut given_up = Vec::new();
    for f in files {
        let _changing = watch.changing();
        match f.make(io) {
            Ok(Some((file, dir))) => {
                let mut fresh = fresh.lock();
                fresh.own(&file);
                fresh.own(&dir);
            }
            Ok(None) => {}
            Err(e) => {
                if for_good(&e) {
                    not_made(watch, known, &f, &e);
                    given_up.push(f.inode());
                } else {
                    tracing::warn!("inode {}: not made yet ({e}); tried again", f.inode());
                }
            }
        }
    }
    unmade.lock().retain(|(_, f)| f.unmade() && !given_up.contains(&f.inode()));
}

/// Whether a make that failed with `e` would fail again: the name taken,
/// the directory gone, the id given up (not the coordinator out of reach).
fn for_good(e: &tierpool_types::Error) -> bool {
    use tierpool_types::ErrorKind as K;
    !matches!(e.kind, K::Unavailable | K::Internal | K::Protocol | K::Io)
}

/// A file answered here could not be made (`e`): the kernel drops its
/// entry and inode, and its directory is no longer known whole (another
/// client may have taken the name).
fn not_made(watch: &Watch, known: &Mutex<KnownDirs>, f: &OpenFile, e: &tierpool_types::Error) {
    tracing::warn!("inode {}: could not be made: {e}", f.inode());
    if let Some((dir, name)) = f.to_make_at() {
        known.lock().forget(dir);
        watch.drop_entry(dir, &name, f.inode().0);
    }
}

/// Makes the files of `unmade` that waited `MAKE_WITHIN`; `false` once the
/// mount is gone.
fn make_due(p: &Parts) -> bool {
    let (Some(unmade), Some(watch), Some(known), Some(fresh)) =
        (p.unmade.upgrade(), p.watch.upgrade(), p.known.upgrade(), p.fresh.upgrade())
    else {
        return false;
    };
    let now = Instant::now();
    let due: Vec<Arc<OpenFile>> = unmade
        .lock()
        .iter()
        .filter(|(at, f)| f.unmade() && now.duration_since(*at) >= MAKE_WITHIN)
        .map(|(_, f)| f.clone())
        .collect();
    make_all(&p.io, &unmade, due, &watch, &known, &fresh);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierpool_meta::{MetaOp, MetaReply, MetaState, NewNode, Owner};

    fn info(r: MetaReply) -> InodeInfo {
        match r {
            MetaReply::Info(i) => i,
            other => panic!("not an Info reply: {other:?}"),
        }
    }

    /// What the mount answers a create with is what the pool's make gives,
    /// in a set-group-id directory and in a plain one, times aside.
    #[test]
    fn a_file_answered_here_is_as_the_pool_makes_it() {
        let mut s = MetaState::new();
        s.execute(&MetaOp::Init { partitions: 4 }, 1).unwrap();
        let mut templates = Templates::default();
        for (dir_mode, dir_group) in [(0o2775, 50), (0o755, 70)] {
            let owner = Owner { uid: 1, gid: dir_group };
            let name = format!("d{dir_mode:o}");
            let mk = MetaOp::MakeAt { parent: InodeId::ROOT, name: name.clone(), node: NewNode::Dir, mode: dir_mode };
            let d = info(s.execute_as(&mk, owner, 2).unwrap());
            let file = NewNode::File { chunk_size: DEFAULT_CHUNK_SIZE };
            let mk = MetaOp::MakeAt { parent: d.id, name: "first".into(), node: file, mode: 0o600 };
            let first = info(s.execute_as(&mk, owner, 3).unwrap());
            templates.learn(&s.stat(&format!("/{name}")).unwrap(), &first);
            let MetaReply::Inodes { first: id, .. } = s.execute(&MetaOp::AllocInodes { count: 1 }, 4).unwrap() else {
                panic!("no ids")
            };
            let answered = templates.0[&d.id.0].file(id, 0o100_640, (2, 60), 5);
            let mk = MetaOp::MakeFileAt {
                parent: d.id,
                name: "new".into(),
                inode: id,
                chunk_size: DEFAULT_CHUNK_SIZE,
                mode: 0o100_640 & 0o7777,
            };
            let made = info(s.execute_as(&mk, Owner { uid: 2, gid: 60 }, 5).unwrap());
            assert_eq!(answered, made, "in a directory of mode {dir_mode:o}");
        }
        // Not from a file beneath an under-store, nor from a directory that is not one.
        let dir = s.stat("/d755").unwrap();
        let mut below = s.stat("/d755/first").unwrap();
        below.origin = Some(tierpool_meta::Origin {
            attach: InodeId::ROOT,
            key: "k".into(),
            size: 0,
            mtime: 0,
            etag: String::new(),
            dirty: true,
            mode: None,
        });
        templates.learn(&dir, &below);
        assert!(!templates.0.contains_key(&dir.id.0));
    }
}
