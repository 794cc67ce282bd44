//! The coordinator's metadata as a deterministic state machine.
//!
//! Every change is a [`MetaOp`] executed by [`MetaState::execute`] together
//! with the time the shell read from its clock. An op either fails without
//! touching the state, or succeeds and changes it; the coordinator logs every
//! successful op, so replaying the log on a fresh state rebuilds the same state.
//!
//! [`engine::Engine`] wraps the state with the coordinator's other
//! decisions (liveness, holds, garbage collection, attribute pushes) and
//! returns the effects its shell must carry out.
//!
//! Pure: no I/O, no clock reads, no randomness.

pub mod engine;
mod ops;
pub mod overlay;
mod path;
mod room;
mod state;
mod under;

pub use ops::{
    DirEntry, DirName, InodeInfo, InodeKind, MetaOp, MetaReply, NewNode, TxFile, TxNs, TxRegion, WorkerRecord,
    REGION_PAGE,
};
pub use path::{check_name, normalize};
pub use room::{choose_to_free, RoomCandidate};
pub use state::inode::{Body, Inode, Owner};
pub use state::{
    already_committed, check_task, Changes, FileShape, Frozen, FrozenBody, Garbage, Image, MetaState, OwedFigures,
    PendedNews, ReplicaHealth, Snapshot, SnapshotSummary, StateParts, StateView, INLINE_MAX, MAX_REPLICAS, MAX_TASK_ID,
    SNAPSHOTS,
};
pub use under::{Attachment, Origin, WriteMode};

/// Nanoseconds since the Unix epoch, read by the shell and passed in.
pub type Timestamp = u64;
