#!/usr/bin/env python3
"""Snapshot creation against the size of a tree: the number of entries
(1,000 and 10,000 files) and the bytes in them (files of 4 KiB, kept
inline, and of 1 MiB, on the workers), on an embedded pool. Then the cost
of copy on write: after a snapshot, rewriting 1%, 10% and 100% of the
files, the bytes the snapshot keeps (a full copy would be 100%).

Writes JSON to stdout. A snapshot copies metadata only, so its time should
follow the number of entries, not their bytes.

Usage: python3 bench/snapshots.py [--workers N] [--repeat N]
(needs the tierpool package installed: ./scripts/test-python.sh does it).
"""

import argparse
import json
import os
import statistics
import time

import tierpool


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    out = {"workers": a.workers, "create": [], "copy_on_write": []}
    with tierpool.local(workers=a.workers, mem="2GiB", disk="4GiB", set_env=False) as c:
        for files, size in [(1000, 4096), (1000, 1 << 20), (10000, 4096)]:
            d = f"/t{files}x{size}"
            blob = os.urandom(size)
            c.mkdir(d)
            for lo in range(0, files, 1000):
                results = c.put_many({f"{d}/f{i}": blob for i in range(lo, min(files, lo + 1000))})
                assert not any(isinstance(r, Exception) for r in results)
            times = []
            for r in range(a.repeat):
                times.append(timed(lambda: c.snapshot_create(d, f"s{r}")))
            for r in range(a.repeat):
                c.snapshot_remove(d, f"s{r}")
            out["create"].append(
                {
                    "files": files,
                    "file_bytes": size,
                    "tree_bytes": files * size,
                    "seconds_median": round(statistics.median(times), 4),
                    "seconds_min": round(min(times), 4),
                    "seconds_max": round(max(times), 4),
                }
            )
        d = "/t1000x1048576"
        files, size = 1000, 1 << 20
        for percent in (1, 10, 100):
            c.snapshot_create(d, "cow")
            changed = files * percent // 100
            blob = os.urandom(size)
            for i in range(changed):
                c.put(blob, f"{d}/f{i}")
            kept = c.snapshots(d)[0]["kept_bytes"]
            out["copy_on_write"].append(
                {
                    "changed_percent": percent,
                    "kept_bytes": kept,
                    "full_copy_bytes": files * size,
                    "fraction_of_full_copy": round(kept / (files * size), 4),
                }
            )
            c.snapshot_remove(d, "cow")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
