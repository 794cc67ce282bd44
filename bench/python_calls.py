#!/usr/bin/env python3
"""Single calls from Python threads: `put`, `get` and `stat` of small files,
one file per call, on an embedded pool.

Each of `--threads` threads makes `--calls` calls of each kind, on files of
its own; every `get` is checked. What one call costs is mostly one or two
round trips to the pool and the hand-offs between threads around them.

Writes JSON to stdout: calls per second of each kind and size, and
microseconds per call as one thread sees it.

Usage: python3 bench/python_calls.py [--calls N] [--threads N] [--sizes 4KiB,16KiB]
(needs the tierpool package installed: ./scripts/test-python.sh does it).
"""

import argparse
import json
import threading
import time

from dask.utils import parse_bytes

import tierpool

import machine


def timed(threads, calls, call):
    """Runs `call(thread, i)` for i < calls in each of `threads` threads;
    returns the seconds all took."""

    def part(t):
        for i in range(calls):
            call(t, i)

    ts = [threading.Thread(target=part, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000, help="calls of each kind per thread")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default="4KiB,16KiB", help="file sizes, comma-separated")
    a = ap.parse_args()
    out = {"benchmark": "python_calls", "machine": machine.describe(), "threads": a.threads, "calls_per_thread": a.calls, "results": []}
    with tierpool.local(workers=2, mem="1GiB") as c:
        for size in a.sizes.split(","):
            n = parse_bytes(size)
            blob = bytes(range(256)) * (n // 256) + bytes(n % 256)

            def put(t, i, size=size, blob=blob):
                c.put(blob, f"/{size}-{t}-{i}")

            def get(t, i, size=size, blob=blob):
                if c.get(f"/{size}-{t}-{i}") != blob:
                    raise AssertionError(f"/{size}-{t}-{i} came back wrong")

            def stat(t, i, size=size):
                c.stat(f"/{size}-{t}-{i}")

            for kind, call in (("put", put), ("get", get), ("stat", stat)):
                s = timed(a.threads, a.calls, call)
                out["results"].append(
                    {
                        "kind": kind,
                        "size": n,
                        "calls_per_s": round(a.threads * a.calls / s),
                        "us_per_call": round(s / a.calls * 1e6, 1),
                    }
                )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
