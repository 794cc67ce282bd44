//! `tierpool bench`: writes N files, reads them back and verifies them, then
//! stats and deletes them; reports throughput, ops/s and latency percentiles.
//! With `--batch N` files are written and read N to a request (`put_many`,
//! `get_many`): ops/s counts files, latencies are of whole requests. With
//! `--connections N` it measures fresh connections instead. Single stats
//! and new files' commits of concurrent clients share requests as the client
//! library lets them (`$TIERPOOL_COALESCE`, 0 for none), as do small chunk
//! reads and writes to each worker; the JSON says how many did, and how many files
//! `get_many` read and `put_many` stored on the workers many to a request
//! (`coalesced_calls`), and how the client's buffers for whole chunks
//! served (`client_buffers`: reused, or fresh memory). With `--reads N` the read
//! phase reads every file N times over (pass after pass). The client runs on
//! one thread for small files, as redis-benchmark does (`--client-threads`).
//!
//! File contents are generated per file from a seed, so verification needs no
//! second copy and catches misplaced chunks.

use crate::cli::BenchArgs;
use anyhow::{bail, Result};
use bytes::Bytes;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierpool_client::{Client, PutOptions};
use tierpool_types::{validate_chunk_size, ByteSize};

fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

struct Phase {
    name: &'static str,
    /// Files done (a request may carry several).
    files: u64,
    bytes: u64,
    elapsed: Duration,
    lat: Vec<Duration>,
}

impl Phase {
    fn json(&self) -> serde_json::Value {
        let mut l = self.lat.clone();
        l.sort();
        let pct = |p: f64| {
            l.get(((l.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .map(|d| d.as_secs_f64() * 1e3)
                .unwrap_or(0.0)
        };
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        json!({
            "ops": self.files,
            "requests": l.len(),
            "seconds": secs,
            "ops_per_sec": self.files as f64 / secs,
            "mb_per_sec": self.bytes as f64 / secs / 1e6,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
        })
    }
}

/// Runs `f(0..requests)`: `threads` tasks, each calling `f` on the next
/// request not yet taken until none is left, as that many clients would.
/// The calls do `n` files of `bytes_each` in all (`f` knows which).
async fn phase<F, Fut>(name: &'static str, n: u32, requests: u32, threads: u32, bytes_each: u64, f: F) -> Result<Phase>
where
    F: Fn(u32) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicU32::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..threads.min(requests) {
        let (f, next) = (f.clone(), next.clone());
        tasks.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    return Ok::<_, anyhow::Error>(lat);
                }
                let t = Instant::now();
                f(i).await?;
                lat.push(t.elapsed());
            }
        });
    }
    let mut lat = Vec::with_capacity(requests as usize);
    while let Some(r) = tasks.join_next().await {
        lat.extend(r??);
    }
    Ok(Phase { name, files: u64::from(n), bytes: bytes_each * u64::from(n), elapsed: start.elapsed(), lat })
}

/// Files under this size are benchmarked from one client thread by
/// default (`--client-threads`).
const ONE_THREAD_BELOW: u64 = 1 << 20;

/// The runtime threads of the benchmark's client (`--client-threads`).
pub fn client_threads(a: &BenchArgs) -> Result<usize> {
    match a.client_threads {
        Some(0) => bail!("--client-threads must be at least 1"),
        Some(n) => Ok(n as usize),
        None if a.connections.is_some() || a.size.0 < ONE_THREAD_BELOW => Ok(1),
        None => Ok(std::thread::available_parallelism().map_or(2, |n| n.get()).min(8)),
    }
}

pub async fn run(c: &Client, a: &BenchArgs) -> Result<()> {
    if let Some(n) = a.connections {
        return connections(c, n, a.json).await;
    }
    if a.files == 0 || a.threads == 0 || a.batch == 0 || a.reads == 0 {
        bail!("--files, --threads, --batch and --reads must be at least 1");
    }
    let reads = a.files.checked_mul(a.reads).ok_or_else(|| anyhow::anyhow!("--files times --reads is too large"))?;
    let opts = Arc::new(PutOptions { chunk_size: validate_chunk_size(a.chunk_size.0)?, ..PutOptions::default() });
    let dir = format!("/.bench-{}", std::process::id());
    c.mkdir(&dir, true).await?;
    let size = a.size.0 as usize;
    // Generate contents up front so the timed phases measure the pool only.
    let data: Arc<Vec<Bytes>> = Arc::new((0..a.files).map(|i| Bytes::from(content(u64::from(i), size))).collect());
    let path = {
        let dir = dir.clone();
        move |i: u32| format!("{dir}/f{i}")
    };
    let mut phases = Vec::new();
    let (batch, files) = (a.batch, a.files);
    // Request `r` of a phase: the files `r * batch ..` (fewer at the end).
    let files_of = move |r: u32| (r * batch)..((r + 1) * batch).min(files);
    // One pass over the files: the write phase, and each pass of the reads.
    let per_pass = files.div_ceil(batch);
    let (c1, d1, p1, o1) = (c.clone(), data.clone(), path.clone(), opts.clone());
    phases.push(
        phase("write", files, per_pass, a.threads, size as u64, move |r| {
            let (c, d, p, o) = (c1.clone(), d1.clone(), p1.clone(), o1.clone());
            async move {
                if batch == 1 {
                    return c.put_bytes(&p(r), d[r as usize].clone(), &o).await.map(|_| ()).map_err(Into::into);
                }
                let items = files_of(r).map(|i| (p(i), d[i as usize].clone())).collect();
                c.put_many(items, &o).await.into_iter().try_for_each(|r| r.map(|_| ())).map_err(Into::into)
            }
        })
        .await?,
    );
    let (c2, d2, p2) = (c.clone(), data.clone(), path.clone());
    phases.push(
        phase("read", reads, per_pass * a.reads, a.threads, size as u64, move |r| {
            let (c, d, p) = (c2.clone(), d2.clone(), p2.clone());
            let r = r % per_pass;
            async move {
                if batch == 1 {
                    return read_back(&c, &p(r), &d[r as usize]).await;
                }
                let got = c.get_many(files_of(r).map(&p).collect()).await;
                for (i, got) in files_of(r).zip(got) {
                    if got? != d[i as usize] {
                        bail!("{}: read back different bytes", p(i));
                    }
                }
                Ok(())
            }
        })
        .await?,
    );
    let (c3, p3) = (c.clone(), path.clone());
    phases.push(
        phase("stat", files, files, a.threads, 0, move |i| {
            let (c, p) = (c3.clone(), p3(i));
            async move { c.stat(&p).await.map(|_| ()).map_err(Into::into) }
        })
        .await?,
    );
    let (c4, p4) = (c.clone(), path.clone());
    phases.push(
        phase("delete", files, files, a.threads, 0, move |i| {
            let (c, p) = (c4.clone(), p4(i));
            async move { c.remove(&p, false).await.map(|_| ()).map_err(Into::into) }
        })
        .await?,
    );
    c.remove(&dir, true).await?;
    report(a, &phases, c.coalesced(), &c.chunk_buffers())
}

/// Reads `path` back, streamed and compared chunk by chunk as `get`
/// streams: the phase measures the pool, not the allocation of whole files.
async fn read_back(c: &Client, path: &str, want: &[u8]) -> Result<()> {
    let info = c.stat(path).await?;
    let mut chunks = c.chunk_stream(path, &info);
    let mut at = 0usize;
    while let Some(got) = chunks.next().await? {
        if want.get(at..at + got.len()) != Some(&got[..]) {
            bail!("{path}: read back different bytes at offset {at}");
        }
        at += got.len();
    }
    if at != want.len() {
        bail!("{path}: read back {at} bytes, expected {}", want.len());
    }
    Ok(())
}

/// `n` fresh connections to the coordinator, one after another, each
/// carrying one ping: what a client pays to connect.
async fn connections(c: &Client, n: u32, json: bool) -> Result<()> {
    if n == 0 {
        bail!("--connections must be at least 1");
    }
    c.ping_fresh().await?;
    let p = phase("connect", n, n, 1, 0, {
        let c = c.clone();
        move |_| {
            let c = c.clone();
            async move { c.ping_fresh().await.map_err(Into::into) }
        }
    })
    .await?;
    let j = p.json();
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({ "connections": n, "connect": j }))?);
        return Ok(());
    }
    let us = |key: &str| j[key].as_f64().unwrap_or(0.0) * 1e3;
    println!(
        "{n} fresh connections, each with one ping: {:.0}/s, mean {:.0} us, p50 {:.0} us, p99 {:.0} us",
        j["ops_per_sec"].as_f64().unwrap_or(0.0),
        p.elapsed.as_secs_f64() * 1e6 / f64::from(n),
        us("p50_ms"),
        us("p99_ms")
    );
    Ok(())
}

fn report(
    a: &BenchArgs,
    phases: &[Phase],
    coalesced: tierpool_client::Coalesced,
    buffers: &tierpool_types::BufferStats,
) -> Result<()> {
    let mut out = json!({
        "client_buffers": buffers,
        "coalesced_calls": {
            "stats": coalesced.stats, "commits": coalesced.commits, "reads": coalesced.reads, "writes": coalesced.writes,
            "chunk_reads": coalesced.chunk_reads, "chunk_writes": coalesced.chunk_writes,
        },
        "files": a.files,
        "size": a.size.0,
        "threads": a.threads,
        "batch": a.batch,
        "reads": a.reads,
        "client_threads": client_threads(a)?,
        "chunk_size": a.chunk_size.0,
        "verified": true,
    });
    for p in phases {
        out[p.name] = p.json();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let mut per =
        if a.batch > 1 { format!(" (writes and reads {} files to a request)", a.batch) } else { String::new() };
    if a.reads > 1 {
        per += &format!(", each read {} times", a.reads);
    }
    println!(
        "{} files of {}, {} concurrent{per}, chunk {}: all verified",
        a.files,
        a.size,
        a.threads,
        ByteSize(a.chunk_size.0)
    );
    println!("{:<7} {:>10} {:>12} {:>10} {:>10}", "phase", "MB/s", "ops/s", "p50 ms", "p99 ms");
    for p in phases {
        let j = p.json();
        println!(
            "{:<7} {:>10.1} {:>12.1} {:>10.3} {:>10.3}",
            p.name,
            j["mb_per_sec"].as_f64().unwrap_or(0.0),
            j["ops_per_sec"].as_f64().unwrap_or(0.0),
            j["p50_ms"].as_f64().unwrap_or(0.0),
            j["p99_ms"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}
