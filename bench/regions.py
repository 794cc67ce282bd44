#!/usr/bin/env python3
"""Regions at this machine's scale: the NVMalloc experiments, measured.

One local pool (2 workers); each experiment runs in a child process, inside a
cgroup-v1 memory limit where it says so (needs root; otherwise unlimited and
marked so in the output):

  stream     STREAM triad a = b + s*c over 3 arrays of 128 MiB: all in DRAM,
             `a` on a region, all three on regions (64 MiB cache each).
  matmul     C = A @ B with B a 256 MiB region, the process limited to 192 MiB:
             B read row-major (full rows, streaming) vs column-major (column
             blocks, strided); time, faults and bytes fetched of each.
  sort       out-of-core sort of 100-byte records (10-byte keys), 256 MiB of
             records in a region, the process limited to 192 MiB: a sample sort
             through bucket regions; checked sorted and complete.
  randwrite  128K single-byte writes at random addresses of a 2 GiB region
             (64 MiB cache): bytes sent with 4 KiB dirty pages vs what
             whole-chunk write-back would send.

Writes JSON to stdout and bench/results/regions-<timestamp>.json.
Usage: python3 bench/regions.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


# ---------------------------------------------------------------- experiments


def stream(c) -> dict:
    import numpy as np

    n = 16 * MIB  # float64 items: 128 MiB per array
    s = 3.0
    block = 1 << 20
    out = {"items": n, "array_mib": n * 8 // MIB}

    def triad(a, b, cc) -> float:
        t = time.perf_counter()
        for i in range(0, n, block):
            np.multiply(cc[i : i + block], s, out=a[i : i + block])
            a[i : i + block] += b[i : i + block]
        return 3 * 8 * n / (time.perf_counter() - t) / 1e6

    def fill(b, cc) -> None:
        for i in range(0, n, block):
            b[i : i + block] = 1.0
            cc[i : i + block] = 2.0

    def region(name: str):
        r = c.alloc(f"/bench/stream-{name}-{os.getpid()}", n * 8, cache="64MiB")
        return r, r.as_array("float64")

    # all in DRAM
    a, b, cc = np.zeros(n), np.empty(n), np.empty(n)
    fill(b, cc)
    out["dram_mb_s"] = [round(triad(a, b, cc)) for _ in range(3)]
    assert a[-1] == 7.0
    # a on a region
    ra, a = region("a")
    out["a_on_region_mb_s"] = [round(triad(a, b, cc)) for _ in range(3)]
    ra.flush()
    out["a_on_region_stats"] = ra.stats()
    assert a[-1] == 7.0 and a[0] == 7.0
    del b, cc
    # all three on regions
    rb, b = region("b")
    rc, cc = region("c")
    fill(b, cc)
    out["all_on_regions_mb_s"] = [round(triad(a, b, cc)) for _ in range(3)]
    assert a[n // 2] == 7.0
    for r in (ra, rb, rc):
        r.flush()
    out["all_on_regions_stats"] = {k: sum(r.stats()[k] for r in (ra, rb, rc)) for k in ra.stats()}
    del a, b, cc
    for r in (ra, rb, rc):
        r.free()
    return out


def matmul(c) -> dict:
    import numpy as np

    k, n, m = 4096, 8192, 256  # B: k x n float64 = 256 MiB; A: m x k; C: m x n
    rng = np.random.default_rng(0)
    a = rng.random((m, k))
    path = f"/bench/matmul-B-{os.getpid()}"
    r = c.alloc(path, k * n * 8, cache="64MiB")
    bm = r.as_array("float64", (k, n))
    for i in range(0, k, 256):
        bm[i : i + 256] = rng.random((256, n))
    r.close()
    del bm
    # The reference result, computed in row bands (the process cannot hold B).
    out = {"B_mib": k * n * 8 // MIB, "A": [m, k], "C": [m, n], "cache_mib": 64}
    results = {}
    for pattern in ("row_major", "column_major"):
        r = c.region(path, cache="64MiB")
        bm = r.as_array("float64", (k, n))
        cm = np.zeros((m, n))
        t = time.perf_counter()
        if pattern == "row_major":
            for i in range(0, k, 256):  # full rows of B: contiguous, streamed
                cm += a[:, i : i + 256] @ bm[i : i + 256]
        else:
            for j in range(0, n, 512):  # column blocks of B: strided
                cm[:, j : j + 512] = a @ bm[:, j : j + 512]
        secs = time.perf_counter() - t
        st = r.stats()
        out[pattern] = {"seconds": round(secs, 2), "gflop_s": round(2 * m * k * n / secs / 1e9, 2), **st}
        results[pattern] = cm
        del bm
        r.close()
    assert np.allclose(results["row_major"], results["column_major"])
    c.rm(path)
    return out


def sort(c) -> dict:
    import numpy as np

    rec, key = 100, 10
    count = 256 * MIB // rec
    rng = np.random.default_rng(7)
    src = c.alloc(f"/bench/sort-in-{os.getpid()}", count * rec, cache="16MiB", chunk_size="1MiB")
    s = src.as_array("uint8", (count, rec))
    step = 1 << 16
    for i in range(0, count, step):
        j = min(i + step, count)
        s[i:j] = rng.integers(0, 256, (j - i, rec), dtype=np.uint8)
    src.flush()
    t = time.perf_counter()
    # 1. splitters from a sample of keys
    sample = np.sort(s[rng.integers(0, count, 8192), :key].copy().view(f"S{key}").ravel())
    buckets = 32
    splitters = sample[[len(sample) * i // buckets for i in range(1, buckets)]]
    # 2. distribute records into bucket regions, block by block
    parts = []
    sizes = np.zeros(buckets, dtype=np.int64)
    blocks = []
    for i in range(0, count, step):
        block = s[i : min(i + step, count)].copy()
        b = np.searchsorted(splitters, block[:, :key].copy().view(f"S{key}").ravel(), side="right")
        blocks.append(np.bincount(b, minlength=buckets))
    caps = np.sum(blocks, axis=0)
    for bi in range(buckets):
        r = c.alloc(f"/bench/sort-b{bi}-{os.getpid()}", max(1, int(caps[bi])) * rec, cache="1MiB", chunk_size="1MiB")
        parts.append((r, r.as_array("uint8", (max(1, int(caps[bi])), rec))))
    for i in range(0, count, step):
        block = s[i : min(i + step, count)].copy()
        b = np.searchsorted(splitters, block[:, :key].copy().view(f"S{key}").ravel(), side="right")
        order = np.argsort(b, kind="stable")
        bounds = np.searchsorted(b[order], np.arange(buckets + 1))
        for bi in range(buckets):
            rows = block[order[bounds[bi] : bounds[bi + 1]]]
            parts[bi][1][sizes[bi] : sizes[bi] + len(rows)] = rows
            sizes[bi] += len(rows)
    # 3. sort each bucket in memory, write it to the output in order
    dst = c.alloc(f"/bench/sort-out-{os.getpid()}", count * rec, cache="16MiB", chunk_size="1MiB")
    d = dst.as_array("uint8", (count, rec))
    at = 0
    for bi, (r, arr) in enumerate(parts):
        data = arr[: sizes[bi]].copy()
        keys = data[:, :key].copy().view(f"S{key}").ravel()
        d[at : at + len(data)] = data[np.argsort(keys, kind="stable")]
        at += len(data)
    dst.flush()
    secs = time.perf_counter() - t
    # check: sorted, and the same multiset of records (by a checksum of rows)
    prev = None
    ok = at == count
    csum_in = csum_out = 0
    for i in range(0, count, step):
        blk = d[i : min(i + step, count)]
        keys = blk[:, :key].copy().view(f"S{key}").ravel()
        ok &= bool(np.all(keys[:-1] <= keys[1:])) and (prev is None or prev <= keys[0])
        prev = keys[-1]
        csum_out += int(blk.sum(dtype=np.uint64))
        csum_in += int(s[i : min(i + step, count)].sum(dtype=np.uint64))
    assert ok and csum_in == csum_out, "sort output is wrong"
    stats = dst.stats()
    for r in [src, dst] + [p[0] for p in parts]:
        r.close()
        c.rm(r.path)
    return {"records": count, "record_bytes": rec, "data_mib": count * rec // MIB, "seconds": round(secs, 2),
            "records_per_s": round(count / secs), "output_stats": stats}


def randwrite(c) -> dict:
    import numpy as np

    size, writes = 2048 * MIB, 128 * 1024
    out: dict = {"region_mib": size // MIB, "writes": writes, "chunk_mib": 4}
    for cache in ("64MiB", "16MiB"):
        t = time.perf_counter()
        r = c.alloc(f"/bench/randwrite-{os.getpid()}", size, cache=cache)
        alloc_s = time.perf_counter() - t
        a = r.as_array("uint8")
        addrs = np.random.default_rng(3).integers(0, size, writes)
        t = time.perf_counter()
        for x in addrs.tolist():
            a[x] = 1
        r.flush()
        secs = time.perf_counter() - t
        st = r.stats()
        whole = st["chunks_written_back"] * r.chunk_size
        del a
        r.free()
        out[f"cache_{cache}"] = {
            "alloc_seconds": round(alloc_s, 2),
            "seconds": round(secs, 2),
            "writes_per_s": round(writes / secs),
            "bytes_written_back_dirty_pages": st["bytes_written_back"],
            "bytes_written_back_whole_chunks": whole,
            "reduction": round(whole / max(1, st["bytes_written_back"]), 1),
            "stats": st,
        }
    return out


EXPERIMENTS = {"stream": (stream, None), "matmul": (matmul, 192 * MIB), "sort": (sort, 192 * MIB),
               "randwrite": (randwrite, None)}


# ---------------------------------------------------------------- harness


def child(name: str) -> None:
    import tierpool

    c = tierpool.connect()
    c.mkdir("/bench", parents=True, exist_ok=True)
    print(json.dumps(EXPERIMENTS[name][0](c)))


def cgroup(limit: int | None) -> str | None:
    root = "/sys/fs/cgroup/memory"
    if limit is None or not os.access(root, os.W_OK):
        return None
    path = os.path.join(root, f"tierpool-bench-{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(path)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))
    return path


def run(name: str) -> dict:
    limit = EXPERIMENTS[name][1]
    cg = cgroup(limit)
    enter = (lambda: open(os.path.join(cg, "cgroup.procs"), "w").write(str(os.getpid()))) if cg else None
    t = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True, preexec_fn=enter)
    res: dict = {"wall_seconds": round(time.perf_counter() - t, 1)}
    if cg:
        with open(os.path.join(cg, "memory.max_usage_in_bytes")) as f:
            res["peak_memory_mib"] = round(int(f.read()) / MIB, 1)
        os.rmdir(cg)
    res["memory_limit_mib"] = limit // MIB if cg and limit else None
    if p.returncode != 0:
        res["error"] = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return res
    res.update(json.loads(p.stdout.strip().splitlines()[-1]))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=list(EXPERIMENTS), help="run only these")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    import tierpool

    out = {"benchmark": "regions", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count()}
    with tierpool.local(workers=2, mem="768MiB", disk="2GiB") as c:
        out["pool"] = {"workers": 2, "mem_per_worker_mib": 768, "disk_per_worker_mib": 2048, "address": c.address}
        for name in a.only or list(EXPERIMENTS):
            out[name] = run(name)
            print(f"{name}: {json.dumps(out[name])}", file=sys.stderr)
    text = json.dumps(out, indent=2)
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"regions-{time.strftime('%Y%m%d-%H%M%S')}.json"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
