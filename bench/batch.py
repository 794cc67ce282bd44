#!/usr/bin/env python3
"""Small files from one Python thread: one call per file against one call
for many (`Client.put_many` / `get_many`), on an embedded pool.

Writes JSON to stdout: files per second for each way, and their ratio.

Usage: python3 bench/batch.py [--files N] [--size BYTES] [--workers N]
(needs the tierpool package installed: ./scripts/test-python.sh does it).
"""

import argparse
import json
import os
import time

import tierpool


def rate(n, seconds):
    return round(n / seconds) if seconds > 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    blob = os.urandom(a.size)
    out = {"files": a.files, "size": a.size, "workers": a.workers}
    with tierpool.local(workers=a.workers, mem="512MiB", disk="1GiB", set_env=False) as c:
        c.mkdir("/one")
        c.mkdir("/many")
        t = time.perf_counter()
        for i in range(a.files):
            c.put(blob, f"/one/f{i}")
        out["put_one_by_one_per_s"] = rate(a.files, time.perf_counter() - t)
        t = time.perf_counter()
        results = c.put_many({f"/many/f{i}": blob for i in range(a.files)})
        out["put_many_per_s"] = rate(a.files, time.perf_counter() - t)
        assert not any(isinstance(r, Exception) for r in results)
        t = time.perf_counter()
        for i in range(a.files):
            assert c.get(f"/one/f{i}") == blob
        out["get_one_by_one_per_s"] = rate(a.files, time.perf_counter() - t)
        t = time.perf_counter()
        got = c.get_many([f"/many/f{i}" for i in range(a.files)])
        out["get_many_per_s"] = rate(a.files, time.perf_counter() - t)
        assert all(g == blob for g in got)
    out["put_ratio"] = round(out["put_many_per_s"] / out["put_one_by_one_per_s"], 2)
    out["get_ratio"] = round(out["get_many_per_s"] / out["get_one_by_one_per_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
