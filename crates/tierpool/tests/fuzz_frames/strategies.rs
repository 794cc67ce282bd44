//! Generated requests for every variant of `CoordRequest`, `MetaOp` and
//! `WorkerRequest`, with hostile field values: huge counts and lengths,
//! absurd offsets, ids that do not exist, empty and very long strings.
//!
//! Which variants exist is read from the wire format itself
//! ([`every_variant`]), and each is mapped to its strategy by a `match`
//! without a wildcard: a new variant fails to compile until it has one.

use proptest::prelude::*;
use serde::de::DeserializeOwned;
use tierpool_meta::{InodeKind, MetaOp, NewNode, Owner};
use tierpool_proto::{CoordRequest, WorkerRequest, WorkerStats};
use tierpool_types::{ChunkAttrs, ChunkKey, ChunkRef, InodeId, Priority, WorkerId, MAX_CHUNK_SIZE};

/// A request and the payload sent with it.
pub type Req<T> = (T, Vec<u8>);

/// One value of each variant of `T`, decoded from its tag followed by
/// zeros, or by ones where a field refuses zero (a priority), in tag order.
/// Panics if the decodable tags are not `0..n`.
pub fn every_variant<T: DeserializeOwned>() -> Vec<T> {
    let decoded: Vec<(u8, T)> = (0..100u8)
        .filter_map(|tag| {
            [0u8, 1].iter().find_map(|fill| {
                let mut b = vec![tag];
                b.resize(256, *fill);
                tierpool_proto::decode::<T>(&b).ok().map(|v| (tag, v))
            })
        })
        .collect();
    let tags: Vec<u8> = decoded.iter().map(|(t, _)| *t).collect();
    assert_eq!(tags, (0..tags.len() as u8).collect::<Vec<_>>(), "variant tags are not contiguous");
    decoded.into_iter().map(|(_, v)| v).collect()
}

fn num() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => 0..64u64,
        2 => any::<u64>(),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(1 << 63),
        1 => Just(MAX_CHUNK_SIZE + 1),
    ]
    .boxed()
}

fn num32() -> BoxedStrategy<u32> {
    prop_oneof![4 => 0..64u32, 2 => any::<u32>(), 1 => Just(u32::MAX), 1 => Just(0o7777)].boxed()
}

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        2 => Just(String::new()),
        2 => Just("/".to_string()),
        4 => "/fz(/[a-c.]{1,3}){0,3}",
        2 => "[a-c.]{1,4}",
        2 => any::<String>(),
        1 => (1_000..100_000usize).prop_map(|n| format!("/fz/{}", "x".repeat(n))),
        1 => (1..2_000usize).prop_map(|n| "/a".repeat(n)),
    ]
    .boxed()
}

fn inode() -> BoxedStrategy<InodeId> {
    prop_oneof![3 => 0..40u64, 1 => num()].prop_map(InodeId).boxed()
}

/// Chunk keys from a small space (so puts, reads and deletes meet), or hostile.
pub fn key() -> BoxedStrategy<ChunkKey> {
    let near = (0..4u64, 0..3u64, 1..3u64, proptest::option::of(0..8u32)).prop_map(|(i, index, version, home)| {
        ChunkKey { home, ..ChunkKey::hashed(InodeId((1 << 40) + i), index, version) }
    });
    let far = (inode(), num(), num(), proptest::option::of(0..=ChunkKey::MAX_HOME))
        .prop_map(|(inode, index, version, home)| ChunkKey { home, ..ChunkKey::hashed(inode, index, version) });
    prop_oneof![3 => near, 1 => far].boxed()
}

/// A priority (one outside 1..=5 does not decode: mutated frames carry those).
fn priority() -> BoxedStrategy<Priority> {
    (1u8..=5).prop_map(|p| Priority::new(p).unwrap()).boxed()
}

fn attrs() -> BoxedStrategy<ChunkAttrs> {
    (priority(), any::<bool>()).prop_map(|(priority, pinned)| ChunkAttrs { priority, pinned }).boxed()
}

/// Mostly a few elements, sometimes tens of thousands.
fn many<T: std::fmt::Debug + 'static>(s: BoxedStrategy<T>) -> BoxedStrategy<Vec<T>> {
    prop_oneof![8 => prop::collection::vec(s.clone(), 0..6), 1 => prop::collection::vec(s, 1_000..20_000)].boxed()
}

fn owner() -> BoxedStrategy<Owner> {
    (prop_oneof![Just(0), any::<u32>()], prop_oneof![Just(0), any::<u32>()])
        .prop_map(|(uid, gid)| Owner { uid, gid })
        .boxed()
}

fn new_node() -> BoxedStrategy<NewNode> {
    let kind = (0u8..8).prop_map(|t| tierpool_proto::decode::<InodeKind>(&[t]).unwrap());
    prop_oneof![
        num().prop_map(|chunk_size| NewNode::File { chunk_size }),
        Just(NewNode::Dir),
        text().prop_map(|target| NewNode::Symlink { target }),
        (kind, num()).prop_map(|(kind, rdev)| NewNode::Special { kind, rdev }),
    ]
    .boxed()
}

fn chunk_ref() -> BoxedStrategy<ChunkRef> {
    (num(), num(), any::<u32>(), proptest::option::of(0..=ChunkKey::MAX_HOME))
        .prop_map(|(version, len, checksum, home)| ChunkRef { version, len, checksum, home })
        .boxed()
}

/// The strategy of each metadata op.
fn meta_op(sample: &MetaOp) -> BoxedStrategy<MetaOp> {
    use MetaOp as M;
    let (o32, ots) = (|| proptest::option::of(num32()), || proptest::option::of(num()));
    let (oprio, obool) = (|| proptest::option::of(priority()), || proptest::option::of(any::<bool>()));
    match sample {
        M::Init { .. } => num32().prop_map(|partitions| M::Init { partitions }).boxed(),
        M::Mkdir { .. } => {
            (text(), any::<bool>(), num32()).prop_map(|(path, parents, mode)| M::Mkdir { path, parents, mode }).boxed()
        }
        M::AllocInodes { .. } => num().prop_map(|count| M::AllocInodes { count }).boxed(),
        M::CommitFile { .. } => commit_file(),
        M::CommitInline { .. } => commit_inline(),
        M::Remove { .. } => (text(), any::<bool>()).prop_map(|(path, recursive)| M::Remove { path, recursive }).boxed(),
        M::Rename { .. } => (text(), text()).prop_map(|(from, to)| M::Rename { from, to }).boxed(),
        M::SetAttrs { .. } => (text(), oprio(), obool())
            .prop_map(|(path, priority, pinned)| M::SetAttrs { path, priority, pinned })
            .boxed(),
        M::RegisterWorker { .. } => register_worker(),
        M::GcDone { .. } => many(inode()).prop_map(|inodes| M::GcDone { inodes }).boxed(),
        M::CommitRegion { .. } => commit_region(),
        M::SetMeta { .. } => {
            (text(), o32(), ots()).prop_map(|(path, mode, mtime)| M::SetMeta { path, mode, mtime }).boxed()
        }
        M::MakeAt { .. } => (inode(), text(), new_node(), num32())
            .prop_map(|(parent, name, node, mode)| M::MakeAt { parent, name, node, mode })
            .boxed(),
        M::MakeFileAt { .. } => (inode(), text(), inode(), num(), num32())
            .prop_map(|(parent, name, inode, chunk_size, mode)| M::MakeFileAt { parent, name, inode, chunk_size, mode })
            .boxed(),
        M::LinkAt { .. } => {
            (inode(), inode(), text()).prop_map(|(inode, parent, name)| M::LinkAt { inode, parent, name }).boxed()
        }
        M::RemoveAt { .. } => {
            (inode(), text(), any::<bool>()).prop_map(|(parent, name, dir)| M::RemoveAt { parent, name, dir }).boxed()
        }
        M::RenameAt { .. } => rename_at(),
        M::SetInode { .. } => (inode(), o32(), o32(), o32(), ots(), ots())
            .prop_map(|(inode, mode, uid, gid, atime, mtime)| M::SetInode { inode, mode, uid, gid, atime, mtime })
            .boxed(),
        M::UpdateFile { .. } => (inode(), num(), ots(), many((num(), chunk_ref()).boxed()))
            .prop_map(|(inode, size, truncate, chunks)| M::UpdateFile { inode, size, truncate, chunks })
            .boxed(),
        M::UpdateInline { .. } => {
            let data = proptest::collection::vec(any::<u8>(), 0..300).prop_map(bytes::Bytes::from);
            (inode(), num(), data).prop_map(|(inode, version, data)| M::UpdateInline { inode, version, data }).boxed()
        }
        M::GcChunksDone { .. } => many(key()).prop_map(|keys| M::GcChunksDone { keys }).boxed(),
        M::SetAttrsAt { .. } => (inode(), oprio(), obool())
            .prop_map(|(inode, priority, pinned)| M::SetAttrsAt { inode, priority, pinned })
            .boxed(),
        M::Retire { .. } => many(num().boxed()).prop_map(|ids| M::Retire { ids }).boxed(),
        M::BeginMoves { .. } => {
            many((num32(), num32().prop_map(WorkerId)).boxed()).prop_map(|moves| M::BeginMoves { moves }).boxed()
        }
        M::FinishMoves { .. } => many(num32()).prop_map(|partitions| M::FinishMoves { partitions }).boxed(),
        M::AbortMoves { .. } => many(num32()).prop_map(|partitions| M::AbortMoves { partitions }).boxed(),
        M::DrainWorker { .. } => num32().prop_map(|id| M::DrainWorker { id: WorkerId(id) }).boxed(),
        M::RemoveWorker { .. } => num32().prop_map(|id| M::RemoveWorker { id: WorkerId(id) }).boxed(),
        M::Rebalance => Just(M::Rebalance).boxed(),
        M::SetSpeed { .. } => {
            (num32(), any::<u8>()).prop_map(|(id, percent)| M::SetSpeed { id: WorkerId(id), percent }).boxed()
        }
        M::SetReplication { .. } => (any::<u8>(), any::<bool>())
            .prop_map(|(replicas, rack)| M::SetReplication {
                replicas,
                spread: if rack { tierpool_types::Spread::Rack } else { tierpool_types::Spread::Host },
            })
            .boxed(),
        M::WorkerDown { .. } => num32().prop_map(|id| M::WorkerDown { id: WorkerId(id) }).boxed(),
        M::WorkerUp { .. } => num32().prop_map(|id| M::WorkerUp { id: WorkerId(id) }).boxed(),
        M::SetReplicas { .. } => (text(), any::<u8>(), any::<bool>())
            .prop_map(|(path, replicas, recursive)| M::SetReplicas { path, replicas, recursive })
            .boxed(),
        M::SetPlacement { .. } => (text(), 0..4usize, any::<bool>())
            .prop_map(|(path, p, recursive)| M::SetPlacement {
                path,
                placement: tierpool_types::Placement::ALL[p],
                recursive,
            })
            .boxed(),
        M::Attach { .. } => {
            (text(), attachment()).prop_map(|(path, attachment)| M::Attach { path, attachment }).boxed()
        }
        M::Detach { .. } => text().prop_map(|path| M::Detach { path }).boxed(),
        M::AdoptFile { .. } => ((inode(), text(), num(), num()), (num(), text(), num32()))
            .prop_map(|((parent, name, size, chunk_size), (mtime, etag, mode))| M::AdoptFile {
                parent,
                name,
                size,
                chunk_size,
                mtime,
                etag,
                mode,
            })
            .boxed(),
        M::AdoptDir { .. } => {
            (inode(), text(), num32()).prop_map(|(parent, name, mode)| M::AdoptDir { parent, name, mode }).boxed()
        }
        M::Disown { .. } => (inode(), text()).prop_map(|(parent, name)| M::Disown { parent, name }).boxed(),
        M::Persisted { .. } => (inode(), many(chunk_ref()), num(), num(), text(), proptest::option::of(text()))
            .prop_map(|(inode, chunks, size, mtime, etag, key)| M::Persisted { inode, chunks, size, mtime, etag, key })
            .boxed(),
        M::LoadChunks { .. } => (inode(), many((num(), chunk_ref()).boxed()))
            .prop_map(|(inode, chunks)| M::LoadChunks { inode, chunks })
            .boxed(),
        M::Unload { .. } => inode().prop_map(|inode| M::Unload { inode }).boxed(),
        M::SnapshotCreate { .. } => (text(), text()).prop_map(|(path, name)| M::SnapshotCreate { path, name }).boxed(),
        M::SnapshotRemove { .. } => (text(), text()).prop_map(|(path, name)| M::SnapshotRemove { path, name }).boxed(),
        M::SnapshotRestore { .. } => {
            (text(), text()).prop_map(|(path, name)| M::SnapshotRestore { path, name }).boxed()
        }
        M::Checkpoint { .. } => (text(), text(), inode(), num(), many(chunk_ref()))
            .prop_map(|(path, name, inode, version, chunks)| M::Checkpoint { path, name, inode, version, chunks })
            .boxed(),
        M::RegionRestore { .. } => {
            (text(), text(), any::<bool>()).prop_map(|(path, name, done)| M::RegionRestore { path, name, done }).boxed()
        }
        M::Transact { .. } => (proptest::option::of(text()), many(tx_file()), tx_steps(), tx_regions())
            .prop_map(|(task, files, ns, regions)| M::Transact { task, files, ns, regions })
            .boxed(),
        M::RegionPagesWritten { .. } => num().prop_map(|id| M::RegionPagesWritten { id }).boxed(),
        M::SetWriteMode { .. } => {
            let mode = proptest::option::of(prop::sample::select(tierpool_meta::WriteMode::ALL.to_vec()));
            (text(), mode, any::<bool>())
                .prop_map(|(path, mode, recursive)| M::SetWriteMode { path, mode, recursive })
                .boxed()
        }
    }
}

fn tx_file() -> BoxedStrategy<tierpool_meta::TxFile> {
    // Few chunks per file: the files themselves come `many` at a time.
    let chunks = prop::collection::vec((num(), chunk_ref()), 0..6);
    (inode(), num(), proptest::option::of(num()), chunks)
        .prop_map(|(inode, size, truncate, chunks)| tierpool_meta::TxFile { inode, size, truncate, chunks })
        .boxed()
}

/// A transaction's region pages: a few regions of a few pages, of any length.
fn tx_regions() -> BoxedStrategy<Vec<tierpool_meta::TxRegion>> {
    let page = (num(), proptest::collection::vec(any::<u8>(), 0..300).prop_map(bytes::Bytes::from));
    let region = (inode(), prop::collection::vec(page, 0..4))
        .prop_map(|(inode, pages)| tierpool_meta::TxRegion { inode, pages });
    prop::collection::vec(region, 0..3).boxed()
}

/// A transaction's namespace steps: a few (a created file holds a vector already).
fn tx_steps() -> BoxedStrategy<Vec<tierpool_meta::TxNs>> {
    use tierpool_meta::TxNs;
    let step = prop_oneof![
        (text(), num()).prop_map(|(path, mode)| TxNs::Mkdir { path, mode: mode as u32 }),
        (text(), num(), num(), tx_file()).prop_map(|(path, mode, chunk_size, file)| TxNs::Create {
            path,
            mode: mode as u32,
            chunk_size,
            file
        }),
        (text(), any::<bool>()).prop_map(|(path, recursive)| TxNs::Remove { path, recursive }),
        (text(), text()).prop_map(|(from, to)| TxNs::Rename { from, to }),
    ];
    prop::collection::vec(step, 0..4).boxed()
}

fn attachment() -> BoxedStrategy<tierpool_meta::Attachment> {
    let options = many((text(), text()).boxed()).prop_map(|kv| kv.into_iter().collect());
    (text(), prop::sample::select(tierpool_meta::WriteMode::ALL.to_vec()), any::<bool>(), options)
        .prop_map(|(uri, mode, readonly, options)| tierpool_meta::Attachment { uri, mode, readonly, options })
        .boxed()
}

fn commit_file() -> BoxedStrategy<MetaOp> {
    let file = (text(), inode(), num(), num(), many(any::<u32>().boxed()));
    let homes = many(proptest::option::of(0..=ChunkKey::MAX_HOME).boxed());
    (file, homes, attrs(), num32(), any::<bool>())
        .prop_map(|((path, inode, size, chunk_size, checksums), homes, attrs, mode, overwrite)| MetaOp::CommitFile {
            path,
            inode,
            size,
            chunk_size,
            checksums,
            homes,
            attrs,
            mode,
            overwrite,
        })
        .boxed()
}

fn commit_inline() -> BoxedStrategy<MetaOp> {
    let data = proptest::collection::vec(any::<u8>(), 0..300).prop_map(bytes::Bytes::from);
    ((text(), inode(), data, num()), attrs(), num32(), any::<bool>())
        .prop_map(|((path, inode, data, chunk_size), attrs, mode, overwrite)| MetaOp::CommitInline {
            path,
            inode,
            data,
            chunk_size,
            attrs,
            mode,
            overwrite,
        })
        .boxed()
}

fn register_worker() -> BoxedStrategy<MetaOp> {
    (proptest::option::of(num32()), text(), text(), text(), num(), num())
        .prop_map(|(id, addr, host, rack, mem_capacity, disk_capacity)| MetaOp::RegisterWorker {
            id: id.map(WorkerId),
            addr,
            host,
            rack,
            mem_capacity,
            disk_capacity,
            at_once: false,
        })
        .boxed()
}

fn commit_region() -> BoxedStrategy<MetaOp> {
    (text(), inode(), num(), num(), attrs(), num32())
        .prop_map(|(path, inode, size, chunk_size, attrs, mode)| MetaOp::CommitRegion {
            path,
            inode,
            size,
            chunk_size,
            attrs,
            mode,
        })
        .boxed()
}

fn rename_at() -> BoxedStrategy<MetaOp> {
    (inode(), text(), inode(), text(), any::<bool>())
        .prop_map(|(parent, name, new_parent, new_name, noreplace)| MetaOp::RenameAt {
            parent,
            name,
            new_parent,
            new_name,
            noreplace,
        })
        .boxed()
}

fn stats() -> BoxedStrategy<WorkerStats> {
    (prop::collection::vec(num(), 30), any::<bool>())
        .prop_map(|(v, disk_full)| WorkerStats {
            tiers: tierpool_types::TierStats {
                mem_capacity: v[0],
                mem_used: v[1],
                mem_chunks: v[2],
                disk_capacity: v[3],
                disk_used: v[4],
                disk_chunks: v[5],
                disk_full,
                reclaimable_bytes: v[6],
                reclaimable_chunks: v[7],
                demotions: v[8],
                promotions: v[9],
                reclaimed: v[10],
            },
            bytes_written: v[11],
            bytes_read: v[12],
            bytes_moved_in: v[13],
            transfer: disk_full.then_some((v[14], v[15])),
            buffers: tierpool_types::BufferStats {
                size: v[16],
                keep: v[17],
                limit: disk_full.then_some(v[18]),
                spare: v[19],
                lent: v[20],
                reused: v[21],
                fresh: v[22],
                small_room: v[25],
                small_spare: v[26],
                small_lent: v[27],
                small_reused: v[28],
                small_fresh: v[29],
            },
            connections: tierpool_proto::Connections { accepted: v[23], local: v[24] },
        })
        .boxed()
}

/// No payload, or now and then a few stray bytes the server must ignore.
fn stray() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![9 => Just(Vec::new()), 1 => prop::collection::vec(any::<u8>(), 1..64)].boxed()
}

/// The strategy of each coordinator request.
fn coord(sample: &CoordRequest) -> BoxedStrategy<CoordRequest> {
    use CoordRequest as C;
    match sample {
        C::Ping => Just(C::Ping).boxed(),
        C::Meta { .. } => {
            let op = prop::strategy::Union::new(every_variant::<MetaOp>().iter().map(meta_op));
            (op, owner()).prop_map(|(op, owner)| C::Meta { op, owner }).boxed()
        }
        C::Stat { .. } => text().prop_map(|path| C::Stat { path }).boxed(),
        C::List { .. } => text().prop_map(|path| C::List { path }).boxed(),
        C::Layout => Just(C::Layout).boxed(),
        C::Status => Just(C::Status).boxed(),
        C::Heartbeat { .. } => (prop_oneof![0..4u32, any::<u32>()], stats())
            .prop_map(|(id, stats)| C::Heartbeat { id: WorkerId(id), stats })
            .boxed(),
        C::Lookup { .. } => (inode(), text()).prop_map(|(parent, name)| C::Lookup { parent, name }).boxed(),
        C::StatInode { .. } => (inode(), any::<bool>()).prop_map(|(id, chunks)| C::StatInode { id, chunks }).boxed(),
        C::ReadDir { .. } => inode().prop_map(|id| C::ReadDir { id }).boxed(),
        C::StatInodes { .. } => many(inode()).prop_map(|ids| C::StatInodes { ids }).boxed(),
        C::Hold { .. } => (num(), many(inode())).prop_map(|(session, inodes)| C::Hold { session, inodes }).boxed(),
        C::Lease { .. } => (num(), many(inode())).prop_map(|(session, inodes)| C::Lease { session, inodes }).boxed(),
        C::Fsck { .. } => text().prop_map(|path| C::Fsck { path }).boxed(),
        C::Attachments => Just(C::Attachments).boxed(),
        C::MetaMany { .. } => {
            let op = prop::strategy::Union::new(every_variant::<MetaOp>().iter().map(meta_op));
            (prop::collection::vec(op, 0..8), owner()).prop_map(|(ops, owner)| C::MetaMany { ops, owner }).boxed()
        }
        C::MetaStat { .. } => {
            let op = prop::strategy::Union::new(every_variant::<MetaOp>().iter().map(meta_op));
            (op, owner(), many(inode())).prop_map(|(op, owner, stat)| C::MetaStat { op, owner, stat }).boxed()
        }
        C::MetaManyStat { .. } => {
            let op = prop::strategy::Union::new(every_variant::<MetaOp>().iter().map(meta_op));
            (prop::collection::vec(op, 0..8), owner(), many(inode()))
                .prop_map(|(ops, owner, stat)| C::MetaManyStat { ops, owner, stat })
                .boxed()
        }
        C::StatMany { .. } => prop::collection::vec(text(), 0..8).prop_map(|paths| C::StatMany { paths }).boxed(),
        C::Snapshots { .. } => prop::option::of(text()).prop_map(|path| C::Snapshots { path }).boxed(),
        C::RestoreRegion { .. } => (num(), text(), text(), owner())
            .prop_map(|(session, path, name, owner)| C::RestoreRegion { session, path, name, owner })
            .boxed(),
        C::TxBegin { .. } => num().prop_map(|session| C::TxBegin { session }).boxed(),
        C::TxStat { .. } => {
            (num(), num(), text()).prop_map(|(session, tx, path)| C::TxStat { session, tx, path }).boxed()
        }
        C::TxWrite { .. } => (num(), num(), inode(), text(), many(num()))
            .prop_map(|(session, tx, inode, path, chunks)| C::TxWrite { session, tx, inode, path, chunks })
            .boxed(),
        C::TxCommit { .. } => (
            (num(), num(), proptest::option::of(text())),
            (many(tx_file()), tx_steps(), tx_regions(), tx_regions()),
            owner(),
        )
            .prop_map(|((session, tx, task), (files, ns, regions, before), owner)| C::TxCommit {
                session,
                tx,
                task,
                files,
                ns,
                regions,
                before,
                owner,
            })
            .boxed(),
        C::TxAbort { .. } => (num(), num()).prop_map(|(session, tx)| C::TxAbort { session, tx }).boxed(),
        C::TxRenew { .. } => (num(), many(num())).prop_map(|(session, txs)| C::TxRenew { session, txs }).boxed(),
        // Short waits: a fuzzed request that waits long only slows the run.
        C::Changes { .. } => (num(), prop::option::of(num()), 0..20u32)
            .prop_map(|(feed, since, wait_ms)| C::Changes { feed, since, wait_ms })
            .boxed(),
        C::TxPages { .. } => ((num(), num(), inode(), text()), (num(), num(), any::<bool>()))
            .prop_map(|((session, tx, inode, path), (first, count, write))| C::TxPages {
                session,
                tx,
                inode,
                path,
                first,
                count,
                write,
            })
            .boxed(),
        C::Written { .. } => prop_oneof![
            text().prop_map(|path| tierpool_proto::encode(&C::Stat { path })),
            Just(tierpool_proto::encode(&C::SyncLog)),
            Just(tierpool_proto::encode(&C::Written { req: tierpool_proto::encode(&C::Ping).into() })),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
        .prop_map(|req| C::Written { req: req.into() })
        .boxed(),
        C::SyncLog => Just(C::SyncLog).boxed(),
        C::Ancestry { .. } => inode().prop_map(|dir| C::Ancestry { dir }).boxed(),
        C::Usage { .. } => {
            (any::<bool>(), any::<bool>()).prop_map(|(fresh, attachments)| C::Usage { fresh, attachments }).boxed()
        }
        C::Owed => Just(C::Owed).boxed(),
        C::OwedFiles { .. } => (text(), prop::option::of(inode()), any::<u32>())
            .prop_map(|(path, after, limit)| C::OwedFiles { path, after, limit })
            .boxed(),
    }
}

/// Any coordinator request, every variant equally likely, with its payload.
pub fn coord_request() -> BoxedStrategy<Req<CoordRequest>> {
    let any = prop::strategy::Union::new(every_variant::<CoordRequest>().iter().map(coord));
    (any, stray()).boxed()
}

/// Bytes whose checksum is given right or wrong.
fn bytes_and_checksum(len: std::ops::Range<usize>) -> BoxedStrategy<(Vec<u8>, u32)> {
    (prop::collection::vec(any::<u8>(), len), any::<bool>(), any::<u32>())
        .prop_map(|(b, right, wrong)| {
            let sum = if right { crc32c::crc32c(&b) } else { wrong };
            (b, sum)
        })
        .boxed()
}

/// The strategy of each worker request, with its payload.
fn worker(sample: &WorkerRequest) -> BoxedStrategy<Req<WorkerRequest>> {
    use WorkerRequest as W;
    let plain = |s: BoxedStrategy<WorkerRequest>| (s, stray()).boxed();
    match sample {
        W::Ping => plain(Just(W::Ping).boxed()),
        W::PutChunk { .. } => (key(), attrs(), bytes_and_checksum(0..4096))
            .prop_map(|(key, attrs, (b, checksum))| (W::PutChunk { key, checksum, attrs, table: 0 }, b))
            .boxed(),
        W::GetChunk { .. } => {
            plain((key(), any::<bool>()).prop_map(|(key, mem_only)| W::GetChunk { key, mem_only }).boxed())
        }
        W::DeleteInodes { .. } => plain(many(inode()).prop_map(|inodes| W::DeleteInodes { inodes }).boxed()),
        W::DeleteChunks { .. } => plain(many(key()).prop_map(|keys| W::DeleteChunks { keys }).boxed()),
        W::SetAttrs { .. } => plain(
            (many((inode(), attrs()).boxed()), any::<bool>())
                .prop_map(|(changes, replace)| W::SetAttrs { changes, replace })
                .boxed(),
        ),
        W::Stats => plain(Just(W::Stats).boxed()),
        W::CreateChunk { .. } => plain(
            (key(), prop_oneof![3 => 0..65_536u64, 1 => num()], attrs())
                .prop_map(|(key, len, attrs)| W::CreateChunk { key, len, attrs, table: 0 })
                .boxed(),
        ),
        W::ReadRange { .. } => plain(
            (key(), num(), prop_oneof![0..70_000u64, num()])
                .prop_map(|(key, offset, len)| W::ReadRange { key, offset, len })
                .boxed(),
        ),
        W::WriteRanges { .. } => {
            let range = (prop_oneof![3 => 0..70_000u64, 1 => num()], prop_oneof![3 => 0..512u64, 1 => num()]);
            let fill = (prop::collection::vec(any::<u8>(), 0..2048), any::<bool>(), any::<bool>(), any::<u32>());
            (key(), prop::collection::vec(range, 0..4), fill)
                .prop_map(|(key, ranges, (mut b, fit, right, wrong))| {
                    // Often exactly as many bytes as the ranges cover.
                    let total = ranges.iter().try_fold(0u64, |t, (_, n)| t.checked_add(*n));
                    if let Some(total) = total.filter(|t| fit && *t <= 4096) {
                        b.resize(total as usize, 0x33);
                    }
                    let checksum = if right { crc32c::crc32c(&b) } else { wrong };
                    (W::WriteRanges { key, ranges, checksum, table: 0 }, b)
                })
                .boxed()
        }
        W::Locate { .. } => plain(many(key()).prop_map(|keys| W::Locate { keys }).boxed()),
        W::GetChunks { .. } => {
            plain((many(key()), any::<bool>()).prop_map(|(keys, mem_only)| W::GetChunks { keys, mem_only }).boxed())
        }
        W::PutChunks { .. } => {
            (prop::collection::vec((key(), bytes_and_checksum(0..1024)), 0..4), attrs(), any::<bool>())
                .prop_map(|(chunks, attrs, fit)| {
                    let payload: Vec<u8> = chunks.iter().flat_map(|(_, (b, _))| b.clone()).collect();
                    // Often the lengths add up to the payload's.
                    let extra = if fit { 0 } else { 1 };
                    let list = chunks.iter().map(|(k, (b, sum))| (*k, *sum, b.len() as u64 + extra)).collect();
                    (W::PutChunks { chunks: list, attrs, table: 0 }, payload)
                })
                .boxed()
        }
        W::Reclaim { .. } => {
            plain((many(inode()), many(key())).prop_map(|(inodes, keys)| W::Reclaim { inodes, keys }).boxed())
        }
        W::Inventory { .. } => plain(
            (proptest::option::of(key()), prop_oneof![0..100u32, any::<u32>()])
                .prop_map(|(after, limit)| W::Inventory { after, limit })
                .boxed(),
        ),
        W::Table { .. } => plain(
            (num(), 1..300u32, many((0..8u32, num()).boxed()))
                .prop_map(|(version, n, weights)| {
                    let weights: Vec<(WorkerId, u64)> = weights.into_iter().map(|(w, x)| (WorkerId(w), x)).collect();
                    W::Table { version, table: tierpool_placement::PartitionTable::new(n).rebalanced(&weights) }
                })
                .boxed(),
        ),
        W::Track { .. } => plain(many(num32()).prop_map(|partitions| W::Track { partitions }).boxed()),
        W::MovingChunks { .. } => plain(
            (moves(), proptest::option::of(key()), prop_oneof![0..100u32, any::<u32>()])
                .prop_map(|(moves, after, limit)| W::MovingChunks { moves, after, limit })
                .boxed(),
        ),
        W::Fetch { .. } => plain((moves(), many(key())).prop_map(|(moves, keys)| W::Fetch { moves, keys }).boxed()),
        W::TakeChanges { .. } => plain(moves().prop_map(|moves| W::TakeChanges { moves }).boxed()),
        W::Freeze { .. } => plain(moves().prop_map(|moves| W::Freeze { moves }).boxed()),
        W::Copy { .. } => plain(
            (prop_oneof![Just("127.0.0.1:1".to_string()), text()], many(num32()), num())
                .prop_map(|(from, partitions, rate)| W::Copy { from, partitions, rate })
                .boxed(),
        ),
        W::KeepOnDisk { .. } => plain(key().prop_map(|key| W::KeepOnDisk { key }).boxed()),
        W::LastUse { .. } => plain(many(inode()).prop_map(|inodes| W::LastUse { inodes }).boxed()),
        W::CopyChunk { .. } => plain(
            (key(), key(), proptest::option::of(key()))
                .prop_map(|(from, to, unless)| W::CopyChunk { from, to, unless, table: 0 })
                .boxed(),
        ),
    }
}

/// Partitions with tracking ids.
fn moves() -> BoxedStrategy<Vec<(u32, u64)>> {
    many((num32(), num()).boxed())
}

/// Any worker request, every variant equally likely, with its payload.
pub fn worker_request() -> BoxedStrategy<Req<WorkerRequest>> {
    prop::strategy::Union::new(every_variant::<WorkerRequest>().iter().map(worker)).boxed()
}
