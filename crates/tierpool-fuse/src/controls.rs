//! The `user.tierpool.*` extended attributes (see `xattr.rs`) as calls to
//! the pool: eviction attributes by inode, copies per chunk and placement by path, and
//! where each chunk is.
//!
//! Copies per chunk, placement and write modes are set by path
//! (`SetReplicas`, `SetPlacement` and `SetWriteMode` name one), so the
//! inode's path is found first: a directory's by its parent links, any
//! other inode's from the name this mount met it by (`names.rs`), checked
//! against the pool. An inode with no name left (unlinked, still open) has
//! no path: `ENOENT`. A rename elsewhere between finding the path and the
//! change can make the change land on the inode that then has the name.

use crate::fs::TierpoolFs;
use crate::xattr::{get, parse, tiers, Change, TIERS};
use fuser::Errno;
use tierpool_client::InodeKind;
use tierpool_types::InodeId;

impl TierpoolFs {
    pub(crate) fn get_xattr(&self, ino: u64, name: &str) -> Result<Vec<u8>, Errno> {
        // No other is kept: the kernel asks for `security.capability` before
        // a file's first write and at every `chown`, which costs nothing then.
        if !crate::xattr::is_ours(name) {
            return Err(Errno::from_i32(libc::ENODATA));
        }
        if name != TIERS {
            let info = self.inode(ino)?;
            return get(name, &info);
        }
        let info = match crate::snapshots::is_snap(ino) {
            true => self.snap_inode(ino, true)?,
            false => self.block(self.io.client.stat_inode(InodeId(ino), true))?,
        };
        if info.kind != InodeKind::File {
            return Err(Errno::from_i32(libc::ENODATA));
        }
        Ok(tiers(&self.block(self.io.client.locate_chunks(&info))?))
    }

    pub(crate) fn set_xattr(&self, ino: u64, name: &str, value: &[u8]) -> Result<(), Errno> {
        // Settings of a tree decide what new files beneath are given.
        self.templates.lock().clear();
        let (priority, pinned) = match parse(name, value)? {
            Change::Priority(p) => (Some(p), None),
            Change::Pinned(b) => (None, Some(b)),
            Change::Replicas(n) => return self.set_replicas(ino, n),
            Change::Placement(p) => return self.set_placement(ino, p),
            Change::WriteMode(m) => return self.set_write_mode(ino, m),
        };
        self.block(self.io.client.set_attrs_at(InodeId(ino), priority, pinned)).map(|_| ())
    }

    /// Makes inode `ino` keep `copies` copies of each chunk (a directory:
    /// what new entries keep), copying or dropping those of its chunks now.
    fn set_replicas(&self, ino: u64, copies: u8) -> Result<(), Errno> {
        // What this mount wrote is published first, so it is copied too.
        if let Some(f) = self.open_file(ino) {
            f.publish(&self.io).map_err(|e| crate::errno::errno(&e))?;
        }
        let path = self.path_of(ino)?;
        self.block(self.io.client.set_replicas(&path, copies, false, &mut |_, _| {}))?;
        // An open file takes the new count for the chunks it sends next.
        self.inode(ino).map(|_| ())
    }

    /// Sets where new chunks of inode `ino` are written (a directory: what
    /// new entries take).
    fn set_placement(&self, ino: u64, placement: tierpool_types::Placement) -> Result<(), Errno> {
        let path = self.path_of(ino)?;
        self.block(self.io.client.set_placement(&path, placement, false))?;
        // An open file takes the new policy for the chunks it sends next.
        self.inode(ino).map(|_| ())
    }

    /// Gives file `ino` its own write mode (`None`: its attachment's);
    /// what this mount wrote is published first, so it meets the mode too.
    fn set_write_mode(&self, ino: u64, mode: Option<tierpool_client::WriteMode>) -> Result<(), Errno> {
        if let Some(f) = self.open_file(ino) {
            f.publish(&self.io).map_err(|e| crate::errno::errno(&e))?;
        }
        let path = self.path_of(ino)?;
        self.block(self.io.client.set_write_mode(&path, mode, false))?;
        self.inode(ino).map(|_| ())
    }

    /// The path of inode `ino` in the pool.
    pub(crate) fn path_of(&self, ino: u64) -> Result<String, Errno> {
        let id = InodeId(ino);
        if id == InodeId::ROOT || self.inode(ino)?.kind == InodeKind::Dir {
            return self.dir_path(id);
        }
        let (parent, name) = self.names.lock().get(ino).ok_or(Errno::ENOENT)?;
        let client = &self.io.client;
        let name = match self.io.rt.block_on(client.lookup(InodeId(parent), &name)) {
            Ok(i) if i.id == id => name,
            // Renamed by another client meanwhile, or replaced: look for it.
            _ => {
                let (_, entries) = self.block(client.read_dir(InodeId(parent)))?;
                entries.into_iter().find(|e| e.id == id).ok_or(Errno::ENOENT)?.name
            }
        };
        let dir = self.dir_path(InodeId(parent))?;
        Ok(if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") })
    }

    /// The path of directory `dir`, from its parent links up to the root.
    fn dir_path(&self, dir: InodeId) -> Result<String, Errno> {
        let chain = self.block(self.io.client.dir_ancestry(dir))?;
        let names: Vec<&str> = chain.iter().map(|(_, n)| n.as_str()).collect();
        Ok(format!("/{}", names.join("/")))
    }
}
