//! Transactions with real processes: snapshot reads that outlive
//! overwrites and garbage collection, commits all or nothing across files,
//! the first committer winning, task ids committing once, a coordinator
//! `kill -9` aborting what was open and keeping what committed; and
//! list-append and read-write-register histories (registers in files and
//! in pages of a memory region) from several client processes, with a
//! coordinator and a worker killed during the run, checked for snapshot
//! isolation by `adya` (which must find lost updates in each when the
//! write-write check is off).

mod common;
use common::{data, Pool, Session};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tierpool_client::{Client, Committed, PutOptions};
use tierpool_types::ErrorKind;

const CHUNK: u64 = 4096;
/// A page of a memory region, and the region the region-register histories use.
const PAGE: u64 = 4096;
const REGION: &str = "/h/region";

impl Session {
    fn put(&self, path: &str, bytes: &[u8]) {
        let opts = PutOptions { chunk_size: CHUNK, overwrite: true, ..PutOptions::default() };
        self.rt.block_on(self.client.put_bytes(path, bytes.to_vec().into(), &opts)).unwrap();
    }

    fn get(&self, path: &str) -> Vec<u8> {
        self.rt.block_on(self.client.get_bytes(path)).unwrap()
    }
}

#[test]
fn transactions_read_their_snapshot_commit_atomically_and_first_committer_wins() {
    let mut pool = Pool::start(2, "16MiB", "64MiB");
    let s = Session::new(&pool);
    pool.ok(&["mkdir", "/t"]);
    let (a0, b0) = (data(1, 3 * CHUNK as usize), data(2, CHUNK as usize + 10));
    s.put("/t/a", &a0);
    s.put("/t/b", &b0);
    let rt = &s.rt;

    // A writer of two files, and a reader that began before it committed.
    let mut w = rt.block_on(s.client.begin()).unwrap();
    let mut r = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(w.write("/t/a", 10, b"AAAA")).unwrap();
    rt.block_on(w.append("/t/b", b"tail")).unwrap();
    assert_eq!(&rt.block_on(w.read("/t/a", 8, 8)).unwrap()[..], &[&a0[8..10], b"AAAA", &a0[14..16]].concat()[..]);
    assert_eq!(s.get("/t/a"), a0, "invisible to others before the commit");
    assert_eq!(rt.block_on(w.commit(None)).unwrap(), Committed::Now);
    let mut a1 = a0.clone();
    a1[10..14].copy_from_slice(b"AAAA");
    assert_eq!((s.get("/t/a"), s.get("/t/b")), (a1.clone(), [&b0[..], b"tail"].concat()), "both files at once");
    assert_eq!(rt.block_on(r.read_all("/t/a")).unwrap(), a0, "the reader still sees its snapshot");
    assert_eq!(rt.block_on(r.read_all("/t/b")).unwrap(), b0);

    // The reader now writes the chunk the writer committed: it lost.
    let e = rt.block_on(r.write("/t/a", 0, b"x")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(
        e.message,
        format!(
            "/t/a: chunk 0 was rewritten by a transaction that committed after transaction {} began; \
             it is aborted (first committer wins)",
            r.id()
        )
    );
    let e = rt.block_on(r.read_all("/t/a")).unwrap_err();
    assert_eq!((e.kind, e.message), (ErrorKind::Conflict, format!("transaction {} has ended", r.id())));

    // Writers of different chunks of a file both commit; a later one of the same chunk does not.
    let (mut x, mut y, mut z) = (
        rt.block_on(s.client.begin()).unwrap(),
        rt.block_on(s.client.begin()).unwrap(),
        rt.block_on(s.client.begin()).unwrap(),
    );
    rt.block_on(x.write("/t/a", 0, b"x")).unwrap();
    rt.block_on(y.write("/t/a", CHUNK, b"y")).unwrap();
    rt.block_on(z.write("/t/a", 1, b"z")).unwrap();
    assert_eq!(rt.block_on(x.commit(None)).unwrap(), Committed::Now);
    assert_eq!(rt.block_on(y.commit(None)).unwrap(), Committed::Now);
    assert_eq!(rt.block_on(z.commit(None)).unwrap_err().kind, ErrorKind::Conflict);
    let a2 = s.get("/t/a");
    assert_eq!((a2[0], a2[1], a2[CHUNK as usize]), (b'x', a1[1], b'y'));

    // Of two attempts at one task, one commits and the other is told so.
    let (mut t1, mut t2) = (rt.block_on(s.client.begin()).unwrap(), rt.block_on(s.client.begin()).unwrap());
    rt.block_on(t1.truncate("/t/b", 5)).unwrap();
    rt.block_on(t2.truncate("/t/b", 7)).unwrap();
    assert_eq!(rt.block_on(t1.commit(Some("job-1/part-3"))).unwrap(), Committed::Now);
    assert_eq!(rt.block_on(t2.commit(Some("job-1/part-3"))).unwrap(), Committed::Already);
    assert_eq!(s.get("/t/b"), b0[..5]);

    // A coordinator kill -9 aborts what was open and keeps what committed.
    let mut open = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(open.write("/t/a", 0, b"lost")).unwrap();
    assert_eq!(pool.fresh_status()["transactions"], json!({"open": 1, "tasks": 1, "pages_pending": 0}));
    pool.kill_coordinator();
    pool.start_coordinator();
    let e = rt.block_on(open.commit(None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("is not open"), "{}", e.message);
    assert_eq!((s.get("/t/a"), s.get("/t/b")), (a2, b0[..5].to_vec()));
    let again = rt.block_on(s.client.begin()).unwrap();
    assert_eq!(rt.block_on(again.commit(Some("job-1/part-3"))).unwrap(), Committed::Already, "task ids are logged");
}

#[test]
fn a_snapshot_read_outlives_an_overwrite_and_its_garbage_collection() {
    let pool = Pool::start(2, "16MiB", "64MiB");
    let s = Session::new(&pool);
    let old = data(3, 2 * CHUNK as usize);
    s.put("/f", &old);
    let mut tx = s.rt.block_on(s.client.begin()).unwrap();
    // Replaced and removed after the transaction began, then past the
    // garbage grace period (5 s): the old chunks must still be there.
    s.put("/f", b"new");
    s.rt.block_on(s.client.rename("/f", "/g")).unwrap();
    std::thread::sleep(Duration::from_millis(6500));
    assert_eq!(s.rt.block_on(tx.read_all("/f")).unwrap(), old);
    assert_eq!(s.rt.block_on(tx.read_all("/g")).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.rt.block_on(tx.commit(None)).unwrap(), Committed::Now, "read-only: never a conflict");
    assert_eq!(s.get("/g"), b"new");
}

// ---- list-append and read-write-register histories checked by adya ----

/// What the clients of a history do.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Workload {
    /// Each key is a file of integers, one per line: appends and whole reads.
    ListAppend,
    /// Each key is a file holding one integer (or nothing at first),
    /// overwritten in place: reads and writes of a register.
    Register,
    /// Each key is a 4 KiB page of one memory region, holding a register.
    RegionRegister,
}

impl Workload {
    /// The model adya checks the history by.
    fn name(self) -> &'static str {
        match self {
            Workload::ListAppend => "list-append",
            Workload::Register | Workload::RegionRegister => "rw-register",
        }
    }

    fn from_name(name: &str) -> Workload {
        match name {
            "rw-register" => Workload::Register,
            "region-register" => Workload::RegionRegister,
            _ => Workload::ListAppend,
        }
    }

    /// The name a client process is told.
    fn spec_name(self) -> &'static str {
        match self {
            Workload::RegionRegister => "region-register",
            w => w.name(),
        }
    }

    /// The micro-op name of a write.
    fn write_op(self) -> &'static str {
        match self {
            Workload::ListAppend => "append",
            Workload::Register | Workload::RegionRegister => "w",
        }
    }

    /// Reads key `k` in transaction `tx`.
    async fn read(self, tx: &mut tierpool_client::Transaction, k: u64) -> tierpool_types::Result<Value> {
        let bytes = match self {
            Workload::RegionRegister => tx.region_read(REGION, k * PAGE, 20).await?,
            _ => tx.read_all(&format!("/h/k{k}")).await?,
        };
        Ok(self.read_value(&bytes))
    }

    /// Writes value `v` to key `k` in transaction `tx`.
    async fn write(self, tx: &mut tierpool_client::Transaction, k: u64, v: u64) -> tierpool_types::Result<()> {
        match self {
            Workload::ListAppend => tx.append(&format!("/h/k{k}"), format!("{v}\n").as_bytes()).await,
            // Every value is written at the same width, so a write replaces the whole register.
            Workload::Register => tx.write(&format!("/h/k{k}"), 0, format!("{v:020}").as_bytes()).await,
            Workload::RegionRegister => tx.region_write(REGION, k * PAGE, format!("{v:020}").as_bytes()).await,
        }
    }

    /// What a read of a key returned, as the history writes it.
    fn read_value(self, bytes: &[u8]) -> Value {
        let values = parse(bytes);
        match self {
            Workload::ListAppend => json!(values),
            Workload::Register | Workload::RegionRegister => {
                assert!(values.len() <= 1, "a register holds one value, not {values:?}");
                json!(values.first())
            }
        }
    }
}

/// Runs one client of a history (a process of its own: this test binary
/// started again with `TIERPOOL_TX_CLIENT` set); otherwise does nothing.
#[test]
fn history_client() {
    let Ok(spec) = std::env::var("TIERPOOL_TX_CLIENT") else { return };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    run_client(&spec);
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The integers of a key's file (one per line).
fn parse(bytes: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(bytes).split(['\n', '\0']).filter_map(|s| s.trim().parse().ok()).collect()
}

fn run_client(spec: &Value) {
    let id = spec["id"].as_u64().unwrap();
    let keys = spec["keys"].as_u64().unwrap();
    let workload = Workload::from_name(spec["workload"].as_str().unwrap());
    let until = Instant::now() + Duration::from_millis(spec["millis"].as_u64().unwrap());
    let mut cfg = tierpool_client::ClientConfig::new(spec["addr"].as_str().unwrap());
    cfg.secret_file = Some(PathBuf::from(spec["secret"].as_str().unwrap()));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let client = rt.block_on(Client::connect(cfg)).unwrap();
    let mut out = std::fs::File::create(spec["out"].as_str().unwrap()).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (id + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut process, mut counter) = (id * 1000, 0u64);
    while Instant::now() < until {
        // Read-then-write of one key (what a lost update needs), or a few mixed micro-ops.
        let mut ops: Vec<(bool, u64, u64)> = Vec::new();
        let mut op = |write: bool, k: u64, ops: &mut Vec<(bool, u64, u64)>| {
            counter += 1;
            ops.push((write, k, id * 1_000_000 + counter));
        };
        if rand(2) == 0 {
            let k = rand(keys);
            op(false, k, &mut ops);
            op(true, k, &mut ops);
        } else {
            for _ in 0..1 + rand(3) {
                let (write, k) = (rand(2) == 0, rand(keys));
                op(write, k, &mut ops);
            }
        }
        let micro = |reads: Option<&Vec<Value>>| -> Vec<Value> {
            let mut r = reads.map(|v| v.iter());
            ops.iter()
                .map(|(write, k, v)| {
                    if *write {
                        json!([workload.write_op(), k, v])
                    } else {
                        json!(["r", k, r.as_mut().and_then(|i| i.next())])
                    }
                })
                .collect()
        };
        // One write per line: a client killed mid-run leaves whole lines (and at most a torn last one).
        let invoke = json!({"type": "invoke", "process": process, "value": micro(None), "time": now_ns()});
        out.write_all(format!("{invoke}\n").as_bytes()).unwrap();
        let outcome: Result<Vec<Value>, (bool, String)> = rt.block_on(async {
            let fail = |e: tierpool_types::Error| (false, e.to_string());
            let mut tx = client.begin().await.map_err(fail)?;
            let mut reads = Vec::new();
            for (write, k, v) in &ops {
                match *write {
                    true => workload.write(&mut tx, *k, *v).await.map_err(fail)?,
                    false => reads.push(workload.read(&mut tx, *k).await.map_err(fail)?),
                }
            }
            match tx.commit(None).await {
                Ok(_) => Ok(reads),
                // Refused: nothing of it committed. Anything else: unknown.
                Err(e) if e.kind == ErrorKind::Conflict => Err((false, e.to_string())),
                Err(e) => Err((true, e.to_string())),
            }
        });
        let line = match &outcome {
            Ok(reads) => json!({"type": "ok", "process": process, "value": micro(Some(reads)), "time": now_ns()}),
            Err((unknown, why)) => {
                let kind = if *unknown { "info" } else { "fail" };
                json!({"type": kind, "process": process, "value": micro(None), "time": now_ns(), "error": why})
            }
        };
        out.write_all(format!("{line}\n").as_bytes()).unwrap();
        match outcome {
            Err((true, _)) => process += 1,
            Err((false, _)) => std::thread::sleep(Duration::from_millis(20)),
            Ok(_) => {}
        }
    }
}

/// What happens to the pool while the clients run.
#[derive(Clone, Copy, PartialEq)]
enum Nemesis {
    None,
    /// A coordinator and then a worker are killed with -9 and started
    /// again, and a client process is killed with -9 (its transaction in
    /// flight, perhaps mid-commit, has an unknown outcome).
    Kills,
}

/// A history's outcome: its file, adya's exit code and output, and the
/// counts of committed and refused transactions.
struct Checked {
    path: PathBuf,
    code: i32,
    out: String,
    ok: usize,
    failed: usize,
}

/// Runs `clients` processes of `workload` over `keys` keys for `millis`,
/// then a final read of every key, and has adya check the history for
/// snapshot isolation.
fn history(pool: &mut Pool, workload: Workload, clients: u64, keys: u64, millis: u64, nemesis: Nemesis) -> Checked {
    let s = Session::new(pool);
    pool.ok(&["mkdir", "/h"]);
    match workload {
        Workload::RegionRegister => {
            let opts = tierpool_client::RegionOptions { chunk_size: 2 * PAGE, ..Default::default() };
            s.rt.block_on(s.client.alloc_region(REGION, keys * PAGE, &opts)).unwrap();
        }
        _ => (0..keys).for_each(|k| s.put(&format!("/h/k{k}"), b"")),
    }
    let exe = std::env::current_exe().unwrap();
    let dir = pool.dir().to_path_buf();
    let mut children: Vec<_> = (0..clients)
        .map(|id| {
            let spec = json!({
                "id": id, "keys": keys, "millis": millis, "addr": pool.addr, "workload": workload.spec_name(),
                "secret": pool.secret_file(), "out": dir.join(format!("client-{id}.jsonl")),
            });
            Command::new(&exe)
                .args(["--exact", "history_client", "--nocapture", "--test-threads", "1"])
                .env("TIERPOOL_TX_CLIENT", spec.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    if nemesis == Nemesis::Kills {
        std::thread::sleep(Duration::from_millis(millis / 4));
        pool.kill_coordinator();
        std::thread::sleep(Duration::from_millis(300));
        pool.start_coordinator();
        std::thread::sleep(Duration::from_millis(millis / 4));
        pool.kill_worker(1);
        std::thread::sleep(Duration::from_millis(300));
        pool.start_worker(1);
        std::thread::sleep(Duration::from_millis(millis / 8));
        children[0].kill().unwrap();
    }
    for (id, c) in children.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(status.success() || (id == 0 && nemesis == Nemesis::Kills), "client process {id} failed");
    }
    let mut lines: Vec<Value> = Vec::new();
    for id in 0..clients {
        let text = std::fs::read_to_string(dir.join(format!("client-{id}.jsonl"))).unwrap();
        // A killed client's torn last line is dropped, and a transaction it
        // had begun has an unknown outcome.
        let mut own: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        if let Some(last) = own.last().filter(|l| l["type"] == "invoke").cloned() {
            let t = last["time"].as_u64().unwrap() + 1;
            own.push(json!({"type": "info", "process": last["process"], "value": last["value"], "time": t}));
        }
        lines.extend(own);
    }
    // The final reads, once every client is done.
    let final_reads = || -> tierpool_types::Result<Vec<Value>> {
        s.rt.block_on(async {
            let mut last = s.client.begin().await?;
            let mut reads = Vec::new();
            for k in 0..keys {
                reads.push(json!(["r", k, workload.read(&mut last, k).await?]));
            }
            last.commit(None).await?;
            Ok(reads)
        })
    };
    // The pool may still be settling after the kills (a worker coming back).
    let mut tries = 0;
    let reads = loop {
        match final_reads() {
            Ok(r) => break r,
            Err(e) if tries < 20 => {
                eprintln!("final reads: {e}; again");
                tries += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("final reads: {e}"),
        }
    };
    let invoke: Vec<Value> = (0..keys).map(|k| json!(["r", k, null])).collect();
    let t = now_ns();
    lines.push(json!({"type": "invoke", "process": 999_999, "value": invoke, "time": t}));
    lines.push(json!({"type": "ok", "process": 999_999, "value": reads, "time": t + 1}));
    lines.sort_by_key(|l| l["time"].as_u64().unwrap());
    let ok = lines.iter().filter(|l| l["type"] == "ok").count();
    let failed = lines.iter().filter(|l| l["type"] == "fail").count();
    let path = dir.join("history.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    for (i, mut l) in lines.into_iter().enumerate() {
        l["index"] = json!(i);
        writeln!(f, "{l}").unwrap();
    }
    let (code, out) = adya(&path, workload);
    let info = text_count(&path, "\"info\"");
    eprintln!("{}: {ok} committed, {failed} refused, {info} unknown; adya exit {code}", path.display());
    Checked { path, code, out, ok, failed }
}

fn text_count(path: &Path, what: &str) -> usize {
    std::fs::read_to_string(path).unwrap().matches(what).count()
}

/// `adya check` of a history for snapshot isolation: exit code and output.
/// In a list-append history, malformed ones (a value appended twice) count
/// as anomalies, not as valid. A register's versions are ordered by what
/// each transaction read before it wrote (`--wfr-keys`) and by real time
/// (`--linearizable-keys`: commits are ordered by the coordinator's log,
/// and a transaction begins after every commit acknowledged before it).
fn adya(history: &Path, workload: Workload) -> (i32, String) {
    let bin = std::env::var("TIERPOOL_ADYA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tierpool/adya/bin/adya"));
    assert!(bin.exists(), "{}: no adya here; scripts/adya.sh installs it (scripts/test.sh does)", bin.display());
    let mut cmd = Command::new(&bin);
    cmd.args(["check", "-m", workload.name(), "-c", "snapshot-isolation"]);
    match workload {
        Workload::ListAppend => cmd.args(["-a", "duplicate-appends,unexpected-txn-micro-op-types"]),
        Workload::Register | Workload::RegionRegister => cmd.args(["--wfr-keys", "--linearizable-keys"]),
    };
    let out = cmd.arg(history).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Runs a history of `workload` on three workers keeping two copies, with
/// a coordinator and a worker killed, and checks it is snapshot isolated.
fn isolated_under_kills(workload: Workload, mem: &str) {
    let mut pool = Pool::start_with(3, mem, "128MiB", &["--replicas", "2"]);
    let h = history(&mut pool, workload, 4, 4, 8000, Nemesis::Kills);
    assert_eq!(h.code, 0, "adya found anomalies in {}:\n{}", h.path.display(), h.out);
    assert!(h.out.contains("true"), "{}", h.out);
    // Enough happened for the check to mean something: many commits, and contention.
    assert!(h.ok >= 100 && h.failed >= 5, "{} committed, {} failed", h.ok, h.failed);
}

#[test]
fn list_append_histories_with_kills_are_snapshot_isolated() {
    isolated_under_kills(Workload::ListAppend, "32MiB");
}

#[test]
fn register_histories_with_kills_are_snapshot_isolated() {
    isolated_under_kills(Workload::Register, "32MiB");
}

#[test]
fn region_page_register_histories_with_kills_are_snapshot_isolated() {
    // Too little memory for a chunk: the region's chunks are on disk, and
    // outlive the worker's kill.
    isolated_under_kills(Workload::RegionRegister, "4KiB");
}

#[test]
fn without_the_write_write_check_adya_finds_lost_updates() {
    for workload in [Workload::ListAppend, Workload::Register, Workload::RegionRegister] {
        let mut pool = Pool::start_with(2, "32MiB", "128MiB", &["--unsafe-no-write-check"]);
        let h = history(&mut pool, workload, 4, 2, 4000, Nemesis::None);
        assert!(h.ok >= 50, "{workload:?}: {} committed", h.ok);
        assert_eq!(h.code, 1, "adya should flag {}:\n{}", h.path.display(), h.out);
        assert!(h.out.contains("lost-update"), "{workload:?}: {}", h.out);
    }
}

#[test]
fn cuts_extensions_and_hard_links_in_a_transaction() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let s = Session::new(&pool);
    let rt = &s.rt;
    let a0 = data(4, 2 * CHUNK as usize);
    s.put("/a", &a0);
    // Cut to one chunk, then grown back: the second chunk reads as zeros, before and after the commit.
    let mut tx = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(tx.truncate("/a", CHUNK - 7)).unwrap();
    rt.block_on(tx.truncate("/a", 2 * CHUNK)).unwrap();
    let want = [&a0[..CHUNK as usize - 7], &vec![0u8; CHUNK as usize + 7][..]].concat();
    assert_eq!(rt.block_on(tx.read_all("/a")).unwrap(), want);
    assert_eq!(rt.block_on(tx.commit(None)).unwrap(), Committed::Now);
    assert_eq!(s.get("/a"), want);

    // Two names of one file are one file to a transaction.
    let a = rt.block_on(s.client.stat("/a")).unwrap();
    let root = rt.block_on(s.client.stat("/")).unwrap();
    rt.block_on(s.client.link_at(a.id, root.id, "alias")).unwrap();
    let mut tx = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(tx.write("/a", 0, b"via a")).unwrap();
    assert_eq!(&rt.block_on(tx.read("/alias", 0, 5)).unwrap()[..], b"via a");
    rt.block_on(tx.append("/alias", b"!")).unwrap();
    assert_eq!(rt.block_on(tx.size("/a")).unwrap(), 2 * CHUNK + 1);
    assert_eq!(rt.block_on(tx.commit(None)).unwrap(), Committed::Now);
    let got = s.get("/alias");
    assert_eq!((&got[..5], got.len() as u64, got[got.len() - 1]), (&b"via a"[..], 2 * CHUNK + 1, b'!'));
}

#[test]
fn a_transaction_makes_removes_and_moves_entries_all_at_once() {
    let mut pool = Pool::start(2, "16MiB", "64MiB");
    let s = Session::new(&pool);
    let rt = &s.rt;
    pool.ok(&["mkdir", "/in"]);
    pool.ok(&["mkdir", "/keep"]);
    let (a0, old0) = (data(3, 2 * CHUNK as usize), data(4, 100));
    s.put("/in/a", &a0);
    s.put("/in/old", &old0);
    s.put("/keep/k", b"k");

    // A job's output: a directory, a file of two chunks in it, an input
    // moved beside it, and a stale file removed; seen by the job at once.
    let part = data(5, (4 << 20) + 1000);
    let mut tx = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(tx.mkdir("/out")).unwrap();
    rt.block_on(tx.write("/out/part-0", 0, &part)).unwrap();
    rt.block_on(tx.mv("/in/a", "/out/a")).unwrap();
    rt.block_on(tx.write("/out/a", 0, b"moved")).unwrap();
    rt.block_on(tx.rm("/in/old", false)).unwrap();
    assert_eq!(rt.block_on(tx.read_all("/out/part-0")).unwrap(), part);
    assert_eq!(rt.block_on(tx.read("/out/a", 0, 8)).unwrap(), [b"moved", &a0[5..8]].concat());
    assert!(!rt.block_on(tx.exists("/in/a")).unwrap() && !rt.block_on(tx.exists("/in/old")).unwrap());
    // Checked as they are made, against the transaction's own namespace.
    let e = rt.block_on(tx.mkdir("/out")).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::AlreadyExists, "/out: file exists"));
    let e = rt.block_on(tx.read_all("/in/a")).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::NotFound, "/in/a: no such file in this transaction"));
    let e = rt.block_on(tx.rm("/keep", false)).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DirectoryNotEmpty, "/keep: directory not empty"));
    let e = rt.block_on(tx.mv("/out", "/out/deeper")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
    // Others see none of it before the commit, all of it after.
    assert_eq!(pool.ok(&["ls", "/"]).lines().filter(|l| l.contains("out")).count(), 0);
    assert_eq!(s.get("/in/a"), a0);
    assert_eq!(rt.block_on(tx.commit(None)).unwrap(), Committed::Now);
    assert_eq!(s.get("/out/part-0"), part);
    assert_eq!(s.get("/out/a"), [b"moved", &a0[5..]].concat());
    let gone = |p: &str| rt.block_on(s.client.stat(p)).unwrap_err().kind;
    assert_eq!((gone("/in/a"), gone("/in/old")), (ErrorKind::NotFound, ErrorKind::NotFound));

    // Two transactions making the same path: the first committer wins.
    let (mut x, mut y) = (rt.block_on(s.client.begin()).unwrap(), rt.block_on(s.client.begin()).unwrap());
    rt.block_on(x.write("/out/_SUCCESS", 0, b"x")).unwrap();
    rt.block_on(y.write("/out/_SUCCESS", 0, b"y")).unwrap();
    assert_eq!(rt.block_on(x.commit(None)).unwrap(), Committed::Now);
    let e = rt.block_on(y.commit(None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.starts_with("/out/_SUCCESS: was made, removed or replaced by a transaction"), "{e}");
    assert_eq!(s.get("/out/_SUCCESS"), b"x");

    // A commit whose step no longer applies changes nothing, writes included.
    let mut z = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(z.write("/out/a", 0, b"ZZZZZ")).unwrap();
    rt.block_on(z.mkdir("/in/sub")).unwrap();
    rt.block_on(z.rm("/in", false)).unwrap(); // emptied here: checked at commit
    let e = rt.block_on(z.commit(None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DirectoryNotEmpty, "{e}");
    assert_eq!(s.get("/out/a"), [b"moved", &a0[5..]].concat());
    assert_eq!(gone("/in/sub"), ErrorKind::NotFound);

    // What committed survives a coordinator kill -9 (replayed from the log).
    pool.kill_coordinator();
    pool.start_coordinator();
    assert_eq!(s.get("/out/part-0"), part);
    assert_eq!(s.get("/out/_SUCCESS"), b"x");
    assert_eq!(gone("/in/a"), ErrorKind::NotFound);
}

#[test]
fn namespace_changes_never_drop_another_commit_s_changes() {
    let pool = Pool::start(1, "16MiB", "64MiB");
    let s = Session::new(&pool);
    let rt = &s.rt;
    pool.ok(&["mkdir", "/job"]);
    s.put("/job/log", b"one\n");
    s.put("/job/keep", b"k");
    // A cleanup that began before another commit appended to the log loses.
    let mut clean = rt.block_on(s.client.begin()).unwrap();
    let mut append = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(append.append("/job/log", b"two\n")).unwrap();
    rt.block_on(clean.rm("/job", true)).unwrap();
    assert_eq!(rt.block_on(append.commit(None)).unwrap(), Committed::Now);
    let e = rt.block_on(clean.commit(None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.starts_with("/job: was changed (or something beneath it) by a transaction"), "{e}");
    assert_eq!(s.get("/job/log"), b"one\ntwo\n");
    // Moving onto a directory with entries, and into .snapshots, are refused at once.
    let mut tx = rt.block_on(s.client.begin()).unwrap();
    rt.block_on(tx.mkdir("/other")).unwrap();
    let e = rt.block_on(tx.mv("/other", "/job")).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DirectoryNotEmpty, "/job: directory not empty"));
    let e = rt.block_on(tx.write("/job/.snapshots/x", 0, b"x")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReadOnly, "{e}");
    rt.block_on(tx.abort()).unwrap();
}
