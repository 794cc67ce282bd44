//! A transaction's changes of the namespace: directories and files it
//! makes, entries it removes or moves. They stay in the transaction, as
//! steps in order ([`TxNs`]), until it commits; its own reads resolve
//! paths through them (`tierpool_meta::overlay::trace`), every other path
//! in its view of the pool. Each step is checked here against that view
//! when it is made, so a user hears of a taken or missing path at once;
//! the coordinator runs all steps at commit, after the files' writes, and
//! refuses the commit whole if one no longer applies or an entry a step
//! changes was changed by an earlier committer.

use super::{Transaction, TxFileState};
use std::collections::BTreeMap;
use tierpool_meta::overlay::{trace, Traced};
use tierpool_meta::{normalize, InodeInfo, InodeKind, TxFile, TxNs, SNAPSHOTS};
use tierpool_proto::CoordResponse;
use tierpool_types::{ChunkAttrs, Error, ErrorKind, InodeId, Result, DEFAULT_CHUNK_SIZE};

/// What a path is in the transaction's namespace.
pub(super) enum Found {
    /// An entry of its view: the view's record of it.
    Viewed(Box<InodeInfo>),
    /// A directory it made.
    NewDir,
    /// A file it made.
    NewFile(InodeId),
    /// Nothing, for this reason.
    Missing(ErrorKind),
}

impl Found {
    fn kind(&self) -> Option<InodeKind> {
        match self {
            Found::Viewed(i) => Some(i.kind),
            Found::NewDir => Some(InodeKind::Dir),
            Found::NewFile(_) => Some(InodeKind::File),
            Found::Missing(_) => None,
        }
    }
}

/// `/a/b` for `["a", "b"]`.
pub(super) fn shown(comps: &[String]) -> String {
    format!("/{}", comps.join("/"))
}

/// `ReadOnly` for a path through `.snapshots` (changed by no one).
fn writable(comps: &[String]) -> Result<()> {
    if comps.iter().any(|c| c == SNAPSHOTS) {
        return Err(Error::new(ErrorKind::ReadOnly, format!("{}: snapshots are read-only", shown(comps))));
    }
    Ok(())
}

fn missing(kind: ErrorKind, comps: &[String]) -> Error {
    let why = match kind {
        ErrorKind::NotADirectory => "a component of the path is not a directory",
        _ => "no such file or directory",
    };
    Error::new(kind, format!("{}: {why}", shown(comps)))
}

impl Transaction {
    /// What `comps` is in this transaction's namespace.
    pub(super) async fn find(&mut self, comps: &[String]) -> Result<Found> {
        self.ensure_open()?;
        Ok(match trace(&self.steps, comps)? {
            Traced::NewDir => Found::NewDir,
            Traced::NewFile(id) => Found::NewFile(id),
            Traced::Missing(kind) => Found::Missing(kind),
            Traced::Before(q) => match self.stat_view(&shown(&q)).await {
                Ok(info) => Found::Viewed(Box::new(info)),
                Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::NotADirectory) => Found::Missing(e.kind),
                Err(e) => return Err(e),
            },
        })
    }

    /// The entry at `path` in the view the transaction began with.
    pub(super) async fn stat_view(&mut self, path: &str) -> Result<InodeInfo> {
        let req = tierpool_proto::CoordRequest::TxStat { session: self.session(), tx: self.id, path: path.to_owned() };
        match self.call(req).await? {
            CoordResponse::Info(i) => Ok(i),
            other => Err(crate::client::unexpected(other)),
        }
    }

    /// Whether `path` names anything in this transaction's namespace.
    pub async fn exists(&mut self, path: &str) -> Result<bool> {
        Ok(self.find(&normalize(path)?).await?.kind().is_some())
    }

    /// Makes the directory `path` (its parent must exist).
    pub async fn mkdir(&mut self, path: &str) -> Result<()> {
        let comps = normalize(path)?;
        self.free(&comps).await?;
        self.steps.push(TxNs::Mkdir { path: shown(&comps), mode: 0o755 });
        Ok(())
    }

    /// Makes an empty file at the free `comps`: its id.
    pub(super) async fn create(&mut self, comps: &[String]) -> Result<InodeId> {
        let parent = self.free(comps).await?;
        let id = self.client.alloc_inode().await?;
        let lease = self.client.lease(id);
        let path = shown(comps);
        let view = InodeInfo {
            id,
            kind: InodeKind::File,
            size: 0,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mode: 0o644,
            nlink: 1,
            attrs: ChunkAttrs::default(),
            chunks: Vec::new(),
            target: String::new(),
            rdev: 0,
            origin: None,
            inline: None,
            restoring: None,
            ..parent
        };
        let file = TxFile { inode: id, size: 0, truncate: None, chunks: Vec::new() };
        self.steps.push(TxNs::Create { path: path.clone(), mode: 0o644, chunk_size: DEFAULT_CHUNK_SIZE, file });
        let state = TxFileState { path, view, size: 0, pages: BTreeMap::new(), cut: None, made: Some(lease) };
        self.files.insert(id, state);
        Ok(id)
    }

    /// Checks that `comps` is free and its parent a directory: the
    /// parent's record (for what a new entry inherits).
    async fn free(&mut self, comps: &[String]) -> Result<InodeInfo> {
        let Some((_, up)) = comps.split_last() else {
            return Err(Error::new(ErrorKind::AlreadyExists, "/: the root directory exists"));
        };
        writable(comps)?;
        if self.find(comps).await?.kind().is_some() {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{}: file exists", shown(comps))));
        }
        self.directory(up).await
    }

    /// The record of directory `comps`, or of the nearest directory of the
    /// view above it if the transaction made it.
    async fn directory(&mut self, comps: &[String]) -> Result<InodeInfo> {
        let mut at = comps.to_vec();
        loop {
            match self.find(&at).await? {
                Found::Viewed(i) if i.kind == InodeKind::Dir => return Ok(*i),
                Found::NewDir => {
                    at.pop();
                }
                Found::Missing(kind) => return Err(missing(kind, comps)),
                _ => {
                    let e = format!("{}: a component of the path is not a directory", shown(comps));
                    return Err(Error::new(ErrorKind::NotADirectory, e));
                }
            }
        }
    }

    /// Removes the entry at `path`; a directory's whole tree with
    /// `recursive`, else only an empty one (one this transaction emptied
    /// is checked at commit).
    pub async fn rm(&mut self, path: &str, recursive: bool) -> Result<()> {
        let comps = normalize(path)?;
        if comps.is_empty() {
            return Err(Error::invalid("cannot remove the root directory"));
        }
        writable(&comps)?;
        match self.find(&comps).await? {
            Found::Missing(kind) => return Err(missing(kind, &comps)),
            Found::Viewed(i) if i.kind == InodeKind::Dir && !recursive && i.size > 0 && !self.touched(&comps) => {
                return Err(Error::new(ErrorKind::DirectoryNotEmpty, format!("{}: directory not empty", shown(&comps))))
            }
            _ => {}
        }
        self.steps.push(TxNs::Remove { path: shown(&comps), recursive });
        Ok(())
    }

    /// Moves the entry at `from` to `to`, replacing a file there (or an
    /// empty directory, by a directory).
    pub async fn mv(&mut self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (normalize(from)?, normalize(to)?);
        if src.is_empty() || dst.is_empty() {
            return Err(Error::invalid("the root directory cannot be moved or replaced"));
        }
        writable(&src)?;
        writable(&dst)?;
        let found = self.find(&src).await?;
        let kind = match &found {
            Found::Missing(kind) => return Err(missing(*kind, &src)),
            f => f.kind(),
        };
        if src == dst {
            return Ok(());
        }
        let is_dir = kind == Some(InodeKind::Dir);
        if is_dir && dst.starts_with(&src) {
            let e = format!("{}: cannot move directory {} into itself", shown(&dst), shown(&src));
            return Err(Error::invalid(e));
        }
        self.directory(&dst[..dst.len() - 1]).await?;
        let err = |k: ErrorKind, why: &str| Err(Error::new(k, format!("{}: {why}", shown(&dst))));
        let target = self.find(&dst).await?;
        match (&found, &target) {
            // Two names of one file (hard links): nothing moves.
            (Found::Viewed(a), Found::Viewed(b)) if a.id == b.id => return Ok(()),
            (_, Found::Viewed(b)) if is_dir && b.kind == InodeKind::Dir && b.size > 0 && !self.touched(&dst) => {
                return err(ErrorKind::DirectoryNotEmpty, "directory not empty")
            }
            _ => {}
        }
        match (is_dir, target.kind()) {
            (true, Some(k)) if k != InodeKind::Dir => return err(ErrorKind::NotADirectory, "not a directory"),
            (false, Some(InodeKind::Dir)) => return err(ErrorKind::IsADirectory, "is a directory"),
            _ => {}
        }
        self.steps.push(TxNs::Rename { from: shown(&src), to: shown(&dst) });
        Ok(())
    }

    /// Whether a step names a path beneath `comps`.
    fn touched(&self, comps: &[String]) -> bool {
        let beneath = |p: &str| normalize(p).is_ok_and(|c| c.len() > comps.len() && c.starts_with(comps));
        self.steps.iter().any(|s| s.paths().into_iter().any(beneath))
    }

    /// The steps to commit, each made file with its chunks: `refs` are the
    /// chunks stored per file.
    pub(super) fn steps_to_commit(
        &self,
        refs: &mut BTreeMap<InodeId, Vec<(u64, tierpool_types::ChunkRef)>>,
    ) -> Vec<TxNs> {
        let mut steps = self.steps.clone();
        for step in &mut steps {
            if let TxNs::Create { file, .. } = step {
                let f = &self.files[&file.inode];
                let mut chunks = refs.remove(&file.inode).unwrap_or_default();
                chunks.sort_by_key(|(i, _)| *i);
                *file = TxFile { inode: file.inode, size: f.size, truncate: None, chunks };
            }
        }
        steps
    }
}
