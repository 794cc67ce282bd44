//! Calls addressed by inode id, as a file system makes them: lookups and
//! namespace changes by directory inode and entry name, owner and time
//! changes, chunk-level updates of a file, and holds on open inodes.
//!
//! An update writes new chunk versions first (`put_version`, invisible to
//! readers) and publishes them with one `UpdateFile`, so readers see the
//! file before or after an update, never half of one.

use crate::client::{unexpected, unexpected_meta, Client};
use crate::placing::Placing;
use bytes::Bytes;
use std::collections::BTreeMap;
use tierpool_meta::{DirName, InodeInfo, InodeKind, MetaOp, MetaReply, NewNode};
use tierpool_proto::{ChangesAnswer, ChunkPlace, CoordRequest, CoordResponse, WorkerRequest, WorkerResponse};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, Error, ErrorKind, InodeId, Priority, Result, WorkerId};

/// Who a new inode belongs to: `(uid, gid)`.
pub type Owner = (u32, u32);

/// Owner, mode and time changes of one inode (`None` keeps the field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InodeChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<u64>,
    pub mtime: Option<u64>,
}

/// A file its writer answered the create of itself, made in the pool by
/// its first publish ([`Client::make_and_publish`]): entry `name` of
/// `parent`, an empty file whose chunks will be `chunk_size` bytes, with
/// the id `inode` the writer reserved ([`Client::reserve_inode`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewFileAt {
    pub parent: InodeId,
    pub name: String,
    pub inode: InodeId,
    pub chunk_size: u64,
    pub mode: u32,
    pub owner: Owner,
}

/// What [`Client::make_and_publish`] did once the file was made.
#[derive(Debug)]
pub struct Made {
    /// The file as the make left it.
    pub file: InodeInfo,
    /// The directory as the request left it.
    pub dir: InodeInfo,
    /// The publish and attribute changes that came with it, as
    /// [`Client::publish_with`] answers them (without a publish: the file
    /// after the attribute changes, or as made).
    pub published: Result<(InodeInfo, Vec<u64>)>,
}

/// What [`Client::rename_at`] left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renamed {
    /// Both directories as the change left them (the same one twice for a
    /// rename within one).
    pub from: InodeInfo,
    pub to: InodeInfo,
    /// The inode moved, and the `ctime` the change left it with.
    pub moved: InodeId,
    pub ctime: u64,
    /// The inode the replaced name named, if it went with it.
    pub gone: Option<InodeId>,
}

impl Client {
    /// A fresh inode id for a file this client makes by name later
    /// ([`NewFileAt`]); from a batch reserved at the coordinator.
    pub async fn reserve_inode(&self) -> Result<InodeId> {
        self.alloc_inode().await
    }

    /// Makes `file`, then publishes `publish` to it (`UpdateFile` or
    /// `UpdateInline`, if any) and makes the attribute changes of `change`,
    /// in one request run as `file.owner` and answered once all are
    /// durable. Fails with the make's error if the file could not be made
    /// (then nothing changed); otherwise the publish and the changes
    /// succeed or fail as with [`Client::publish_with`].
    pub async fn make_and_publish(
        &self,
        file: &NewFileAt,
        publish: Option<MetaOp>,
        change: &InodeChange,
    ) -> Result<Made> {
        let make = MetaOp::MakeFileAt {
            parent: file.parent,
            name: file.name.clone(),
            inode: file.inode,
            chunk_size: file.chunk_size,
            mode: file.mode,
        };
        let has_publish = publish.is_some();
        let set = (*change != InodeChange::default()).then(|| set_op(file.inode, change));
        let ops: Vec<MetaOp> = [Some(make), publish, set].into_iter().flatten().collect();
        let (n, owner) = (ops.len(), tierpool_meta::Owner { uid: file.owner.0, gid: file.owner.1 });
        let req = CoordRequest::MetaManyStat { ops, owner, stat: vec![file.parent] };
        let (replies, mut stats) = match self.coord(req).await? {
            CoordResponse::MetaManyStat { replies, stats } if replies.len() == n && stats.len() == 1 => {
                (replies, stats)
            }
            other => return Err(unexpected(other)),
        };
        let mut replies = replies.into_iter();
        let made = match replies.next().expect("the make's reply").and_then(Self::info_reply) {
            Ok(made) => made,
            // Made by an earlier request whose answer was lost: it is there, with this id.
            Err(e) if e.kind == ErrorKind::InvalidArgument => match self.lookup(file.parent, &file.name).await {
                Ok(found) if found.id == file.inode => found,
                _ => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let dir = stats.remove(0)?;
        let published = match has_publish {
            true => replies.next().expect("the publish's reply").and_then(Self::info_reply),
            false => Ok(made.clone()),
        };
        let published = published.map(|p| match replies.next() {
            None => {
                let ctimes = if has_publish { vec![p.ctime] } else { Vec::new() };
                (p, ctimes)
            }
            Some(set) => with_set(file.inode, p, set, has_publish),
        });
        Ok(Made { file: made, dir, published })
    }

    fn info_reply(r: MetaReply) -> Result<InodeInfo> {
        match r {
            MetaReply::Info(i) => Ok(i),
            other => Err(unexpected_meta(other)),
        }
    }

    async fn info_request(&self, req: CoordRequest) -> Result<InodeInfo> {
        match self.coord(req).await? {
            CoordResponse::Info(i) => Ok(i),
            other => Err(unexpected(other)),
        }
    }

    /// Entry `name` of directory `parent` (a file's chunk list left out).
    pub async fn lookup(&self, parent: InodeId, name: &str) -> Result<InodeInfo> {
        self.info_request(CoordRequest::Lookup { parent, name: name.into() }).await
    }

    /// The live inode `id`, with a file's chunk list if `chunks`.
    pub async fn stat_inode(&self, id: InodeId, chunks: bool) -> Result<InodeInfo> {
        self.info_request(CoordRequest::StatInode { id, chunks }).await
    }

    /// The entries of directory `id`, and the directory holding it.
    pub async fn read_dir(&self, id: InodeId) -> Result<(InodeId, Vec<DirName>)> {
        match self.coord(CoordRequest::ReadDir { id }).await? {
            CoordResponse::Names { parent, entries } => Ok((parent, entries)),
            other => Err(unexpected(other)),
        }
    }

    /// The live inodes `ids` (at most `MAX_BATCH`) without chunk lists,
    /// read at one moment: one result per inode, in order.
    pub async fn stat_inodes(&self, ids: Vec<InodeId>) -> Result<Vec<Result<InodeInfo>>> {
        match self.coord(CoordRequest::StatInodes { ids }).await? {
            CoordResponse::Infos(infos) => Ok(infos),
            other => Err(unexpected(other)),
        }
    }

    /// What changed in the pool since position `since` of change feed
    /// `feed` (`None`: only where the feed is now), waiting up to `wait`
    /// for a change when there is none yet: for keeping copies of names
    /// and attributes (see `CoordRequest::Changes`).
    pub async fn changes(&self, feed: u64, since: Option<u64>, wait: std::time::Duration) -> Result<ChangesAnswer> {
        let wait_ms = wait.as_millis().min(u128::from(tierpool_proto::MAX_CHANGES_WAIT_MS)) as u32;
        match self.coord(CoordRequest::Changes { feed, since, wait_ms }).await? {
            CoordResponse::Changes(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// Directory `dir` and its ancestors below the root, root side first,
    /// each with its name (one request, whatever the depth); empty for
    /// the root.
    pub async fn dir_ancestry(&self, dir: InodeId) -> Result<Vec<(InodeId, String)>> {
        match self.coord(CoordRequest::Ancestry { dir }).await? {
            CoordResponse::Ancestry(chain) => Ok(chain),
            other => Err(unexpected(other)),
        }
    }

    /// Creates entry `name` in `parent`, owned by `owner`: the new inode,
    /// and `parent` as the change left it.
    pub async fn make_at(
        &self,
        parent: InodeId,
        name: &str,
        node: NewNode,
        mode: u32,
        owner: Owner,
    ) -> Result<(InodeInfo, InodeInfo)> {
        if matches!(node, NewNode::Dir) {
            if let Some((store, key, _)) = self.through_key_at(&self.attachments().await?, parent, name).await? {
                self.lookup_absent(parent, name).await?;
                store.mkdir(&key).await?;
            }
        }
        let op = MetaOp::MakeAt { parent, name: name.into(), node, mode };
        let (reply, mut dirs) = self.meta_seen(op, owner, vec![parent]).await?;
        Ok((Self::info_reply(reply)?, dirs.remove(0)))
    }

    /// Runs the namespace change `op` as `owner`: its reply, and the
    /// directories `dirs` as it left them (one request).
    async fn meta_seen(&self, op: MetaOp, owner: Owner, dirs: Vec<InodeId>) -> Result<(MetaReply, Vec<InodeInfo>)> {
        let (n, owner) = (dirs.len(), tierpool_meta::Owner { uid: owner.0, gid: owner.1 });
        match self.coord(CoordRequest::MetaStat { op, owner, stat: dirs }).await? {
            CoordResponse::MetaStat { reply, stats } if stats.len() == n => {
                Ok((reply, stats.into_iter().collect::<Result<Vec<_>>>()?))
            }
            other => Err(unexpected(other)),
        }
    }

    /// `AlreadyExists` if `parent` has an entry `name`.
    async fn lookup_absent(&self, parent: InodeId, name: &str) -> Result<()> {
        match self.lookup(parent, name).await {
            Ok(_) => Err(Error::new(ErrorKind::AlreadyExists, format!("{name}: file exists"))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A new name for the non-directory `inode` (a hard link): the inode,
    /// and `parent` as the change left it.
    pub async fn link_at(&self, inode: InodeId, parent: InodeId, name: &str) -> Result<(InodeInfo, InodeInfo)> {
        let op = MetaOp::LinkAt { inode, parent, name: name.into() };
        let (reply, mut dirs) = self.meta_seen(op, self.inner.cfg.owner, vec![parent]).await?;
        Ok((Self::info_reply(reply)?, dirs.remove(0)))
    }

    /// `rmdir` with `dir`, `unlink` without. Beneath an attachment that
    /// mirrors names, the object (or empty directory) below goes first.
    /// Returns `parent` as the change left it, and the inode the name
    /// named if it went with it (it had no other name).
    pub async fn remove_at(&self, parent: InodeId, name: &str, dir: bool) -> Result<(InodeInfo, Option<InodeId>)> {
        let below = self.through_key_at(&self.attachments().await?, parent, name).await?;
        if let Some((store, key, _)) = &below {
            let info = self.lookup(parent, name).await?;
            match (info.kind == InodeKind::Dir, dir) {
                (true, false) => return Err(Error::new(ErrorKind::IsADirectory, format!("{name}: is a directory"))),
                (false, true) => return Err(Error::new(ErrorKind::NotADirectory, format!("{name}: not a directory"))),
                (true, true) if info.size > 0 => {
                    return Err(Error::new(ErrorKind::DirectoryNotEmpty, format!("{name}: directory not empty")))
                }
                _ => {}
            }
            crate::under::delete_below(store, key, false).await?;
        }
        let op = MetaOp::RemoveAt { parent, name: name.into(), dir };
        let (reply, mut dirs) = self.meta_seen(op, self.inner.cfg.owner, vec![parent]).await?;
        let MetaReply::Removed { gone, .. } = reply else { return Err(unexpected_meta(reply)) };
        if let (Some((store, key, _)), false) = (&below, dir) {
            let named = self.lookup(parent, name).await.map(|_| ());
            crate::under::delete_after_removal(store, key, false, named).await;
        }
        Ok((dirs.remove(0), gone))
    }

    /// Beneath an attachment that mirrors names, the object (or tree) below
    /// moves first (a file not below yet just takes its new key).
    pub async fn rename_at(&self, from: (InodeId, &str), to: (InodeId, &str), noreplace: bool) -> Result<Renamed> {
        let all = self.attachments().await?;
        if let (Some((store, key, a)), Some((_, to_key, b))) =
            (self.through_key_at(&all, from.0, from.1).await?, self.through_key_at(&all, to.0, to.1).await?)
        {
            let info = self.lookup(from.0, from.1).await?;
            if noreplace {
                self.lookup_absent(to.0, to.1).await?;
            }
            if a == b && key != to_key {
                match store.rename(&key, &to_key).await {
                    Ok(()) => {}
                    Err(e) if e.kind == ErrorKind::NotFound && info.origin.as_ref().is_some_and(|o| o.dirty) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let op = MetaOp::RenameAt {
            parent: from.0,
            name: from.1.into(),
            new_parent: to.0,
            new_name: to.1.into(),
            noreplace,
        };
        let (reply, mut dirs) = self.meta_seen(op, self.inner.cfg.owner, vec![from.0, to.0]).await?;
        let MetaReply::Renamed { moved, ctime, gone } = reply else { return Err(unexpected_meta(reply)) };
        let to = dirs.pop().expect("two asked for");
        Ok(Renamed { from: dirs.pop().expect("two asked for"), to, moved, ctime, gone })
    }

    pub async fn set_inode(&self, inode: InodeId, c: &InodeChange) -> Result<InodeInfo> {
        Self::info_reply(self.meta(set_op(inode, c)).await?)
    }

    /// Sets priority and/or pinning of inode `inode` (of a whole tree, for
    /// a directory); returns how many files changed.
    pub async fn set_attrs_at(&self, inode: InodeId, priority: Option<Priority>, pinned: Option<bool>) -> Result<u64> {
        match self.meta(MetaOp::SetAttrsAt { inode, priority, pinned }).await? {
            MetaReply::Attrs { changed } => Ok(changed.len() as u64),
            other => Err(unexpected_meta(other)),
        }
    }

    /// Publishes chunk versions stored with [`Client::put_version`] and the
    /// file's new size (see `MetaOp::UpdateFile` for `truncate`).
    pub async fn update_file(
        &self,
        inode: InodeId,
        size: u64,
        truncate: Option<u64>,
        chunks: Vec<(u64, ChunkRef)>,
    ) -> Result<InodeInfo> {
        Self::info_reply(self.meta(MetaOp::UpdateFile { inode, size, truncate, chunks }).await?)
    }

    /// Publishes a writer's changes to a file (`UpdateFile` or
    /// `UpdateInline`), then makes the attribute changes of `change` (as
    /// [`Client::set_inode`]), in one request answered once both are
    /// durable: the inode as after both, and the `ctime` each op that was
    /// made left it with, in order (a client telling its own changes in
    /// the change feed knows them by these). Each op succeeds or fails on
    /// its own (see `MetaMany`): a failed publish is the error; attributes
    /// that could not be set after a publish are logged, and the published
    /// inode is returned (the changes it published are in the pool).
    pub async fn publish_with(&self, publish: MetaOp, change: &InodeChange) -> Result<(InodeInfo, Vec<u64>)> {
        let (MetaOp::UpdateFile { inode, .. } | MetaOp::UpdateInline { inode, .. }) = publish else {
            return Err(Error::invalid("only UpdateFile and UpdateInline publish a writer's changes"));
        };
        if *change == InodeChange::default() {
            let info = Self::info_reply(self.meta(publish).await?)?;
            let ctimes = vec![info.ctime];
            return Ok((info, ctimes));
        }
        let (uid, gid) = self.inner.cfg.owner;
        let ops = vec![publish, set_op(inode, change)];
        match self.coord(CoordRequest::MetaMany { ops, owner: tierpool_meta::Owner { uid, gid } }).await? {
            CoordResponse::MetaMany(r) if r.len() == 2 => {
                let mut r = r.into_iter();
                let (published, set) = (r.next().expect("two"), r.next().expect("two"));
                Ok(with_set(inode, Client::info_reply(published?)?, set, true))
            }
            other => Err(unexpected(other)),
        }
    }

    /// Stores `data` as chunk `index` of `inode` at `version`, unpublished;
    /// returns the reference that publishes it.
    pub async fn put_version(
        &self,
        inode: InodeId,
        index: u64,
        version: u64,
        data: Bytes,
        attrs: ChunkAttrs,
        placing: Placing,
    ) -> Result<ChunkRef> {
        if version == 0 {
            return Err(Error::invalid("chunk version 0 is the hole; versions start at 1"));
        }
        let checksum = crc32c::crc32c(&data);
        let len = data.len() as u64;
        let home = self.home_for(placing.placement, inode, index).await?;
        let r = ChunkRef { version, len, checksum, home };
        self.put_chunk(r.key(inode, index), &data, checksum, attrs, placing.copies).await?;
        Ok(r)
    }

    /// A version number no other writer will use: unique in the pool.
    pub async fn fresh_version(&self) -> Result<u64> {
        Ok(self.alloc_inode().await?.0)
    }

    /// Deletes unpublished chunk versions (a writer giving up), best effort.
    pub async fn discard_versions(&self, keys: Vec<ChunkKey>) {
        if keys.is_empty() {
            return;
        }
        let Ok(layout) = self.layout().await else { return };
        let req = WorkerRequest::DeleteChunks { keys };
        for w in &layout.workers {
            let _ = self.worker_pool(w.id, &w.addr).call(&req, &[], true).await;
        }
    }

    /// Tells the coordinator that this client (`session`) has `inodes`
    /// open, so their chunks outlive their names; renew well within the
    /// coordinator's hold period. An empty list drops the session's holds.
    pub async fn hold(&self, session: u64, inodes: Vec<InodeId>) -> Result<()> {
        match self.coord(CoordRequest::Hold { session, inodes }).await? {
            CoordResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Tells the coordinator that this client (`session`) is writing
    /// `inodes` (not yet committed); renew well within the coordinator's
    /// hold period. An empty list ends the session's leases.
    pub async fn write_lease(&self, session: u64, inodes: Vec<InodeId>) -> Result<()> {
        match self.coord(CoordRequest::Lease { session, inodes }).await? {
            CoordResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Where each chunk of a file is: one place per entry of `info.chunks`
    /// (a hole is `None`).
    pub async fn locate_chunks(&self, info: &InodeInfo) -> Result<Vec<Option<ChunkPlace>>> {
        let layout = self.layout().await?;
        let mut by_owner: BTreeMap<WorkerId, Vec<(usize, ChunkKey)>> = BTreeMap::new();
        for (i, r) in info.chunks.iter().enumerate() {
            if !r.is_stored() {
                continue;
            }
            let key = r.key(info.id, i as u64);
            let owner = layout
                .table
                .locate(key)
                .ok_or_else(|| Error::new(ErrorKind::Unavailable, "the pool has no workers yet"))?;
            by_owner.entry(owner).or_default().push((i, key));
        }
        let mut out = vec![None; info.chunks.len()];
        for (owner, keys) in by_owner {
            let w = layout
                .worker(owner)
                .ok_or_else(|| Error::internal(format!("worker {owner} is in the partition table but unknown")))?;
            let req = WorkerRequest::Locate { keys: keys.iter().map(|(_, k)| *k).collect() };
            match self.worker_pool(w.id, &w.addr).call(&req, &[], true).await?.0 {
                WorkerResponse::Located(places) if places.len() == keys.len() => {
                    for ((i, _), p) in keys.iter().zip(places) {
                        out[*i] = Some(p);
                    }
                }
                other => return Err(unexpected(other)),
            }
        }
        Ok(out)
    }
}

/// `SetInode` of the changes in `change`.
fn set_op(inode: InodeId, change: &InodeChange) -> MetaOp {
    MetaOp::SetInode {
        inode,
        mode: change.mode,
        uid: change.uid,
        gid: change.gid,
        atime: change.atime,
        mtime: change.mtime,
    }
}

/// The inode after `before` and the attribute changes answered `set`, and
/// the `ctime`s they left (`before`'s only if it was a change of its own):
/// changes that could not be made are logged, and `before` stands.
fn with_set(inode: InodeId, before: InodeInfo, set: Result<MetaReply>, own: bool) -> (InodeInfo, Vec<u64>) {
    let mut ctimes = if own { vec![before.ctime] } else { Vec::new() };
    match set.and_then(Client::info_reply) {
        Ok(set) => {
            ctimes.push(set.ctime);
            (set, ctimes)
        }
        Err(e) => {
            tracing::warn!("inode {inode}: published, but its attributes were not set: {e}");
            (before, ctimes)
        }
    }
}
