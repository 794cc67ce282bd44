#!/usr/bin/env python3
"""Python read throughput against the CLI's, on the same pool in the same run.

Starts one local pool (tierpool.local), stores a file (1 GiB by default, held
in the workers' MEM), then alternates, for several rounds:
  - Python: `readinto` of the whole file into a preallocated numpy buffer;
  - CLI:    `tierpool get PATH -` with stdout to /dev/null (the same bytes
            fetched and checked by the same Rust client, written nowhere).
Reports the median MB/s of each and their ratio (target: Python >= 0.8 of the
CLI). Writes JSON to stdout and to bench/results/python-read-<timestamp>.json.

Needs the package installed (`pip install ./`) and the release CLI, which it
builds if missing (`cargo build --release -p tierpool`).

Usage: python3 bench/python_read.py [--size 1GiB] [--rounds 5] [--cli PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import tierpool

import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "target", "release", "tierpool")
PATH = "/bench/python-read.bin"


def ensure_cli(path: str) -> str:
    if path != CLI or os.path.exists(path):
        return path
    subprocess.run(["cargo", "build", "--release", "-p", "tierpool"], cwd=ROOT, check=True)
    return path


def fill(client: tierpool.Client, size: int) -> None:
    block = np.random.default_rng(1).integers(0, 256, size=64 << 20, dtype=np.uint8)
    client.mkdir("/bench", parents=True)
    with client.open(PATH, "wb") as f:
        left = size
        while left:
            n = min(left, block.size)
            f.write(block[:n])
            left -= n


def python_read(client: tierpool.Client, buf: np.ndarray) -> float:
    t = time.perf_counter()
    with client.open(PATH, "rb") as f:
        n = f.readinto(buf)
    elapsed = time.perf_counter() - t
    assert n == buf.size, (n, buf.size)
    return elapsed


def cli_get(cli: str, address: str) -> float:
    t = time.perf_counter()
    with open(os.devnull, "wb") as out:
        subprocess.run([cli, "get", "--coordinator", address, PATH, "-"], stdout=out, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB", help="file size (default 1GiB)")
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds of each (default 5)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cli", default=CLI, help="tierpool binary (default: target/release/tierpool, built if missing)")
    a = ap.parse_args()
    size = tierpool.parse_size(a.size)
    cli = ensure_cli(a.cli)
    # Each worker's MEM holds its share of the file with room to spare.
    mem = max(256 << 20, (size // a.workers) * 3 // 2)
    with tierpool.local(workers=a.workers, mem=mem, disk=2 * mem) as client:
        fill(client, size)
        buf = np.empty(size, dtype=np.uint8)
        buf.fill(0)  # fault the pages in once, outside the measurement
        python_read(client, buf)  # warm-up of both paths
        cli_get(cli, client.address)
        py_times, cli_times = [], []
        for _ in range(a.rounds):
            py_times.append(python_read(client, buf))
            cli_times.append(cli_get(cli, client.address))
        expected = np.random.default_rng(1).integers(0, 256, size=64 << 20, dtype=np.uint8)
        assert np.array_equal(buf[: min(size, expected.size)], expected[: min(size, expected.size)])
    mbps = lambda secs: size / secs / 1e6  # noqa: E731
    py = statistics.median(mbps(s) for s in py_times)
    cl = statistics.median(mbps(s) for s in cli_times)
    result = {
        "benchmark": "python_readinto_vs_cli_get",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {**machine.describe(), "python": platform.python_version(), "platform": platform.platform()},
        "pool": {"workers": a.workers, "mem_per_worker": mem, "file_bytes": size},
        "rounds": a.rounds,
        "python_readinto_mb_s": round(py, 1),
        "cli_get_mb_s": round(cl, 1),
        "ratio": round(py / cl, 3),
        "target_ratio": 0.8,
        "meets_target": py / cl >= 0.8,
        "python_readinto_mb_s_all": [round(mbps(s), 1) for s in py_times],
        "cli_get_mb_s_all": [round(mbps(s), 1) for s in cli_times],
    }
    text = json.dumps(result, indent=2)
    print(text)
    out_dir = os.path.join(ROOT, "bench", "results")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"python-read-{time.strftime('%Y%m%d-%H%M%S')}.json"), "w") as f:
        f.write(text + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
