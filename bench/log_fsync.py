#!/usr/bin/env python3
"""What one metadata log record costs the disk: a 4 KiB write and an
fdatasync, into a file grown by appending, into space allocated ahead
(`fallocate`: its blocks are marked unwritten until written), and into
space written with zeros ahead (what the coordinator's log does). Median
of --runs runs of --writes each, in the directory given (default: this
checkout's, whose file system a pool started here would use).

Usage: python3 bench/log_fsync.py [--dir DIR] [--writes N] [--runs N]
Writes JSON to stdout and to bench/results/log-fsync-<timestamp>.json.
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPACE = 64 << 20


def one(dir: str, how: str, writes: int) -> float:
    """Microseconds per 4 KiB write + fdatasync."""
    path = os.path.join(dir, f".log-fsync-{os.getpid()}-{how}")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    try:
        if how == "allocated":
            os.posix_fallocate(fd, 0, SPACE)
        elif how == "zeros":
            zeros = bytes(1 << 20)
            for at in range(0, SPACE, len(zeros)):
                os.pwrite(fd, zeros, at)
            os.fdatasync(fd)
        record = b"r" * 4096
        t = time.perf_counter()
        for i in range(writes):
            os.pwrite(fd, record, i * len(record))
            os.fdatasync(fd)
        return (time.perf_counter() - t) / writes * 1e6
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=ROOT)
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.writes * 4096 > SPACE:
        raise SystemExit(f"--writes {a.writes}: at most {SPACE // 4096}")
    runs = {how: [] for how in ("appended", "allocated", "zeros")}
    for _ in range(a.runs):
        for how in runs:
            runs[how].append(one(a.dir, how, a.writes))
    result = {
        "dir": a.dir,
        "writes": a.writes,
        "us_per_write_and_fdatasync": {how: round(statistics.median(r), 1) for how, r in runs.items()},
        "range_us": {how: [round(min(r), 1), round(max(r), 1)] for how, r in runs.items()},
    }
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results", "log-fsync-" + time.strftime("%Y%m%d-%H%M%S") + ".json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
