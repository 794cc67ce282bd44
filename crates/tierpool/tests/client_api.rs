//! The Rust client against a real pool: streaming writes of odd sizes and
//! random-offset reads match an in-memory model byte for byte; a writer
//! whose idea of a directory's copies is stale still leaves each file
//! with the copies it keeps; batches report each item in order (small
//! files many to a request, the others one by one), and so do single
//! calls that tasks make at once and that share requests (files stored
//! on the workers too), and a batch past the metadata's room for small
//! files stores the rest on the workers with exact bytes; writers
//! are never taken for dead ones, however old their reserved ids. Whole
//! chunks written and streamed go through buffers the client keeps, each
//! file keeping its own bytes; read into the caller's buffer, they land
//! there and take none. Work a call starts that outlives it (a lease's
//! renewals) goes on while the thread that made the call, on a runtime of
//! its own, does not run that runtime. A directory is named by its inode
//! (its ancestry) after renames above it; the pool's light usage is its
//! status in part.

mod common;
use bytes::Bytes;
use common::{data, Pool};
use std::time::Duration;
use tierpool_client::{Client, PutOptions};

#[test]
fn streamed_writes_and_random_reads_match_the_model() {
    let pool = Pool::start(2, "1MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let opts = PutOptions { chunk_size: 64 << 10, ..PutOptions::default() };
        let model = data(7, 900_000);
        // Odd write sizes straddle chunk boundaries.
        let mut w = c.create("/model", &opts).await.unwrap();
        let mut off = 0;
        for (i, step) in [1usize, 65_535, 2, 200_000, 7, 131_072].iter().cycle().enumerate() {
            if off >= model.len() {
                break;
            }
            let end = (off + step).min(model.len());
            if i % 2 == 0 {
                w.write(&model[off..end]).await.unwrap();
            } else {
                w.write_bytes(Bytes::copy_from_slice(&model[off..end])).await.unwrap();
            }
            off = end;
        }
        let info = w.close().await.unwrap();
        assert_eq!(info.size, model.len() as u64);
        assert_eq!(info.chunks.len(), model.len().div_ceil(64 << 10));
        assert!(c.get_bytes("/model").await.unwrap() == model, "read whole");
        let mut x = 12345u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = x % (model.len() as u64 + 100);
            let len = (x >> 20) as usize % 300_000;
            let mut buf = vec![0u8; len];
            let n = c.read_at("/model", &info, offset, &mut buf).await.unwrap();
            let want = &model[(offset as usize).min(model.len())..(offset as usize + len).min(model.len())];
            assert_eq!(n, want.len(), "offset {offset} len {len}");
            assert!(&buf[..n] == want, "offset {offset} len {len}");
        }
        // An aborted writer publishes nothing.
        let mut w = c.create("/aborted", &opts).await.unwrap();
        w.write(&model).await.unwrap();
        w.abort().await;
        assert_eq!(c.stat("/aborted").await.unwrap_err().kind, tierpool_types::ErrorKind::NotFound);
    });
}

#[test]
fn a_writer_that_remembered_another_count_of_copies_leaves_each_file_with_its_own() {
    let pool = Pool::start_with(2, "64MiB", "256MiB", &["--replicas", "2"]);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let kib = |n: usize| n << 10;
    let (a, b, c) = (data(1, kib(128)), data(2, kib(100)), data(3, kib(150)));
    let opts = PutOptions { chunk_size: 64 << 10, ..PutOptions::default() };
    rt.block_on(async {
        let writer = Client::connect(pool.client_config()).await.unwrap();
        let admin = Client::connect(pool.client_config()).await.unwrap();
        admin.mkdir("/d", false).await.unwrap();
        eprintln!("phase: the writer learns that /d keeps two copies");
        writer.put_bytes("/d/a", Bytes::from(a.clone()), &opts).await.unwrap();
        assert_eq!(pool.used(), 2 * a.len() as u64);

        eprintln!("phase: /d drops to one copy; the writer still writes two, and drops one");
        admin.set_replicas("/d", 1, false, &mut |_, _| {}).await.unwrap();
        let info = writer.put_bytes("/d/b", Bytes::from(b.clone()), &opts).await.unwrap();
        assert_eq!(info.replicas, 1);
        assert_eq!(pool.used(), (2 * a.len() + b.len()) as u64);

        eprintln!("phase: /d rises to two again; the writer writes one, and copies the other");
        admin.set_replicas("/d", 2, false, &mut |_, _| {}).await.unwrap();
        let info = writer.put_bytes("/d/c", Bytes::from(c.clone()), &opts).await.unwrap();
        assert_eq!(info.replicas, 2);
        assert_eq!(pool.used(), (2 * a.len() + b.len() + 2 * c.len()) as u64);
        assert!(admin.fsck("/").await.unwrap().is_empty());
        for (path, want) in [("/d/a", &a), ("/d/b", &b), ("/d/c", &c)] {
            assert!(&admin.get_bytes(path).await.unwrap() == want, "{path}");
        }
    });
}

/// Batches: every item is tried, a failure in the middle is reported for
/// its item alone, and the results come back in the order given.
#[test]
fn batches_report_each_item_in_order() {
    let pool = Pool::start(2, "16MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        c.mkdir("/b", false).await.unwrap();
        c.put_bytes("/b/taken", Bytes::from_static(b"old"), &PutOptions::default()).await.unwrap();
        let items: Vec<(String, Bytes)> = (0..200)
            .map(|i| {
                let path = if i == 100 { "/b/taken".to_string() } else { format!("/b/f{i}") };
                (path, Bytes::from(data(i, 100 + i as usize)))
            })
            .collect();
        let opts = PutOptions { overwrite: false, ..PutOptions::default() };
        let put = c.put_many(items.clone(), &opts).await;
        assert_eq!(put.len(), 200);
        for (i, r) in put.iter().enumerate() {
            match r {
                Ok(info) => assert_eq!((i != 100, info.size), (true, 100 + i as u64)),
                Err(e) => assert_eq!((i, e.kind), (100, tierpool_types::ErrorKind::AlreadyExists), "{e}"),
            }
        }
        let mut paths: Vec<String> = items.iter().map(|(p, _)| p.clone()).collect();
        paths.insert(50, "/b/missing".into());
        let got = c.get_many(paths).await;
        assert_eq!(got.len(), 201);
        assert_eq!(got[50].as_ref().unwrap_err().kind, tierpool_types::ErrorKind::NotFound);
        assert_eq!(got[101].as_ref().unwrap(), b"old", "the taken path kept its content");
        for (i, (_, bytes)) in items.iter().enumerate().filter(|(i, _)| *i != 100) {
            let at = if i < 50 { i } else { i + 1 };
            assert_eq!(got[at].as_ref().unwrap(), &bytes[..], "item {i}");
        }
        assert_eq!(c.put_many(Vec::new(), &PutOptions::default()).await.len(), 0);

        // More small files than one request carries, mixed with files past
        // --inline-max, empty ones, a directory in the way and a missing
        // parent: each item has its own result, in order.
        c.mkdir("/m/dir", true).await.unwrap();
        let size = |i: usize| match i % 5 {
            0 => 5000,
            1 => 0,
            _ => 1 + i % 4096,
        };
        let items: Vec<(String, Bytes)> = (0..2500)
            .map(|i| {
                let path = match i {
                    700 => "/m/dir".to_string(),
                    1900 => "/nowhere/x".to_string(),
                    _ => format!("/m/f{i}"),
                };
                (path, Bytes::from(data(i as u64, size(i))))
            })
            .collect();
        let put = c.put_many(items.clone(), &PutOptions::default()).await;
        assert_eq!(put.len(), items.len());
        for (i, r) in put.iter().enumerate() {
            match (i, r) {
                (700, Err(e)) => assert_eq!(e.kind, tierpool_types::ErrorKind::IsADirectory, "{e}"),
                (1900, Err(e)) => assert_eq!(e.kind, tierpool_types::ErrorKind::NotFound, "{e}"),
                (_, Ok(info)) => {
                    assert_eq!(info.size, size(i) as u64, "item {i}");
                    let inline = info.chunks.first().is_some_and(|r| r.is_inline());
                    assert_eq!(inline, (1..=4096).contains(&size(i)), "item {i}");
                    if inline {
                        assert!(info.inline.as_deref() == Some(&items[i].1[..]), "item {i}: the info holds its bytes");
                    }
                }
                (_, Err(e)) => panic!("item {i}: {e}"),
            }
        }
        let paths: Vec<String> = items.iter().map(|(p, _)| p.clone()).collect();
        let got = c.get_many(paths).await;
        for (i, r) in got.iter().enumerate() {
            match (i, r) {
                (700, Err(e)) => assert_eq!(e.kind, tierpool_types::ErrorKind::IsADirectory, "{e}"),
                (1900, Err(e)) => assert_eq!(e.kind, tierpool_types::ErrorKind::NotFound, "{e}"),
                (_, Ok(bytes)) => assert!(bytes[..] == items[i].1[..], "item {i}"),
                (_, Err(e)) => panic!("item {i}: {e}"),
            }
        }
    });
}

/// Small puts and stats made at once by many tasks of one client share
/// requests (`ClientConfig::coalesce`), and each still gets its own result:
/// its file's info, or its own error, never a neighbour's.
#[test]
fn concurrent_small_puts_and_stats_share_requests_and_each_gets_its_own_result() {
    use tierpool_types::ErrorKind;
    let pool = Pool::start(2, "16MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        // Pinned: the suite may run with TIERPOOL_COALESCE set.
        let cfg = tierpool_client::ClientConfig { coalesce: 4, ..pool.client_config() };
        let c = Client::connect(cfg).await.unwrap();
        assert_eq!(c.coalesced(), Default::default());
        c.mkdir("/c", false).await.unwrap();
        c.put_bytes("/c/taken", Bytes::from_static(b"old"), &PutOptions::default()).await.unwrap();
        let path = |i: usize| match i % 50 {
            7 => "/nowhere/x".to_string(),
            8 => "/c/taken".to_string(),
            _ => format!("/c/f{i}"),
        };
        let opts = PutOptions { overwrite: false, ..PutOptions::default() };
        let puts: Vec<_> = (0..600)
            .map(|i| {
                let (c, opts, p) = (c.clone(), opts.clone(), path(i));
                tokio::spawn(async move { c.put_bytes(&p, Bytes::from(data(i as u64, 1 + i % 4000)), &opts).await })
            })
            .collect();
        for (i, h) in puts.into_iter().enumerate() {
            match (i % 50, h.await.unwrap()) {
                (7, Err(e)) => assert_eq!(e.kind, ErrorKind::NotFound, "{e}"),
                (8, Err(e)) => assert_eq!(e.kind, ErrorKind::AlreadyExists, "{e}"),
                (7 | 8, Ok(_)) => panic!("put {i} should have failed"),
                (_, r) => {
                    // The coordinator does not send the bytes back; the info holds them.
                    let info = r.unwrap_or_else(|e| panic!("put {i}: {e}"));
                    assert_eq!(info.size, (1 + i % 4000) as u64);
                    assert!(info.inline.as_deref() == Some(&data(i as u64, 1 + i % 4000)[..]), "put {i}");
                }
            }
        }
        let after_puts = c.coalesced();
        assert!(after_puts.commits > 0, "600 puts at once shared no request: {after_puts:?}");
        let gets: Vec<_> = (0..600)
            .map(|i| {
                let (c, p) = (c.clone(), if i % 50 == 9 { "/c/missing".to_string() } else { path(i) });
                tokio::spawn(async move { c.get_bytes(&p).await })
            })
            .collect();
        for (i, h) in gets.into_iter().enumerate() {
            match (i % 50, h.await.unwrap()) {
                (7 | 9, Err(e)) => assert_eq!(e.kind, ErrorKind::NotFound, "{e}"),
                (8, r) => assert_eq!(r.unwrap(), b"old"),
                (_, r) => assert!(r.unwrap_or_else(|e| panic!("get {i}: {e}")) == data(i as u64, 1 + i % 4000)),
            }
        }
        assert!(c.coalesced().stats > after_puts.stats, "600 gets at once shared no request");
        assert_eq!(c.coalesced().commits, after_puts.commits);

        // Without coalescing, the same calls go one to a request.
        let alone =
            Client::connect(tierpool_client::ClientConfig { coalesce: 0, ..pool.client_config() }).await.unwrap();
        let stats: Vec<_> = (0..200)
            .map(|i| {
                let (c, p) = (alone.clone(), path(i));
                tokio::spawn(async move { c.stat(&p).await.map(|i| i.size) })
            })
            .collect();
        for (i, h) in stats.into_iter().enumerate() {
            match (i % 50, h.await.unwrap()) {
                (7, r) => assert_eq!(r.unwrap_err().kind, ErrorKind::NotFound),
                (8, r) => assert_eq!(r.unwrap(), 3),
                (_, r) => assert_eq!(r.unwrap(), (1 + i % 4000) as u64),
            }
        }
        assert_eq!(alone.coalesced(), Default::default());
    });
}

/// A batch past the metadata's room for small files: what it refuses is
/// stored on the workers, and every file reads back exact, each batch
/// item with its own result. Files on the workers written at once by many
/// tasks share their commits' requests, a failing one failing alone.
#[test]
fn batches_past_the_inline_room_and_files_on_the_workers_keep_their_own_results() {
    use tierpool_types::ErrorKind;
    let pool = Pool::start_with(2, "16MiB", "64MiB", &["--inline-total", "40000"]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let cfg = tierpool_client::ClientConfig { coalesce: 4, ..pool.client_config() };
        let c = Client::connect(cfg).await.unwrap();
        c.mkdir("/r", false).await.unwrap();
        let items: Vec<(String, Bytes)> =
            (0..100).map(|i| (format!("/r/f{i}"), Bytes::from(data(i as u64, 1000)))).collect();
        let put = c.put_many(items.clone(), &PutOptions::default()).await;
        let inline = |info: &tierpool_client::InodeInfo| info.chunks.first().is_some_and(|r| r.is_inline());
        let kept: Vec<bool> = put.iter().map(|r| inline(r.as_ref().unwrap())).collect();
        assert_eq!(kept.iter().filter(|k| **k).count(), 40, "40 files of 1000 bytes fill --inline-total 40000");
        let st = pool.fresh_status();
        assert_eq!((st["inline"]["files"].as_u64(), st["inline"]["bytes"].as_u64()), (Some(40), Some(40_000)));
        assert_eq!(pool.used(), 60 * 1000, "the other 60 are on the workers");
        assert_eq!(c.coalesced().writes, 60, "their chunks were stored many to a request");
        let mut paths: Vec<String> = items.iter().map(|(p, _)| p.clone()).collect();
        paths.insert(70, "/r/missing".into());
        let got = c.get_many(paths).await;
        assert_eq!(got[70].as_ref().unwrap_err().kind, ErrorKind::NotFound);
        for (i, (_, bytes)) in items.iter().enumerate() {
            let at = if i < 70 { i } else { i + 1 };
            assert!(got[at].as_ref().unwrap()[..] == bytes[..], "item {i}");
        }
        assert_eq!(c.coalesced().reads, 60, "the files on the workers were read many to a request");

        // 300 files past --inline-max written at once, one of them on a taken name.
        let before = c.coalesced().commits;
        let opts = PutOptions { overwrite: false, ..PutOptions::default() };
        let path = |i: usize| if i == 150 { "/r/f0".to_string() } else { format!("/r/w{i}") };
        let puts: Vec<_> = (0..300)
            .map(|i| {
                let (c, opts, p) = (c.clone(), opts.clone(), path(i));
                tokio::spawn(async move { c.put_bytes(&p, Bytes::from(data(i as u64, 5000 + i)), &opts).await })
            })
            .collect();
        for (i, h) in puts.into_iter().enumerate() {
            match (i, h.await.unwrap()) {
                (150, r) => assert_eq!(r.unwrap_err().kind, ErrorKind::AlreadyExists),
                (_, r) => assert_eq!(r.unwrap_or_else(|e| panic!("put {i}: {e}")).size, (5000 + i) as u64),
            }
        }
        assert!(c.coalesced().commits > before, "300 commits at once shared no request");
        assert!(c.coalesced().chunk_writes > 0, "300 chunk writes at once shared no request");
        let got = c.get_many((0..300).map(path).collect()).await;
        for (i, r) in got.into_iter().enumerate() {
            match i {
                150 => assert!(r.unwrap()[..] == data(0, 1000)[..], "the taken name kept its bytes"),
                _ => assert!(r.unwrap() == data(i as u64, 5000 + i), "file {i}"),
            }
        }
        assert_eq!(c.coalesced().reads, 60 + 299);
    });
    // The refused commit's chunks were let go: only the files' own copies remain.
    let stored: u64 = 60 * 1000 + (0..300u64).filter(|i| *i != 150).map(|i| 5000 + i).sum::<u64>();
    pool.settle(stored);
}

/// Small files on the workers read many to a request: with a worker
/// killed (-9), those whose nearest copy was there are read from the other
/// copy, one by one, and every file still reads back exact.
#[test]
fn small_files_read_many_to_a_request_fall_back_to_other_copies_when_a_worker_dies() {
    let mut pool = Pool::start_with(2, "16MiB", "64MiB", &["--replicas", "2", "--inline-max", "0"]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let items: Vec<(String, Bytes)> =
        (0..200).map(|i| (format!("/k/f{i}"), Bytes::from(data(i as u64, 100 + 37 * i)))).collect();
    let paths: Vec<String> = items.iter().map(|(p, _)| p.clone()).collect();
    let c = rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        c.mkdir("/k", false).await.unwrap();
        let opts = PutOptions { replicas: Some(2), ..PutOptions::default() };
        for r in c.put_many(items.clone(), &opts).await {
            assert_eq!(r.unwrap().replicas, 2);
        }
        let got = c.get_many(paths.clone()).await;
        for (i, r) in got.into_iter().enumerate() {
            assert!(r.unwrap()[..] == items[i].1[..], "file {i}");
        }
        assert_eq!((c.coalesced().reads, c.coalesced().writes), (200, 200));
        c
    });
    pool.kill_worker(0);
    rt.block_on(async {
        let got = c.get_many(paths.clone()).await;
        for (i, r) in got.into_iter().enumerate() {
            assert!(r.unwrap_or_else(|e| panic!("file {i}: {e}"))[..] == items[i].1[..], "file {i}");
        }
        let through_the_batch = c.coalesced().reads - 200;
        assert!((1..200).contains(&through_the_batch), "worker 1's own share only: {through_the_batch}");
    });
}

/// Small files read many to a request from a worker that keeps them on
/// DISK: more in one answer than the worker has DISK read permits, and
/// several answers at once. Each reads back exact, through the batch.
#[test]
fn small_files_read_many_to_a_request_from_disk_come_back_whole() {
    let pool = Pool::start_with(1, "256KiB", "64MiB", &["--inline-max", "0"]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let items: Vec<(String, Bytes)> =
        (0..300).map(|i| (format!("/d/f{i}"), Bytes::from(data(i as u64, 5000 + 11 * i)))).collect();
    let paths: Vec<String> = items.iter().map(|(p, _)| p.clone()).collect();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        c.mkdir("/d", false).await.unwrap();
        for r in c.put_many(items.clone(), &PutOptions::default()).await {
            r.unwrap();
        }
        let reads = c.coalesced().reads;
        let got = tokio::time::timeout(Duration::from_secs(60), c.get_many(paths.clone())).await;
        for (i, r) in got.expect("answered").into_iter().enumerate() {
            assert!(r.unwrap_or_else(|e| panic!("file {i}: {e}"))[..] == items[i].1[..], "file {i}");
        }
        assert_eq!(c.coalesced().reads - reads, 300, "all through the batch");
    });
    let st: serde_json::Value = serde_json::from_str(&pool.ok(&["status", "--json"])).unwrap();
    assert!(st["workers"][0]["disk"]["used"].as_u64().unwrap() > 1 << 20, "most of them on DISK: {st}");
}

/// Small files on the workers written many to a request with a worker
/// dead (kill -9) that some of their copies are for: those are stored the
/// ordinary way once the pool has moved its share, and every file reads
/// back exact with both copies.
#[test]
fn small_files_written_many_to_a_request_store_the_rest_alone_when_a_worker_is_dead() {
    let mut pool =
        Pool::start_with(3, "16MiB", "64MiB", &["--replicas", "2", "--inline-max", "0", "--dead-after", "2s"]);
    pool.kill_worker(2);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        c.mkdir("/d", false).await.unwrap();
        let items: Vec<(String, Bytes)> =
            (0..120).map(|i| (format!("/d/f{i}"), Bytes::from(data(i as u64, 10 + 101 * i)))).collect();
        let opts = PutOptions { replicas: Some(2), ..PutOptions::default() };
        for (i, r) in c.put_many(items.clone(), &opts).await.into_iter().enumerate() {
            assert_eq!(r.unwrap_or_else(|e| panic!("file {i}: {e}")).replicas, 2);
        }
        let writes = c.coalesced().writes;
        assert!((1..120).contains(&writes), "the files with no copy for the dead worker only: {writes}");
        let got = c.get_many(items.iter().map(|(p, _)| p.clone()).collect()).await;
        for (i, r) in got.into_iter().enumerate() {
            assert!(r.unwrap_or_else(|e| panic!("file {i}: {e}"))[..] == items[i].1[..], "file {i}");
        }
    });
    let stored: u64 = (0..120u64).map(|i| 10 + 101 * i).sum();
    pool.settle(2 * stored);
}

/// A writer whose client reserved its ids longer than a hold period ago is
/// not taken for a dead one before its first lease renewal reaches the
/// coordinator: this harness sweeps orphans every second, and writers start
/// at staggered moments of the 2 s renewal cycle, store chunks at once and
/// commit after a few sweeps.
#[test]
fn writers_are_never_taken_for_orphans_whenever_their_ids_were_reserved() {
    let pool = Pool::start(2, "64MiB", "256MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let opts = PutOptions { chunk_size: 64 << 10, ..PutOptions::default() };
        c.put_bytes("/first", Bytes::from_static(b"reserves a batch of ids"), &opts).await.unwrap();
        // Past the hold period (10 s): the ids left in that batch are old.
        tokio::time::sleep(std::time::Duration::from_secs(11)).await;
        let content = data(9, 256 << 10);
        let writers: Vec<_> = (0..4u64)
            .map(|i| {
                let (c, opts, content) = (c.clone(), opts.clone(), content.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(500 * i)).await;
                    let mut w = c.create(&format!("/w{i}"), &opts).await?;
                    w.write(&content).await?;
                    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
                    w.close().await
                })
            })
            .collect();
        for (i, h) in writers.into_iter().enumerate() {
            let info = h.await.unwrap().unwrap_or_else(|e| panic!("writer {i}: {e}"));
            assert_eq!(info.size, content.len() as u64);
        }
        for i in 0..4 {
            assert!(c.get_bytes(&format!("/w{i}")).await.unwrap() == content, "/w{i}");
        }
    });
}

#[test]
fn namespace_changes_by_inode_answer_with_their_directories_as_they_left_them() {
    use tierpool_client::NewNode;
    use tierpool_types::{ErrorKind, InodeId};
    let pool = Pool::start(1, "16MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let root = InodeId::ROOT;
        let (d, after) = c.make_at(root, "d", NewNode::Dir, 0o755, (0, 0)).await.unwrap();
        assert_eq!(after, c.stat_inode(root, false).await.unwrap(), "the root as the mkdir left it");
        assert_eq!((after.size, after.nlink), (1, 3));
        let (f, after) = c.make_at(d.id, "f", NewNode::File { chunk_size: 4096 }, 0o644, (0, 0)).await.unwrap();
        assert_eq!((after.id, after.size, after.nlink, after.mtime), (d.id, 1, 2, f.ctime));
        let (_, after) = c.link_at(f.id, root, "g").await.unwrap();
        assert_eq!((after.id, after.size), (root, 2));
        let moved = c.rename_at((d.id, "f"), (root, "h"), false).await.unwrap();
        let (from, to) = (&moved.from, &moved.to);
        assert_eq!((from.id, from.size, to.id, to.size), (d.id, 0, root, 3));
        assert_eq!(*to, c.stat_inode(root, false).await.unwrap());
        let f_now = c.stat_inode(f.id, false).await.unwrap();
        assert_eq!((moved.moved, moved.ctime, moved.gone), (f.id, f_now.ctime, None));
        // A rename over a file answers with the inode it released.
        let (k, _) = c.make_at(root, "k", NewNode::File { chunk_size: 4096 }, 0o644, (0, 0)).await.unwrap();
        let (k2, _) = c.make_at(root, "k2", NewNode::File { chunk_size: 4096 }, 0o644, (0, 0)).await.unwrap();
        let moved = c.rename_at((root, "k2"), (root, "k"), false).await.unwrap();
        assert_eq!((moved.moved, moved.gone, moved.from == moved.to), (k2.id, Some(k.id), true));
        c.remove_at(root, "k", false).await.unwrap();
        let (after, gone) = c.remove_at(root, "g", false).await.unwrap();
        assert_eq!((after.id, after.size, gone), (root, 2, None), "f keeps its name h");
        let (after, gone) = c.remove_at(root, "d", true).await.unwrap();
        assert_eq!((after.size, after.nlink, gone), (1, 2, Some(d.id)));
        let (_, gone) = c.remove_at(root, "h", false).await.unwrap();
        assert_eq!(gone, Some(f.id), "its last name");
        // A failed change answers with its error, and nothing else.
        let e = c.remove_at(root, "d", true).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
    });
}

#[test]
fn directories_are_named_by_inode_and_usage_is_the_status_in_part() {
    use tierpool_client::{NewNode, OwedStatus, WriteMode};
    use tierpool_types::{ErrorKind, InodeId};
    // No write-back round while the figures are compared.
    let pool = Pool::start_with(2, "16MiB", "64MiB", &["--write-back-every", "1h"]);
    let below = tempfile::tempdir().unwrap();
    std::fs::write(below.path().join("x"), b"12345").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let root = InodeId::ROOT;
        let mk = |parent, name| c.make_at(parent, name, NewNode::Dir, 0o755, (0, 0));
        let a = mk(root, "a").await.unwrap().0.id;
        let b = mk(a, "b").await.unwrap().0.id;
        let d = mk(b, "c d").await.unwrap().0.id;
        assert_eq!(c.dir_ancestry(root).await.unwrap(), vec![]);
        let names = |v: &[(InodeId, &str)]| v.iter().map(|(i, n)| (*i, n.to_string())).collect::<Vec<_>>();
        assert_eq!(c.dir_ancestry(d).await.unwrap(), names(&[(a, "a"), (b, "b"), (d, "c d")]));
        // A rename of a directory above renames the chain.
        c.rename_at((a, "b"), (root, "e"), false).await.unwrap();
        assert_eq!(c.dir_ancestry(d).await.unwrap(), names(&[(b, "e"), (d, "c d")]));
        let f = c.make_at(d, "f", NewNode::File { chunk_size: 4096 }, 0o644, (0, 0)).await.unwrap().0.id;
        assert_eq!(c.dir_ancestry(f).await.unwrap_err().kind, ErrorKind::NotADirectory);
        c.remove_at(root, "a", true).await.unwrap();
        let e = c.dir_ancestry(a).await.unwrap_err();
        assert_eq!((e.kind, e.message.contains(&format!("inode {a}"))), (ErrorKind::NotFound, true), "{e}");

        // The usage is the status's workers, inode count and attachments.
        let uri = format!("file://{}", below.path().display());
        c.attach(&uri, "/in", WriteMode::Back, false, &Default::default(), &|_| {}).await.unwrap();
        let (s, u) = (c.status().await.unwrap(), c.usage(true, true).await.unwrap());
        assert_eq!((u.inodes, u.attachments.clone()), (s.inodes, s.attachments.clone()));
        assert_eq!((u.attachments.len(), u.attachments[0].files, u.attachments[0].bytes_below), (1, 1, 5));
        let key = |w: &tierpool_client::WorkerStatus| (w.record.clone(), w.alive, w.partitions, w.stats.is_some());
        assert_eq!(u.workers.iter().map(key).collect::<Vec<_>>(), s.workers.iter().map(key).collect::<Vec<_>>());
        assert_eq!(u.workers.len(), 2);
        assert!(c.usage(false, false).await.unwrap().attachments.is_empty(), "attachments only when asked");

        // What the attachments owe: the status's figures, from the files that owe only.
        let owed = |a: &tierpool_proto::AttachmentStatus| OwedStatus {
            path: a.path.clone(),
            uri: a.uri.clone(),
            dirty_files: a.dirty_files,
            dirty_bytes: a.dirty_bytes,
            write_back_files: a.write_back_files,
            write_back_bytes: a.write_back_bytes,
        };
        let clean = OwedStatus { path: "/in".into(), uri: uri.clone(), ..Default::default() };
        assert_eq!(c.owed().await.unwrap(), vec![clean.clone()]);
        c.put_bytes("/in/new", Bytes::from_static(b"1234567"), &PutOptions::default()).await.unwrap();
        let want =
            OwedStatus { dirty_files: 1, dirty_bytes: 7, write_back_files: 1, write_back_bytes: 7, ..clean.clone() };
        assert_eq!(c.owed().await.unwrap(), vec![want]);
        let s = c.status().await.unwrap();
        assert_eq!(c.owed().await.unwrap(), s.attachments.iter().map(owed).collect::<Vec<_>>());
        c.sync("/in", &|_| {}).await.unwrap();
        assert_eq!(c.owed().await.unwrap(), vec![clean]);
    });
}

#[test]
fn whole_chunks_written_and_read_reuse_kept_buffers_and_keep_their_own_bytes() {
    const CHUNK: usize = 4 << 20;
    let pool = Pool::start_with(2, "64MiB", "256MiB", &["--replicas", "2"]);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let opts = PutOptions::default();
        let files: Vec<Vec<u8>> = (0..4).map(|i| data(40 + i, 3 * CHUNK + 1000 * i as usize)).collect();
        for (i, bytes) in files.iter().enumerate() {
            let mut w = c.create(&format!("/f{i}"), &opts).await.unwrap();
            // One call of three whole chunks and a tail.
            w.write(bytes).await.unwrap();
            w.close().await.unwrap();
        }
        // A byte, then a chunk's worth: that first chunk is cut from the
        // writer's own buffer, not from a kept one.
        let mut w = c.create("/pieces", &opts).await.unwrap();
        let odd = data(50, CHUNK + 1);
        w.write(&odd[..1]).await.unwrap();
        w.write(&odd[1..]).await.unwrap();
        w.close().await.unwrap();
        let written = c.chunk_buffers();
        assert_eq!(written.fresh + written.reused, 12, "one per whole chunk given in one call: {written:?}");
        assert!(written.reused > 0, "{written:?}");
        assert_eq!(written.lent, 0, "all given back once stored: {written:?}");
        // Read into a buffer of the caller's: whole chunks land in it, and
        // take no kept buffer.
        for (i, bytes) in files.iter().enumerate() {
            let got = c.get_bytes(&format!("/f{i}")).await.unwrap();
            assert!(got == *bytes, "/f{i} read back other bytes");
        }
        assert_eq!(c.get_bytes("/pieces").await.unwrap(), odd);
        let landed = c.chunk_buffers();
        assert_eq!(landed.fresh + landed.reused, 12, "none taken by reads into the caller's buffer: {landed:?}");
        // Streamed: each whole chunk read into a kept buffer.
        for round in 0..2 {
            for (i, bytes) in files.iter().enumerate() {
                let path = format!("/f{i}");
                let info = c.stat(&path).await.unwrap();
                let mut chunks = c.chunk_stream(&path, &info);
                let mut got = Vec::new();
                while let Some(b) = chunks.next().await.unwrap() {
                    got.extend_from_slice(&b);
                }
                assert!(got == *bytes, "round {round}: /f{i} streamed back other bytes");
            }
        }
        let read = c.chunk_buffers();
        assert_eq!(read.fresh + read.reused, 12 + 2 * 12, "one per whole chunk streamed: {read:?}");
        assert!(read.fresh <= read.keep + written.fresh, "{read:?}");
        assert_eq!(read.lent, 0, "{read:?}");
    });
}

#[test]
fn a_lease_taken_on_a_threads_own_runtime_is_renewed_while_that_runtime_is_idle() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let c = rt.block_on(Client::connect(pool.client_config())).unwrap();
    let held = |c: &Client| rt.block_on(c.status()).unwrap().held_sessions;
    assert_eq!(held(&c), 0);
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let theirs = c.clone();
    // A thread that runs its calls on a runtime of its own (as the mount's
    // request threads do), which runs only while the thread waits for one.
    let thread = std::thread::spawn(move || {
        let own = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let lease = own.block_on(async { theirs.lease(tierpool_types::InodeId(1 << 40)) });
        wait.recv().unwrap();
        drop(lease);
    });
    let since = std::time::Instant::now();
    while held(&c) == 0 {
        assert!(since.elapsed() < Duration::from_secs(10), "the lease never reached the coordinator");
        std::thread::sleep(Duration::from_millis(50));
    }
    done.send(()).unwrap();
    thread.join().unwrap();
}

#[test]
fn a_file_written_from_runtimes_that_come_and_go_keeps_every_byte() {
    let pool = Pool::start(2, "64MiB", "128MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let c = rt.block_on(Client::connect(pool.client_config())).unwrap();
    let opts = PutOptions { chunk_size: 64 << 10, ..Default::default() };
    let data: Vec<u8> = (0..(1u32 << 20) + 77).map(|i| (i * 7 + i / 251) as u8).collect();
    let own = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Each write starts chunk transfers, then its runtime is dropped (a
    // thread's own runtime ends with the thread); the next write comes
    // from another.
    let mut w = own().block_on(c.create("/f", &opts)).unwrap();
    for part in data.chunks(300 << 10) {
        own().block_on(w.write(part)).unwrap();
    }
    let info = own().block_on(w.close()).unwrap();
    assert_eq!(info.size, data.len() as u64);
    assert_eq!(rt.block_on(c.get_bytes("/f")).unwrap(), data);
}
