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
//! the file as it will be made; the make sets its times from the
//! coordinator's clock (the next attributes the kernel reads say so).
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
        let id = match self.io.rt.block_on(self.io.client.reserve_inode()) {
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
        self.unmade.lock().push((Instant::now(), file.clone()));
        let fh = self.add_open(file, flags);
        Some((info, fh))
    }

    /// Makes in the pool every file answered here and not yet made, before
    /// a change or query that must find them there.
    pub(crate) fn settle(&self) {
        let waiting = std::mem::take(&mut *self.unmade.lock());
        for (_, f) in waiting {
            match f.make(&self.io) {
                Ok(Some((file, dir))) => {
                    let mut fresh = self.fresh.lock();
                    fresh.own(&file);
                    fresh.own(&dir);
                }
                Ok(None) => {}
                Err(e) => not_made(&self.watch, &self.known, &f, &e),
            }
        }
    }

    /// After a publish of `file`: if it was to make the file and could
    /// not, the kernel drops what it was told of it.
    pub(crate) fn made_or_dropped(&self, file: &OpenFile) {
        if file.unmade() {
            let e = tierpool_types::Error::new(tierpool_types::ErrorKind::Io, "its publish failed");
            not_made(&self.watch, &self.known, file, &e);
        }
    }

    /// Makes, every `MAKE_WITHIN / 2`, the files answered here that waited
    /// `MAKE_WITHIN` for their publish.
    pub(crate) fn start_making(&self) -> Background {
        let (io, unmade) = (self.io.clone(), Arc::downgrade(&self.unmade));
        let (watch, known) = (Arc::downgrade(&self.watch), Arc::downgrade(&self.known));
        Background::every_on(&self.io.rt, "making files", MAKE_WITHIN / 2, move || {
            let (io, unmade, watch, known) = (io.clone(), unmade.clone(), watch.clone(), known.clone());
            async move {
                let done = tokio::task::spawn_blocking(move || make_due(&io, &unmade, &watch, &known)).await;
                Ok(if matches!(done, Ok(true)) { Step::Continue } else { Step::Stop })
            }
        })
    }
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
fn make_due(io: &Io, unmade: &Weak<Mutex<UnmadeFiles>>, watch: &Weak<Watch>, known: &Weak<Mutex<KnownDirs>>) -> bool {
    let (Some(unmade), Some(watch), Some(known)) = (unmade.upgrade(), watch.upgrade(), known.upgrade()) else {
        return false;
    };
    let due: Vec<Arc<OpenFile>> = {
        let mut list = unmade.lock();
        list.retain(|(_, f)| f.unmade());
        let now = Instant::now();
        let (due, wait): (Vec<_>, Vec<_>) = list.drain(..).partition(|(at, _)| now.duration_since(*at) >= MAKE_WITHIN);
        *list = wait;
        due.into_iter().map(|(_, f)| f).collect()
    };
    for f in due {
        if let Err(e) = f.make(io) {
            not_made(&watch, &known, &f, &e);
        }
    }
    true
}
