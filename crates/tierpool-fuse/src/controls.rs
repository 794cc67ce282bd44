//! The `user.tierpool.*` extended attributes (see `xattr.rs`) as calls to
//! the pool: eviction attributes by inode, and where each chunk is.

use crate::fs::TierpoolFs;
use crate::xattr::{get, parse, tiers, Change, TIERS};
use fuser::Errno;
use tierpool_client::InodeKind;
use tierpool_types::InodeId;

impl TierpoolFs {
    pub(crate) fn get_xattr(&self, ino: u64, name: &str) -> Result<Vec<u8>, Errno> {
        if name != TIERS {
            return get(name, &self.inode(ino)?.attrs);
        }
        let info = self.block(self.io.client.stat_inode(InodeId(ino), true))?;
        if info.kind != InodeKind::File {
            return Err(Errno::from_i32(libc::ENODATA));
        }
        Ok(tiers(&self.block(self.io.client.locate_chunks(&info))?))
    }

    pub(crate) fn set_xattr(&self, ino: u64, name: &str, value: &[u8]) -> Result<(), Errno> {
        let (priority, pinned) = match parse(name, value)? {
            Change::Priority(p) => (Some(p), None),
            Change::Pinned(b) => (None, Some(b)),
        };
        self.block(self.io.client.set_attrs_at(InodeId(ino), priority, pinned)).map(|_| ())
    }
}
