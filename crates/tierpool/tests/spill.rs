//! Writing several times the pool's MEM budget spills to DISK and every byte comes back.

mod common;
use common::{data, Pool};

const MIB: usize = 1 << 20;

#[test]
fn spills_three_times_the_memory_budget_to_disk_and_reads_back_exactly() {
    let pool = Pool::start(3, "8MiB", "128MiB");
    let mem_total = 3 * 8 * MIB;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let sizes = [0, 1, 4 * MIB - 1, 4 * MIB, 4 * MIB + 1, 10 * 4 * MIB + 123];
    for (i, s) in sizes.iter().enumerate() {
        files.push((format!("/mixed/f{i}"), data(i as u64, *s)));
    }
    let mut total: usize = sizes.iter().sum();
    let mut i = 100;
    while total < 3 * mem_total {
        files.push((format!("/mixed/g{i}"), data(i, 3 * MIB + i as usize)));
        total += 3 * MIB + i as usize;
        i += 1;
    }
    pool.ok(&["mkdir", "/mixed"]);
    eprintln!("phase: writing {} files, {} MiB", files.len(), total / MIB);
    for (p, d) in &files {
        pool.put(p, d);
    }
    eprintln!("phase: checking tiers");
    let st = pool.fresh_status();
    let workers = st["workers"].as_array().unwrap();
    let mem_used: u64 = workers.iter().map(|w| w["mem"]["used"].as_u64().unwrap()).sum();
    let disk_used: u64 = workers.iter().map(|w| w["disk"]["used"].as_u64().unwrap()).sum();
    for w in workers {
        assert!(w["mem"]["used"].as_u64().unwrap() <= w["mem"]["capacity"].as_u64().unwrap(), "{w}");
        assert!(w["disk"]["chunks"].as_u64().unwrap() > 0, "every worker spilled: {w}");
    }
    assert!(mem_used <= mem_total as u64);
    // Small files are kept by the metadata, not by a tier.
    let inline = st["inline"]["bytes"].as_u64().unwrap();
    assert_eq!(mem_used + disk_used + inline, total as u64, "every byte is in exactly one tier");
    eprintln!("phase: reading back");
    for (p, d) in &files {
        assert!(pool.get(p) == *d, "{p} differs");
    }
    let st = pool.fresh_status();
    let read: u64 = st["workers"].as_array().unwrap().iter().map(|w| w["bytes_read"].as_u64().unwrap()).sum();
    assert_eq!(read + inline, total as u64, "reads went to the workers (the metadata's small files aside)");
}

/// Asked for many chunks at once in memory only (`GetChunks` with
/// `mem_only`, as the reads of one client share requests), a worker gives
/// those it holds in memory and `None` for one it holds on disk only, which
/// a single `GetChunk` then tells apart (`OnDisk`); without `mem_only` it
/// gives both.
#[test]
fn chunks_asked_for_many_at_once_in_memory_only_leave_out_those_on_disk() {
    use tierpool_net::{Pool as Conn, PoolConfig};
    use tierpool_proto::{Worker, WorkerRequest as Req, WorkerResponse as Resp};
    use tierpool_types::{ChunkAttrs, ChunkKey, InodeId};
    let pool = Pool::start(1, "16MiB", "64MiB");
    let addr = pool.status()["workers"][0]["address"].as_str().unwrap().to_string();
    let c: Conn<Worker> = Conn::new(addr, PoolConfig::with(pool.credentials()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let call = |req: Req, payload: &[u8]| rt.block_on(c.call(&req, payload, false)).unwrap();
    let (a, b) = (ChunkKey::hashed(InodeId(90), 0, 1), ChunkKey::hashed(InodeId(91), 0, 1));
    let (da, db) = (data(1, 1000), data(2, 2000));
    let (sa, sb) = (crc32c::crc32c(&da), crc32c::crc32c(&db));
    for (key, d, checksum) in [(a, &da, sa), (b, &db, sb)] {
        let put = Req::PutChunk { key, checksum, attrs: ChunkAttrs::default(), table: 0 };
        assert_eq!(call(put, d).0, Resp::Done);
    }
    assert_eq!(call(Req::KeepOnDisk { key: b }, &[]).0, Resp::Done);
    let (resp, bytes) = call(Req::GetChunks { keys: vec![a, b], mem_only: true }, &[]);
    assert_eq!(resp, Resp::Fetched { chunks: vec![(a, Some((1000, sa))), (b, None)] });
    assert!(bytes[..] == da[..]);
    assert_eq!(call(Req::GetChunk { key: b, mem_only: true }, &[]).0, Resp::OnDisk);
    let (resp, bytes) = call(Req::GetChunks { keys: vec![a, b], mem_only: false }, &[]);
    assert_eq!(resp, Resp::Fetched { chunks: vec![(a, Some((1000, sa))), (b, Some((2000, sb)))] });
    assert!(bytes[..] == [&da[..], &db[..]].concat()[..]);
}
