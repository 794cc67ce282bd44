//! Where a writer puts new chunks: the copies its file keeps and the home
//! partition its placement policy picks (see `tierpool_placement::home`),
//! from the layout and this client's host and rack labels. A new file
//! takes its directory's copies and policy (remembered: `dir_placing`).

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
                self.inner.dir_placing.forget();
                self.refresh_layout().await?;
                Ok(inodes)
            }
            other => Err(unexpected_meta(other)),
        }
    }
}
