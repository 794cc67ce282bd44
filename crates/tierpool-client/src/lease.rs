//! Write leases: while a client writes a file or allocates a region, its
//! session leases the new inode at the coordinator, renewed every
//! [`RENEW`], so the chunks already stored are not taken for orphans of a
//! dead writer (a lease, unlike a hold on an open file, never keeps a
//! removed or replaced file's chunks). A client that dies stops renewing; once its hold lapses the
//! coordinator deletes what it stored and retires the inode (a late commit
//! then fails with `Stale`).
//!
//! One renewal loop per client, started with its first lease and sending
//! the session's whole set each time; a lease is a guard that leaves the
//! set when dropped (the coordinator hears of it at the next renewal).

use crate::client::{Client, Inner};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tierpool_net::{Background, Step};
use tierpool_types::InodeId;

/// How often a session renews its holds (the coordinator lets them lapse
/// after its hold period, 10 s by default).
pub const RENEW: Duration = Duration::from_secs(2);

/// The inodes a client is writing, with how many writers each.
#[derive(Default)]
pub(crate) struct Leases {
    writing: Mutex<BTreeMap<InodeId, u32>>,
    renewal: Mutex<Option<Background>>,
    /// Whether the coordinator was last told of a non-empty set (an empty
    /// one must then be sent once, so the writes it knew of end there).
    announced: Mutex<bool>,
}

/// A random session id for a new client.
pub(crate) fn new_session() -> u64 {
    std::collections::hash_map::RandomState::new().build_hasher().finish() | 1
}

/// Holds an inode for as long as it lives.
pub struct WriteLease {
    inner: Weak<Inner>,
    inode: InodeId,
}

impl Client {
    /// Holds `inode` at the coordinator until the lease is dropped.
    pub fn lease(&self, inode: InodeId) -> WriteLease {
        let leases = &self.inner.leases;
        *leases.writing.lock().entry(inode).or_insert(0) += 1;
        let mut renewal = leases.renewal.lock();
        if renewal.is_none() {
            *renewal = Some(start_renewal(self.runtime(), Arc::downgrade(&self.inner)));
        }
        WriteLease { inner: Arc::downgrade(&self.inner), inode }
    }
}

impl Client {
    /// Whether this client holds a lease on `inode` (is writing it, or has it open as a region).
    pub(crate) fn is_leased(&self, inode: InodeId) -> bool {
        self.inner.leases.writing.lock().contains_key(&inode)
    }

    /// Tells the coordinator of this session's leases now, rather than at
    /// the next renewal (when it must know at once who has what open).
    pub async fn renew_leases(&self) -> tierpool_types::Result<()> {
        let inodes: Vec<InodeId> = self.inner.leases.writing.lock().keys().copied().collect();
        if inodes.is_empty() && !*self.inner.leases.announced.lock() {
            return Ok(());
        }
        let holding = !inodes.is_empty();
        self.write_lease(self.inner.session, inodes).await?;
        *self.inner.leases.announced.lock() = holding;
        Ok(())
    }
}

fn start_renewal(rt: &tokio::runtime::Handle, weak: Weak<Inner>) -> Background {
    Background::every_on(rt, "write leases", RENEW, move || {
        let weak = weak.clone();
        async move {
            let Some(inner) = weak.upgrade() else { return Ok(Step::Stop) };
            Client { inner }.renew_leases().await?;
            Ok(Step::Continue)
        }
    })
}

impl Drop for WriteLease {
    fn drop(&mut self) {
        let Some(inner) = self.inner.upgrade() else { return };
        let mut w = inner.leases.writing.lock();
        if let Some(n) = w.get_mut(&self.inode) {
            *n -= 1;
            if *n == 0 {
                w.remove(&self.inode);
            }
        }
    }
}
