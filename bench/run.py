#!/usr/bin/env python3
"""One benchmark run of tierpool beside the machine's own limits and peers.

Measures, in one run on this machine:
  - loopback TCP throughput (iperf3, one stream): the ceiling of the bulk path;
  - tierpool large-file write/read throughput (`tierpool bench`), as a fraction of it,
    on a fresh pool and on a fresh pool whose workers filled their chunk buffers
    ahead (`up --prefault`), the latter also with local sockets off in every
    process (TIERPOOL_LOCAL_SOCKETS=0: all over loopback TCP); each `--runs`
    times (TCP too, a fresh pool each time), as min, median and max;
  - tierpool 4 KiB put/get ops/s and p99 next to redis-server with the same clients
    and as many distinct keys as tierpool writes files (redis-benchmark -r)
    (in memory only, and with its append-only file fsynced before each reply;
    over TCP and over its Unix socket, as tierpool's clients here use theirs),
    with the client's default coalescing of concurrent calls and without it;
    the first again `--runs` times, each round tierpool then redis-server;
  - the same batched: tierpool's put_many/get_many of 16 files a request next to
    redis-benchmark pipelining 16 commands a connection (-P 16);
  - the same two for 16 KiB values: files past the metadata's inline limit,
    stored on the workers (a put is a worker write and a commit, a get a
    stat and a worker read), next to redis-server in memory;
  - tierpool metadata ops/s: create, stat and delete of empty files;
  - the cost of a fresh connection: 1,000 opened one after another, one ping each.
Writes JSON to stdout and to bench/results/<timestamp>.json.

Usage: python3 bench/run.py [--quick] [--runs N] [--bin PATH] [--inline-max SIZE] [--log-sync always|DURATION] [--reads N]

--bin measures another build of the binary (e.g. an older commit's, kept aside)
instead of building this checkout's. --inline-max is the pool's (`up
--inline-max`): 0 stores every 4 KiB file on the workers, as pools did
before small files were kept by the metadata. --log-sync is the pool's
(`up --log-sync`): `always` fsyncs the metadata log before each change is
acknowledged; a period such as 10ms acknowledges changes once written.
--reads is how many times over the small files are read back (`bench
--reads`, 5 by default, so a read phase lasts long enough to measure; 1
for builds older than that option); batched, four times that, as many
gets as redis-benchmark makes with -P 16. --runs (3 by default) is how many
times the large files and loopback TCP are measured, and the 4 KiB puts
and gets beside redis-server (`small_4k_runs`): each figure of them is
the median of its runs, and `spread` holds its min, median and max.
"""

import argparse
import csv
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "tierpool")
#: The pool's secret, named explicitly for every command (set once the pool is up).
SECRET = {}


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def ensure_tools():
    need = [t for t in ("iperf3", "redis-server", "redis-benchmark") if not shutil.which(t)]
    if need:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "iperf3", "redis-server", "redis-tools"], check=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def iperf3():
    port = free_port()
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = json.loads(sh("iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "5", "-J"))
    finally:
        srv.wait(timeout=10)
    return out["end"]["sum_received"]["bits_per_second"] / 8 / 1e6  # MB/s


def redis(clients, n, keys, fsync=False, tests="set,get", pipeline=1, unix=False, size=4096):
    """redis-benchmark of `size`-byte values (4 KiB) against a fresh redis-server: in
    memory only, or (`fsync`) with its append-only file fsynced before each
    reply, as tierpool's `--log-sync always` does for a put; `pipeline`
    commands in flight on each connection (-P); over its Unix socket
    instead of TCP with `unix`. Keys are drawn at random from `keys` of
    them (-r), as many as the files tierpool writes (without -r every
    command names the one same key)."""
    port = free_port()
    aof = tempfile.mkdtemp(prefix="tierpool-bench-redis-")
    sock = os.path.join(aof, "redis.sock")
    durability = ["--appendonly", "yes", "--appendfsync", "always", "--dir", aof] if fsync else ["--appendonly", "no"]
    srv = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--unixsocket", sock, "--unixsocketperm", "700",
         *durability],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    try:
        where = ["-s", sock] if unix else ["-p", str(port)]
        out = sh("redis-benchmark", *where, "-t", tests, "-d", str(size), "-c", str(clients), "-n", str(n),
                 "-r", str(keys), "-P", str(pipeline), "--csv")
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(aof, ignore_errors=True)
    res = {}
    for row in csv.DictReader(io.StringIO(out)):
        res[row["test"].lower()] = {"ops_per_sec": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]), "p99_ms": float(row["p99_latency_ms"])}
    return res


def tp_bench(addr, files, size, threads, batch=1, coalesce=None, reads=1):
    """`tierpool bench`; `coalesce` sets the client's TIERPOOL_COALESCE (None: its default);
    `reads`: how many times over the files are read back."""
    env = dict(os.environ, TIERPOOL_COORDINATOR=addr, **SECRET)
    if coalesce is not None:
        env["TIERPOOL_COALESCE"] = str(coalesce)
    more = ["--reads", str(reads)] if reads > 1 else []
    out = sh(BIN, "bench", "--files", str(files), "--size", size, "--threads", str(threads), "--batch", str(batch),
             *more, "--json", env=env)
    return json.loads(out)


def large(files, size, log_sync, prefault, local=True):
    """The large-file write and read on a fresh pool; with `prefault`, one
    started with `up --prefault`, measured once every worker's buffers are
    ready (and also how long they took to be, else None). Without `local`,
    every process of the pool and the benchmark's client have local sockets
    off: all over TCP."""
    state = tempfile.mkdtemp(prefix="tierpool-bench-")
    addr = f"127.0.0.1:{free_port()}"
    off = {} if local else {"TIERPOOL_LOCAL_SOCKETS": "0"}
    sh(BIN, "up", "--dir", state, "--port", addr.split(":")[1], "--workers", "2", "--mem", "2GiB", "--disk", "4GiB",
       "--log-sync", log_sync, *(["--prefault"] if prefault else []), env=dict(os.environ, **off))
    secret = {"TIERPOOL_SECRET_FILE": os.path.join(state, "coordinator", "secret")}
    env = dict(os.environ, TIERPOOL_COORDINATOR=addr, **secret, **off)
    ready = None
    try:
        started = time.monotonic()
        while prefault:
            workers = json.loads(sh(BIN, "status", "--json", env=env))["workers"]
            filled = [w["buffers"]["keep"] > 0 and w["buffers"]["spare"] == w["buffers"]["keep"] for w in workers]
            if len(filled) == 2 and all(filled):
                ready = time.monotonic() - started
                break
            if time.monotonic() - started > 120:
                raise RuntimeError(f"the workers' buffers were not ready in 120 s: {[w['buffers'] for w in workers]}")
            time.sleep(0.2)
        out = json.loads(sh(BIN, "bench", "--files", str(files), "--size", size, "--threads", "2", "--json", env=env))
    finally:
        sh(BIN, "down", "--dir", state)
        shutil.rmtree(state, ignore_errors=True)
    return out, ready


def tp_connections(addr, n):
    env = dict(os.environ, TIERPOOL_COORDINATOR=addr, **SECRET)
    out = sh(BIN, "bench", "--connections", str(n), "--json", env=env)
    return json.loads(out)["connect"]


def throughput(bench, tcp):
    """A large-file `tierpool bench`'s write and read, in MB/s and as a fraction of loopback TCP's."""
    return dict(
        write_mb_per_sec=bench["write"]["mb_per_sec"], read_mb_per_sec=bench["read"]["mb_per_sec"],
        write_vs_tcp=bench["write"]["mb_per_sec"] / tcp, read_vs_tcp=bench["read"]["mb_per_sec"] / tcp,
    )


def spread(runs, **more):
    """Runs of the same figures as one: each figure the median of its runs,
    and `spread` its [min, median, max]."""
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    mid = {k: statistics.median(r[k] for r in runs) for k in keys}
    return dict(more, runs=len(runs), **mid,
                spread={k: [min(r[k] for r in runs), mid[k], max(r[k] for r in runs)] for k in keys})


def large_runs(n, files, size, log_sync):
    """`n` rounds of loopback TCP and the three large-file measures (fresh
    pool, prefaulted, prefaulted over TCP only), each on a pool of its own;
    each measure's ratio to TCP is to its round's. Each round starts with
    the next measure: on a machine whose host takes freed memory back, a
    pool started just after another's gigabytes were freed finds its pages
    ready, one started later faults them in from the host (the first read
    of a fresh client process too), so a fixed order would favour one."""
    tcp, fresh, pre, pre_tcp = [], [], [], []
    measures = [
        (fresh, False, True), (pre, True, True), (pre_tcp, True, False),
    ]
    for i in range(n):
        t = iperf3()
        tcp.append({"mb_per_sec": t})
        for out, prefault, local in measures[i % 3:] + measures[:i % 3]:
            b, ready = large(files, size, log_sync, prefault, local)
            out.append(dict(throughput(b, t), **({"buffers_ready_secs": ready} if prefault else {})))
    return tcp, fresh, pre, pre_tcp


def versus(tp, rd, rd_fsync, rd_unix):
    """tierpool's small puts and gets (`tierpool bench`) next to redis-server's
    sets and gets, in memory (`rd`; `rd_unix` over its Unix socket) and,
    unless None, fsyncing each set (`rd_fsync`)."""
    ops = lambda r: r["ops_per_sec"]
    out = {
        "tierpool_put": tp["write"], "tierpool_get": tp["read"],
        "redis_set": rd.get("set"), "redis_get": rd.get("get"),
        "redis_set_unix": rd_unix.get("set"), "redis_get_unix": rd_unix.get("get"),
        "put_vs_redis_set": ops(tp["write"]) / ops(rd["set"]),
        "get_vs_redis_get": ops(tp["read"]) / ops(rd["get"]),
        "put_vs_redis_set_unix": ops(tp["write"]) / ops(rd_unix["set"]),
        "get_vs_redis_get_unix": ops(tp["read"]) / ops(rd_unix["get"]),
    }
    if rd_fsync is not None:
        out["redis_set_fsync_always"] = rd_fsync.get("set")
        out["put_vs_redis_set_fsync_always"] = ops(tp["write"]) / ops(rd_fsync["set"])
    return out


def small_round(addr, small_n, clients, reads):
    """One round of the 4 KiB comparison: tierpool's puts and gets, then
    redis-server's sets and gets over TCP and its Unix socket, and its sets
    fsynced, one right after the other (so that a round's ratios compare
    figures of the same moment of a machine whose speed drifts)."""
    tp = tp_bench(addr, small_n, "4KiB", clients, reads=reads)
    rd = redis(clients, small_n * 5, small_n)
    rd_unix = redis(clients, small_n * 5, small_n, unix=True)
    rd_fsync = redis(clients, small_n, small_n, fsync=True, tests="set")
    ops = lambda r: r["ops_per_sec"]
    return {
        "put_ops_per_sec": ops(tp["write"]), "put_p99_ms": tp["write"]["p99_ms"],
        "get_ops_per_sec": ops(tp["read"]), "get_p99_ms": tp["read"]["p99_ms"],
        "redis_get_ops_per_sec": ops(rd["get"]), "redis_get_unix_ops_per_sec": ops(rd_unix["get"]),
        "redis_set_ops_per_sec": ops(rd["set"]), "redis_set_fsync_always_ops_per_sec": ops(rd_fsync["set"]),
        "get_vs_redis_get": ops(tp["read"]) / ops(rd["get"]),
        "get_vs_redis_get_unix": ops(tp["read"]) / ops(rd_unix["get"]),
        "put_vs_redis_set_fsync_always": ops(tp["write"]) / ops(rd_fsync["set"]),
        "put_vs_redis_set": ops(tp["write"]) / ops(rd["set"]),
    }


def write_result(prefix, result):
    """Writes `result` to bench/results/<prefix><timestamp>.json and stdout."""
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", prefix + time.strftime("%Y%m%d-%H%M%S") + ".json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    json.dump(result, sys.stdout, indent=2)
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes for a fast check")
    ap.add_argument("--runs", type=int, default=3,
                    help="how many times large files, TCP and the 4 KiB comparison are measured")
    ap.add_argument("--bin", help="the tierpool binary to measure (default: build this checkout's)")
    ap.add_argument("--inline-max", help="files kept by the metadata up to this size (the pool's default: 4KiB)")
    ap.add_argument("--log-sync", default="always", help="when the metadata log is fsynced (`up --log-sync`)")
    ap.add_argument("--reads", type=int, default=5, help="how many times over small files are read back (1: once)")
    a = ap.parse_args()
    if a.runs < 1:
        sys.exit("run.py: --runs must be at least 1")
    ensure_tools()
    global BIN
    if a.bin:
        BIN = os.path.abspath(a.bin)
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "tierpool"], cwd=ROOT, check=True)
    big_files, big_size = (4, "64MiB") if a.quick else (8, "256MiB")
    small_n = 2000 if a.quick else 20000
    clients = 32
    batch = 16
    state = tempfile.mkdtemp(prefix="tierpool-bench-")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    inline = ["--inline-max", a.inline_max] if a.inline_max else []
    sh(BIN, "up", "--dir", state, "--port", str(port), "--workers", "2", "--mem", "2GiB", "--disk", "4GiB", *inline,
       "--log-sync", a.log_sync)
    SECRET["TIERPOOL_SECRET_FILE"] = os.path.join(state, "coordinator", "secret")
    try:
        r = a.reads
        small = tp_bench(addr, small_n, "4KiB", clients, reads=r)
        alone = tp_bench(addr, small_n, "4KiB", clients, coalesce=0, reads=r)
        # Batched, the files are read 4 times as often: as many gets as
        # redis-benchmark makes with -P 16 below (small_n * 20), so that
        # both are measured over a comparable time, not 0.3 s against 1 s.
        batched = tp_bench(addr, small_n, "4KiB", clients, batch, reads=r * 4)
        mid = tp_bench(addr, small_n, "16KiB", clients, reads=r)
        mid_batched = tp_bench(addr, small_n, "16KiB", clients, batch, reads=r * 4)
        meta = tp_bench(addr, small_n, "0", clients)
        conns = tp_connections(addr, 1000)
        rounds = [small_round(addr, small_n, clients, r) for _ in range(a.runs)]
    finally:
        sh(BIN, "down", "--dir", state)
        shutil.rmtree(state, ignore_errors=True)
    tcp, fresh, pre, pre_tcp = large_runs(a.runs, big_files, big_size, a.log_sync)
    rd = redis(clients, small_n * 5, small_n)
    rd_unix = redis(clients, small_n * 5, small_n, unix=True)
    rd_fsync = redis(clients, small_n, small_n, fsync=True, tests="set")
    rd_p = redis(clients, small_n * 20, small_n, pipeline=batch)
    rd_p_unix = redis(clients, small_n * 20, small_n, pipeline=batch, unix=True)
    rd_p_fsync = redis(clients, small_n * 4, small_n, fsync=True, tests="set", pipeline=batch)
    rd_16k = redis(clients, small_n * 5, small_n, size=16384)
    rd_16k_unix = redis(clients, small_n * 5, small_n, unix=True, size=16384)
    rd_16k_p = redis(clients, small_n * 20, small_n, pipeline=batch, size=16384)
    rd_16k_p_unix = redis(clients, small_n * 20, small_n, pipeline=batch, unix=True, size=16384)
    result = {
        "machine": machine.describe(),
        "binary": BIN,
        "log_sync": a.log_sync,
        "small_reads": a.reads,
        "loopback_tcp_mb_per_sec": spread(tcp)["mb_per_sec"],
        "loopback_tcp": spread(tcp),
        "large_files": spread(fresh, files=big_files, size=big_size, note="a fresh pool each run"),
        "large_files_prefault": spread(
            pre, files=big_files, size=big_size,
            note="a fresh pool of `up --prefault` each run: each worker fills its MEM budget of chunk buffers ahead"),
        "large_files_prefault_tcp": spread(
            pre_tcp, files=big_files, size=big_size,
            note="as large_files_prefault, with TIERPOOL_LOCAL_SOCKETS=0 in every process: all over loopback TCP"),
        "small_4k": dict(
            versus(small, rd, rd_fsync, rd_unix), clients=clients, inline_max=a.inline_max or "4KiB",
            coalesced_calls=small["coalesced_calls"],
            note="concurrent calls of the one client process share requests beyond 4 in flight "
                 "(TIERPOOL_COALESCE, the client's default)"),
        "small_4k_runs": spread(
            rounds, clients=clients,
            note="the 4 KiB comparison `--runs` times over, each round tierpool then redis-server right after; "
                 "each figure the median of its rounds, `spread` its min, median and max"),
        "small_4k_alone": dict(
            versus(alone, rd, rd_fsync, rd_unix), clients=clients,
            note="TIERPOOL_COALESCE=0: every put and get a request of its own, as redis-benchmark sends them"),
        "small_4k_batched": dict(
            versus(batched, rd_p, rd_p_fsync, rd_p_unix), clients=clients, batch=batch,
            note="tierpool: put_many/get_many of `batch` files a request, `clients` requests at once, "
                 "p99 of whole requests; redis-server: redis-benchmark -P `batch`"),
        "small_16k": dict(
            versus(mid, rd_16k, None, rd_16k_unix), clients=clients,
            note="16 KiB files: past the default inline limit, so stored on the workers"),
        "small_16k_batched": dict(
            versus(mid_batched, rd_16k_p, None, rd_16k_p_unix), clients=clients, batch=batch,
            note="16 KiB files, put_many/get_many of `batch` a request; redis-benchmark -P `batch`"),
        "metadata": {
            "create_ops_per_sec": meta["write"]["ops_per_sec"],
            "stat_ops_per_sec": meta["stat"]["ops_per_sec"],
            "delete_ops_per_sec": meta["delete"]["ops_per_sec"],
        },
        "fresh_connections": {
            "connections": conns["ops"],
            "seconds": conns["seconds"],
            "mean_us": conns["seconds"] / conns["ops"] * 1e6,
            "p50_us": conns["p50_ms"] * 1e3,
            "p99_us": conns["p99_ms"] * 1e3,
        },
    }
    write_result("", result)


if __name__ == "__main__":
    main()
