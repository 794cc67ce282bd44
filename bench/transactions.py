#!/usr/bin/env python3
"""Transactions: throughput and abort rate against contention, and what a
transaction costs over the same writes made without one.

Contention: THREADS clients (threads of one process; each call releases the
GIL) run read-modify-write transactions (read a small file, write it back
changed) over KEYS files, the file picked uniformly or by a zipfian law
(s=1.1, a few hot files); and the same over KEYS 4 KiB pages of one memory
region (read a counter in the page, write it back plus one). An aborted
transaction is counted and not retried. Overhead: N small files (4 KiB
each, existing) rewritten in one transaction, against the same N rewrites
as plain `put`s (each replacing its file) and as one batch (`put_many`);
and N pages of a region written in one transaction (page by page, and as
one write), against the same writes through the region's own handle and a
`flush` (not atomic). Job output: a directory of N new
4 KiB files and a `_SUCCESS` marker published by one transaction, against
making them plainly (`mkdir`, N `put`s, the marker: not atomic).
Renames committed by transactions one after another (a namespace step
each), before and right after the removal of a tree of --backlog small
files, whose inodes then wait out the collector's grace period.

Writes JSON to stdout. Usage: python3 bench/transactions.py [--seconds S]
[--threads N] [--backlog N] [--only renames] (needs the tierpool package
installed: ./scripts/test-python.sh does it; $TIERPOOL_BIN picks the pool's binary).
"""

import argparse
import json
import random
import statistics
import threading
import time

import tierpool

PAGE = 4096


def zipf_weights(n, s=1.1):
    w = [1.0 / (i + 1) ** s for i in range(n)]
    total = sum(w)
    return [x / total for x in w]


def race(threads, seconds, attempt):
    """Runs `attempt(rng)` (one transaction, raising Conflict if it lost)
    from `threads` threads for `seconds`: (committed, aborted, elapsed)."""
    counts = {"committed": 0, "aborted": 0}
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def run(seed):
        rng = random.Random(seed)
        done = aborted = 0
        while time.perf_counter() < stop:
            try:
                attempt(rng)
                done += 1
            except tierpool.Conflict:
                aborted += 1
        with lock:
            counts["committed"] += done
            counts["aborted"] += aborted

    t0 = time.perf_counter()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return counts["committed"], counts["aborted"], time.perf_counter() - t0


def rates(committed, aborted, elapsed):
    return {
        "committed_per_s": round(committed / elapsed),
        "abort_rate": round(aborted / max(committed + aborted, 1), 4),
    }


def contention(c, keys, law, threads, seconds):
    paths = [f"/bench/k{law}-{keys}-{i}" for i in range(keys)]
    c.put_many({p: b"0" * 64 for p in paths})
    weights = zipf_weights(keys) if law == "zipf" else None

    def attempt(rng):
        p = rng.choices(paths, weights)[0] if weights else rng.choice(paths)
        with c.transaction() as tx:
            v = tx.read(p)
            tx.write(p, bytes([(v[0] + 1) % 256]) + v[1:])

    committed, aborted, elapsed = race(threads, seconds, attempt)
    for p in paths:
        c.rm(p)
    return {"keys": keys, "law": law, "threads": threads, **rates(committed, aborted, elapsed)}


def region_contention(c, keys, law, threads, seconds):
    path = f"/bench/r{law}-{keys}"
    c.alloc(path, keys * PAGE, cache="4MiB").close()
    weights = zipf_weights(keys) if law == "zipf" else None

    def attempt(rng):
        page = rng.choices(range(keys), weights)[0] if weights else rng.randrange(keys)
        with c.transaction() as tx:
            r = tx.region(path)
            v = int.from_bytes(r.read(page * PAGE, 8), "little")
            r.write(page * PAGE, (v + 1).to_bytes(8, "little"))

    committed, aborted, elapsed = race(threads, seconds, attempt)
    got = c.get(path)
    kept = sum(int.from_bytes(got[p * PAGE : p * PAGE + 8], "little") for p in range(keys))
    assert kept == committed, f"{kept} increments kept of {committed} committed"
    c.rm(path)
    return {"pages": keys, "law": law, "threads": threads, **rates(committed, aborted, elapsed)}


def region_overhead(c, n, repeat):
    path = f"/bench/ro{n}"
    c.alloc(path, n * PAGE, cache="64MiB").close()
    data = b"z" * PAGE
    tx_s, one_s, plain_s = [], [], []
    r = c.region(path, cache="64MiB")
    for _ in range(repeat):
        t = time.perf_counter()
        with c.transaction() as tx:
            g = tx.region(path)
            for i in range(n):
                g.write(i * PAGE, data)
        tx_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        with c.transaction() as tx:
            tx.region(path).write(0, data * n)
        one_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(n):
            r.write(i * PAGE, data)
        r.flush()
        plain_s.append(time.perf_counter() - t)
    r.close()
    c.rm(path)
    out = {
        "pages": n,
        "transaction_ms": round(statistics.median(tx_s) * 1e3, 2),
        "transaction_one_write_ms": round(statistics.median(one_s) * 1e3, 2),
        "region_flush_ms": round(statistics.median(plain_s) * 1e3, 2),
    }
    out["transaction_over_flush"] = round(out["transaction_ms"] / out["region_flush_ms"], 2)
    return out


def overhead(c, n, repeat):
    paths = [f"/bench/o{n}-{i}" for i in range(n)]
    for p in paths:
        c.put(b"\0" * 4096, p)
    data = b"x" * 4096
    tx_s, put_s, many_s = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        with c.transaction() as tx:
            for p in paths:
                tx.write(p, data)
        tx_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        for p in paths:
            c.put(data, p)
        put_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        c.put_many({p: data for p in paths})
        many_s.append(time.perf_counter() - t)
    for p in paths:
        c.rm(p)
    out = {
        "writes": n,
        "transaction_ms": round(statistics.median(tx_s) * 1e3, 2),
        "plain_puts_ms": round(statistics.median(put_s) * 1e3, 2),
    }
    out["put_many_ms"] = round(statistics.median(many_s) * 1e3, 2)
    out["transaction_over_puts"] = round(out["transaction_ms"] / out["plain_puts_ms"], 2)
    return out


def renames_with_backlog(c, backlog, n):
    """Transactions of one rename each, per second: with nothing waiting
    for collection, then right after `backlog` files were removed."""
    c.mkdir("/bench/tree")
    for start in range(0, backlog, 1000):
        c.put_many({f"/bench/tree/f{i}": b"z" * 10 for i in range(start, min(backlog, start + 1000))})
    c.put_many({"/bench/r0": b"r"})
    at = [0]

    def renames():
        t = time.perf_counter()
        for i in range(at[0], at[0] + n):
            with c.transaction() as tx:
                tx.mv(f"/bench/r{i}", f"/bench/r{i + 1}")
        at[0] += n
        return round(n / (time.perf_counter() - t))

    out = {"renames": n, "backlog": backlog, "per_s_without": renames()}
    c.rm("/bench/tree", recursive=True)
    out["pending_gc_before"] = c.status()["pending_gc"]
    out["per_s_with"] = renames()
    out["pending_gc_after"] = c.status()["pending_gc"]
    c.rm(f"/bench/r{at[0]}")
    return out


def job_output(c, n, repeat):
    data = b"y" * 4096
    tx_s, plain_s = [], []
    for r in range(repeat):
        d = f"/bench/job{n}-tx{r}"
        t = time.perf_counter()
        with c.transaction() as tx:
            tx.mkdir(d)
            for i in range(n):
                tx.write(f"{d}/part-{i}", data)
            tx.write(f"{d}/_SUCCESS", b"")
        tx_s.append(time.perf_counter() - t)
        assert c.get(f"{d}/part-0") == data
        d = f"/bench/job{n}-plain{r}"
        t = time.perf_counter()
        c.mkdir(d)
        for i in range(n):
            c.put(data, f"{d}/part-{i}")
        c.put(b"", f"{d}/_SUCCESS")
        plain_s.append(time.perf_counter() - t)
    out = {
        "files": n,
        "transaction_ms": round(statistics.median(tx_s) * 1e3, 2),
        "plain_ms": round(statistics.median(plain_s) * 1e3, 2),
    }
    out["transaction_over_plain"] = round(out["transaction_ms"] / out["plain_ms"], 2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backlog", type=int, default=100000)
    ap.add_argument("--only", choices=["renames"], help="run only this part")
    a = ap.parse_args()
    out = {
        "workers": a.workers,
        "contention": [],
        "contention_region_pages": [],
        "overhead": [],
        "overhead_region_pages": [],
        "job_output": [],
    }
    with tierpool.local(workers=a.workers, mem="1GiB", disk="4GiB", set_env=False) as c:
        c.mkdir("/bench")
        out["renames_with_backlog"] = renames_with_backlog(c, a.backlog, 200)
        if a.only == "renames":
            print(json.dumps(out, indent=2))
            return
        for keys, law in ((10000, "uniform"), (1000, "zipf"), (100, "uniform"), (10, "uniform"), (10, "zipf")):
            out["contention"].append(contention(c, keys, law, a.threads, a.seconds))
        for keys, law in ((10000, "uniform"), (1000, "zipf"), (100, "uniform"), (10, "uniform"), (10, "zipf")):
            out["contention_region_pages"].append(region_contention(c, keys, law, a.threads, a.seconds))
        for n in (1, 16, 128):
            out["overhead"].append(overhead(c, n, a.repeat))
        for n in (1, 16, 128, 1024):
            out["overhead_region_pages"].append(region_overhead(c, n, a.repeat))
        for n in (1, 16, 128):
            out["job_output"].append(job_output(c, n, a.repeat))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
