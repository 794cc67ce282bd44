//! Where a writer puts new chunks: the copies its file keeps and the home
//! partition its placement policy picks (see `tierpool_placement::home`),
//! from the layout and this client's host and rack labels.
//!
//! A new file takes its directory's copies and policy; a pool where no
//! path ever had a policy other than `hash` and that keeps one copy needs
//! no lookup for it (the write path of small files).

use crate::client::{unexpected_meta, Client};
use tierpool_meta::{InodeInfo, MetaOp, MetaReply};
use tierpool_placement::{home, Near, NoWorkerHere};
use tierpool_types::{Error, ErrorKind, InodeId, Placement, Result};

/// How the chunks of one file are written: copies of each, and where.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Placing {
    pub copies: u8,
    pub placement: Placement,
}

impl Placing {
    /// How the chunks of an existing file are written.
    pub fn of(info: &InodeInfo) -> Placing {
        Placing { copies: info.replicas.max(1), placement: info.placement }
    }
}

impl Client {
    /// How a new entry at `path` is written: as its directory says.
    pub(crate) async fn placing_for(&self, path: &str) -> Result<Placing> {
        let layout = self.layout().await?;
        let pool = Placing { copies: layout.table.replicas(), placement: Placement::Hash };
        if pool.copies == 1 && !layout.placed {
            return Ok(pool);
        }
        let parent = match path.trim_end_matches('/').rsplit_once('/') {
            Some((dir, _)) if !dir.is_empty() => dir,
            _ => "/",
        };
        match self.stat(parent).await {
            Ok(info) => Ok(Placing::of(&info)),
            // Missing: the commit says so; the pool's is the best guess.
            Err(e) if e.kind == ErrorKind::NotFound => Ok(pool),
            Err(e) => Err(e),
        }
    }

    /// The home partition of chunk `index` of `inode` written under
    /// `placement` (`None`: the hashed one).
    pub(crate) async fn home_for(&self, placement: Placement, inode: InodeId, index: u64) -> Result<Option<u32>> {
        if placement == Placement::Hash {
            return Ok(None);
        }
        let layout = self.layout().await?;
        let (host, rack) = (&self.inner.cfg.host, &self.inner.cfg.rack);
        let near = Near {
            host: layout.workers.iter().filter(|w| &w.host == host).map(|w| w.id).collect(),
            rack: layout.workers.iter().filter(|w| !rack.is_empty() && &w.rack == rack).map(|w| w.id).collect(),
        };
        home(placement, &layout.table, &near, inode, index).map_err(|NoWorkerHere| {
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "a local-only file is written on a worker of this host ({host:?}): \
                     no worker with that --host label holds partitions (set TIERPOOL_HOST to name another)"
                ),
            )
        })
    }

    /// Sets the placement policy of `path` (with `recursive`, of
    /// everything beneath it); returns how many inodes took it. Chunks
    /// already written stay where they are.
    pub async fn set_placement(&self, path: &str, placement: Placement, recursive: bool) -> Result<u64> {
        match self.meta(MetaOp::SetPlacement { path: path.to_string(), placement, recursive }).await? {
            MetaReply::Placed { inodes } => {
                self.refresh_layout().await?;
                Ok(inodes)
            }
            other => Err(unexpected_meta(other)),
        }
    }
}
