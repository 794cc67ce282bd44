//! Helpers shared by the tests: a ready pool, shorthands for ops, and a
//! driver that runs generated op sequences the way the coordinator would.

use proptest::prelude::*;
use tierpool_meta::{InodeInfo, InodeKind, MetaOp, MetaReply, MetaState, NewNode, Owner};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, ErrorKind, InodeId, Priority, Result, WorkerId};

pub const CHUNK: u64 = 4096;

/// An initialised pool of 16 partitions, at time 1.
pub fn ready() -> MetaState {
    let mut s = MetaState::new();
    s.execute(&MetaOp::Init { partitions: 16 }, 1).unwrap();
    s
}

pub fn mkdir_op(path: &str, parents: bool) -> MetaOp {
    MetaOp::Mkdir { path: path.into(), parents, mode: 0o755 }
}

pub fn commit_op(path: &str, inode: InodeId, size: u64, overwrite: bool) -> MetaOp {
    let checksums = (0..size.div_ceil(CHUNK)).map(|i| i as u32).collect();
    MetaOp::CommitFile {
        path: path.into(),
        inode,
        size,
        chunk_size: CHUNK,
        checksums,
        homes: Vec::new(),
        attrs: ChunkAttrs::default(),
        mode: 0o644,
        overwrite,
    }
}

pub fn remove_op(path: &str, recursive: bool) -> MetaOp {
    MetaOp::Remove { path: path.into(), recursive }
}

pub fn rename_op(from: &str, to: &str) -> MetaOp {
    MetaOp::Rename { from: from.into(), to: to.into() }
}

pub fn alloc(s: &mut MetaState) -> InodeId {
    match s.execute(&MetaOp::AllocInodes { count: 1 }, 1).unwrap() {
        MetaReply::Inodes { first, .. } => first,
        r => panic!("unexpected reply {r:?}"),
    }
}

pub fn mkdir(s: &mut MetaState, path: &str) {
    s.execute(&mkdir_op(path, false), 2).unwrap();
}

/// Commits a file of `size` bytes at `path` with a freshly reserved inode.
pub fn commit(s: &mut MetaState, path: &str, size: u64) -> InodeInfo {
    let id = alloc(s);
    match s.execute(&commit_op(path, id, size, false), 2).unwrap() {
        MetaReply::Info(i) => i,
        r => panic!("unexpected reply {r:?}"),
    }
}

/// Runs an op that must fail, checks that it left the state as it was, and
/// returns the error's kind and message.
pub fn fails(s: &mut MetaState, op: MetaOp) -> (ErrorKind, String) {
    let before = s.clone();
    let e = s.execute(&op, 99).expect_err("op should fail");
    assert_eq!(*s, before, "a failed {op:?} changed the state");
    (e.kind, e.message)
}

/// Marks a `CommitFile` whose inode the driver reserves just before it.
pub const FRESH: InodeId = InodeId(u64::MAX);

/// An op and the owner it runs as.
pub type OwnedOp = (Owner, MetaOp);

/// Executes generated ops like a coordinator: each at a later time, a
/// `FRESH` commit preceded by an `AllocInodes` of one id, and every
/// successful op logged for replay with its owner, time and reply.
pub struct Driver {
    pub state: MetaState,
    pub log: Vec<(OwnedOp, u64, MetaReply)>,
    now: u64,
}

impl Driver {
    pub fn new() -> Self {
        Driver { state: MetaState::new(), log: Vec::new(), now: 0 }
    }

    /// Runs every op of `ops`, whatever their results.
    pub fn run(ops: Vec<OwnedOp>) -> Self {
        let mut d = Driver::new();
        for (owner, op) in ops {
            let _ = d.step_as(owner, op);
        }
        d
    }

    /// Runs `op` as root; see [`Driver::step_as`].
    pub fn step(&mut self, op: MetaOp) -> (MetaOp, MetaState, Result<MetaReply>) {
        self.step_as(Owner::default(), op)
    }

    /// Runs `op` as `owner`; returns the op as run, the state before it and the result.
    pub fn step_as(&mut self, owner: Owner, mut op: MetaOp) -> (MetaOp, MetaState, Result<MetaReply>) {
        self.now += 1;
        if let MetaOp::CommitFile { inode, .. } | MetaOp::CommitInline { inode, .. } = &mut op {
            if *inode == FRESH {
                *inode = InodeId(0);
                let a = MetaOp::AllocInodes { count: 1 };
                if let Ok(reply @ MetaReply::Inodes { first, .. }) = self.state.execute(&a, self.now) {
                    self.log.push(((Owner::default(), a), self.now, reply));
                    *inode = first;
                }
            }
        }
        let before = self.state.clone();
        let r = self.state.execute_as(&op, owner, self.now);
        if let Ok(reply) = &r {
            self.log.push(((owner, op.clone()), self.now, reply.clone()));
        }
        (op, before, r)
    }
}

/// Paths over a small alphabet, some spelled oddly, one invalid.
pub const PATHS: &[&str] =
    &["/", "/a", "/b", "/a/b", "/a/c", "/b/a", "/a/b/c", "/b/a/c", "a/./b/", "//b//a", "/a/b/c/d", "/../a"];

pub fn path() -> impl Strategy<Value = String> {
    prop::sample::select(PATHS).prop_map(String::from)
}

fn commit_strategy() -> impl Strategy<Value = MetaOp> {
    prop_oneof![4 => file_commit_strategy(), 1 => inline_commit_strategy()]
}

/// Small files written whole with their bytes (some too large for a chunk).
fn inline_commit_strategy() -> impl Strategy<Value = MetaOp> {
    let inode = prop_oneof![3 => Just(FRESH), 1 => (0u64..16).prop_map(InodeId)];
    let chunk = prop_oneof![4 => Just(4096u64), 1 => Just(1000)];
    (path(), inode, prop::collection::vec(any::<u8>(), 0..1200), chunk, any::<bool>()).prop_map(
        |(path, inode, data, chunk_size, overwrite)| MetaOp::CommitInline {
            path,
            inode,
            data: bytes::Bytes::from(data),
            chunk_size,
            attrs: ChunkAttrs::default(),
            mode: 0o100600,
            overwrite,
        },
    )
}

fn file_commit_strategy() -> impl Strategy<Value = MetaOp> {
    let inode = prop_oneof![3 => Just(FRESH), 1 => (0u64..16).prop_map(InodeId)];
    let chunk = prop_oneof![4 => Just(4096u64), 4 => Just(8192), 1 => Just(1000)];
    let attrs =
        (1u8..=5, any::<bool>()).prop_map(|(p, pinned)| ChunkAttrs { priority: Priority::new(p).unwrap(), pinned });
    (path(), inode, 0u64..20_000, chunk, prop::bool::weighted(0.1), attrs, any::<bool>()).prop_map(
        |(path, inode, size, chunk_size, bad, attrs, overwrite)| {
            let n = size.div_ceil(chunk_size) + u64::from(bad);
            let checksums = (0..n).map(|i| i as u32).collect();
            MetaOp::CommitFile {
                path,
                inode,
                size,
                chunk_size,
                checksums,
                homes: Vec::new(),
                attrs,
                mode: 0o100644,
                overwrite,
            }
        },
    )
}

fn worker_strategy() -> impl Strategy<Value = MetaOp> {
    (prop::option::of(0u32..6), 0u64..100, 0u64..100).prop_map(|(id, mem, disk)| MetaOp::RegisterWorker {
        id: id.map(WorkerId),
        addr: format!("10.0.0.{mem}:7000"),
        host: "h".into(),
        rack: "r".into(),
        mem_capacity: mem,
        disk_capacity: disk,
        at_once: false,
    })
}

/// Moves, drains, removals and rebalances over the few ids of a short run.
fn membership_op() -> impl Strategy<Value = MetaOp> {
    let id = || (0u32..6).prop_map(WorkerId);
    let parts = || prop::collection::vec(0u32..18, 0..4);
    prop_oneof![
        3 => prop::collection::vec((0u32..18, id()), 0..4).prop_map(|moves| MetaOp::BeginMoves { moves }),
        2 => parts().prop_map(|partitions| MetaOp::FinishMoves { partitions }),
        1 => parts().prop_map(|partitions| MetaOp::AbortMoves { partitions }),
        1 => id().prop_map(|id| MetaOp::DrainWorker { id }),
        1 => id().prop_map(|id| MetaOp::RemoveWorker { id }),
        1 => Just(MetaOp::Rebalance),
        1 => (1u8..4).prop_map(|replicas| MetaOp::SetReplication { replicas, spread: tierpool_types::Spread::Host }),
        1 => id().prop_map(|id| MetaOp::WorkerDown { id }),
        1 => id().prop_map(|id| MetaOp::WorkerUp { id }),
        1 => (path(), 0u8..4, any::<bool>()).prop_map(|(path, replicas, recursive)| MetaOp::SetReplicas { path, replicas, recursive }),
    ]
}

fn small_inode() -> impl Strategy<Value = InodeId> {
    (0u64..14).prop_map(InodeId)
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(&["a", "b", "c", "..", ""][..]).prop_map(String::from)
}

fn new_node() -> impl Strategy<Value = NewNode> {
    prop_oneof![
        3 => prop_oneof![Just(4096u64), Just(1000)].prop_map(|chunk_size| NewNode::File { chunk_size }),
        3 => Just(NewNode::Dir),
        1 => prop_oneof![Just("t"), Just("")].prop_map(|t| NewNode::Symlink { target: t.into() }),
        1 => prop::sample::select(&[InodeKind::Fifo, InodeKind::CharDevice, InodeKind::File][..])
            .prop_map(|kind| NewNode::Special { kind, rdev: 5 }),
    ]
}

fn chunk_updates() -> impl Strategy<Value = Vec<(u64, ChunkRef)>> {
    let r = (1u64..4, prop_oneof![Just(CHUNK), 0..CHUNK + 2]).prop_map(|(version, len)| ChunkRef {
        version,
        len,
        checksum: 1,
        home: None,
    });
    prop::collection::btree_map(0u64..5, r, 0..3).prop_map(|m| m.into_iter().collect())
}

/// The ops addressed by inode id, over the small ids of a short run.
fn inode_op() -> impl Strategy<Value = MetaOp> {
    prop_oneof![
        4 => (small_inode(), name(), new_node(), 0u32..0o10000)
            .prop_map(|(parent, name, node, mode)| MetaOp::MakeAt { parent, name, node, mode }),
        2 => (small_inode(), small_inode(), name()).prop_map(|(inode, parent, name)| MetaOp::LinkAt { inode, parent, name }),
        2 => (small_inode(), name(), any::<bool>()).prop_map(|(parent, name, dir)| MetaOp::RemoveAt { parent, name, dir }),
        2 => (small_inode(), name(), small_inode(), name(), any::<bool>()).prop_map(|(parent, name, new_parent, new_name, noreplace)| {
            MetaOp::RenameAt { parent, name, new_parent, new_name, noreplace }
        }),
        1 => (small_inode(), prop::option::of(0u32..0o10000), prop::option::of(0u32..3), prop::option::of(0u64..9))
            .prop_map(|(inode, mode, uid, t)| MetaOp::SetInode { inode, mode, uid, gid: uid, atime: t, mtime: t }),
        3 => (small_inode(), 0u64..5 * CHUNK, prop::option::of(0u64..5 * CHUNK), chunk_updates())
            .prop_map(|(inode, size, truncate, chunks)| MetaOp::UpdateFile { inode, size, truncate, chunks }),
        1 => (small_inode(), prop::option::of(any::<bool>())).prop_map(|(inode, pinned)| MetaOp::SetAttrsAt { inode, priority: None, pinned }),
        1 => prop::collection::vec((small_inode(), 0u64..5, 0u64..4), 0..3).prop_map(|ks| MetaOp::GcChunksDone {
            keys: ks.into_iter().map(|(inode, index, version)| ChunkKey::hashed(inode, index, version)).collect(),
        }),
    ]
}

/// Any op, with arguments drawn so that both successes and failures are
/// common, run as root or, for some inode ops, as another owner.
pub fn any_op() -> impl Strategy<Value = OwnedOp> {
    let root = any_root_op().prop_map(|op| (Owner::default(), op));
    let owned = (0u32..3, inode_op()).prop_map(|(uid, op)| (Owner { uid, gid: uid }, op));
    prop_oneof![8 => root, 1 => owned]
}

fn any_root_op() -> impl Strategy<Value = MetaOp> {
    prop_oneof![
        1 => (0u32..8).prop_map(|partitions| MetaOp::Init { partitions }),
        4 => (path(), any::<bool>()).prop_map(|(p, parents)| MetaOp::Mkdir { path: p, parents, mode: 0o40755 }),
        1 => (0u64..4).prop_map(|count| MetaOp::AllocInodes { count }),
        5 => commit_strategy(),
        3 => (path(), any::<bool>()).prop_map(|(p, r)| MetaOp::Remove { path: p, recursive: r }),
        4 => (path(), path()).prop_map(|(from, to)| MetaOp::Rename { from, to }),
        2 => (path(), prop::option::of(1u8..=5), prop::option::of(any::<bool>())).prop_map(|(p, pr, pinned)| {
            MetaOp::SetAttrs { path: p, priority: pr.map(|x| Priority::new(x).unwrap()), pinned }
        }),
        2 => worker_strategy(),
        2 => membership_op(),
        1 => prop::collection::vec((0u64..16).prop_map(InodeId), 0..4).prop_map(|inodes| MetaOp::GcDone { inodes }),
        1 => prop::collection::vec(0u64..20, 0..3).prop_map(|ids| MetaOp::Retire { ids }),
        8 => inode_op(),
        3 => snapshot_op(),
    ]
}

/// Snapshots taken, removed and restored over the paths of a short run.
fn snapshot_op() -> impl Strategy<Value = MetaOp> {
    let name = prop::sample::select(&["s", "t", ".snapshots"][..]).prop_map(String::from);
    (0u8..3, path(), name).prop_map(|(what, path, name)| match what {
        0 => MetaOp::SnapshotCreate { path, name },
        1 => MetaOp::SnapshotRemove { path, name },
        _ => MetaOp::SnapshotRestore { path, name },
    })
}

/// A run of ops, usually starting with a valid `Init`.
pub fn op_sequence() -> impl Strategy<Value = Vec<OwnedOp>> {
    (prop::bool::weighted(0.9), prop::collection::vec(any_op(), 1..60)).prop_map(|(init, mut ops)| {
        if init {
            ops.insert(0, (Owner::default(), MetaOp::Init { partitions: 16 }));
        }
        ops
    })
}
