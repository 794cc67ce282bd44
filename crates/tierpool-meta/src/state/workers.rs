//! `RegisterWorker`: membership and the partition table.
//!
//! A new worker gets the id it asked for or the next free one, and the
//! partition table is rebalanced over every known worker, weighted by
//! `mem_capacity + disk_capacity`, moving partitions only to the newcomer. A known worker coming back updates its
//! record only: its partitions stay where they are.

use super::MetaState;
use crate::{MetaReply, WorkerRecord};
use tierpool_types::{Error, Result, WorkerId};

impl MetaState {
    pub(super) fn register_worker(&mut self, id: Option<WorkerId>, mut record: WorkerRecord) -> Result<MetaReply> {
        if let Some(known) = id.and_then(|id| self.workers.get_mut(&id)) {
            record.id = known.id;
            *known = record;
            return Ok(MetaReply::Worker { id: known.id });
        }
        let id = match id {
            Some(id) => id,
            None => {
                WorkerId(u32::try_from(self.next_worker_id).map_err(|_| Error::invalid("worker ids are exhausted"))?)
            }
        };
        record.id = id;
        self.workers.insert(id, record);
        self.next_worker_id = self.next_worker_id.max(u64::from(id.0) + 1);
        let weights: Vec<(WorkerId, u64)> =
            self.workers.values().map(|w| (w.id, w.mem_capacity.saturating_add(w.disk_capacity))).collect();
        self.table = self.table.joined(&weights, id);
        Ok(MetaReply::Worker { id })
    }
}
