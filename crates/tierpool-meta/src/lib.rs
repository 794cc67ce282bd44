//! The coordinator's metadata as a deterministic state machine.
//!
//! Every change is a [`MetaOp`] executed by [`MetaState::execute`] together
//! with the time the shell read from its clock. An op either fails without
//! touching the state, or succeeds and changes it; the coordinator logs every
//! successful op, so replaying the log on a fresh state rebuilds the same state.
//!
//! Pure: no I/O, no clock reads, no randomness.

mod ops;
mod path;
mod state;

pub use ops::{DirEntry, DirName, InodeInfo, InodeKind, MetaOp, MetaReply, NewNode, WorkerRecord};
pub use path::{check_name, normalize};
pub use state::legacy;
pub use state::MetaState;

/// Nanoseconds since the Unix epoch, read by the shell and passed in.
pub type Timestamp = u64;
