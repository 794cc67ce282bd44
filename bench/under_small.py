#!/usr/bin/env python3
"""Many small files and a directory under-store: how long each
operation over a whole tree takes, in files per second, through the CLI
(`tierpool`) against a fresh embedded pool of two workers each run.

  - `attach` of a directory of N files (each adopted by the metadata);
  - `load -r` of them all (their bytes into the pool);
  - `free -r` of them all (the pool's copies let go of);
  - `sync-meta` after every object below changed (each adopted again);
  - `sync` of N files put into a `back` attachment (by the Python client;
    each written below: an fsync of its object, and its record in the
    metadata log), with no background write-back round meanwhile.

Usage: python3 bench/under_small.py [--files 10000] [--size 1000] [--runs 2] [--bin PATH]
Writes JSON to stdout (medians, and each run's seconds) and to
bench/results/under-small-<timestamp>.json.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402

import tierpool  # noqa: E402

STEPS = ("attach", "load", "free", "sync_meta", "sync")


def tree(root, files, size, fill):
    """`files` files of `size` bytes of `fill`, 1,000 to a directory."""
    for i in range(files):
        d = os.path.join(root, f"d{i // 1000:03}")
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:06}"), "wb") as f:
            f.write(fill * size)


def one_run(files, size):
    """Seconds of each step on a fresh pool."""
    state = tempfile.mkdtemp(prefix="tierpool-bench-")
    below, back = os.path.join(state, "below"), os.path.join(state, "back")
    port = common.free_port()
    common.sh(common.BIN, "up", "--dir", os.path.join(state, "pool"), "--port", str(port), "--workers", "2",
              "--mem", "2GiB", "--disk", "4GiB", "--write-back-every", "1h")
    env = dict(os.environ, TIERPOOL_COORDINATOR=f"127.0.0.1:{port}",
               TIERPOOL_SECRET_FILE=os.path.join(state, "pool", "coordinator", "secret"))

    def timed(*args):
        t = time.perf_counter()
        common.sh(common.BIN, *args, env=env)
        return time.perf_counter() - t

    out = {}
    try:
        tree(below, files, size, b"a")
        out["attach"] = timed("attach", f"file://{below}", "/below")
        out["load"] = timed("load", "-r", "/below")
        out["free"] = timed("free", "-r", "/below")
        time.sleep(1.1)  # a later mtime for every object rewritten
        tree(below, files, size, b"b")
        out["sync_meta"] = timed("sync-meta", "/below")
        os.makedirs(back)
        common.sh(common.BIN, "attach", f"file://{back}", "/back", "--mode", "back", env=env)
        # As many files put into the pool (by the Python client, many to a
        # request), then written below.
        os.environ.update(TIERPOOL_COORDINATOR=env["TIERPOOL_COORDINATOR"],
                          TIERPOOL_SECRET_FILE=env["TIERPOOL_SECRET_FILE"])
        c = tierpool.connect()
        for first in range(0, files, 1000):
            d = f"/back/t/d{first // 1000:03}"
            c.mkdir(d, parents=True)
            c.put_many([(f"{d}/f{i:06}", b"c" * size) for i in range(first, min(files, first + 1000))])
        out["sync"] = timed("sync", "/back")
        written = sum(len(fs) for _, _, fs in os.walk(os.path.join(back, "t")))
        if written != files:
            raise RuntimeError(f"sync wrote {written} files below, not {files}")
    finally:
        common.sh(common.BIN, "down", "--dir", os.path.join(state, "pool"))
        shutil.rmtree(state, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bin", help="the tierpool binary to run (default: build this checkout's)")
    a = ap.parse_args()
    if a.bin:
        common.BIN = os.path.abspath(a.bin)
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "tierpool"], cwd=common.ROOT, check=True)
    runs = [one_run(a.files, a.size) for _ in range(a.runs)]
    result = {"files": a.files, "file_size": a.size, "runs": a.runs}
    for step in STEPS:
        secs = [r[step] for r in runs]
        mid = statistics.median(secs)
        result[step] = {"seconds": round(mid, 3), "files_per_sec": round(a.files / mid),
                        "seconds_each_run": [round(s, 3) for s in secs]}
    common.write_result("under-small-", result)


if __name__ == "__main__":
    main()
