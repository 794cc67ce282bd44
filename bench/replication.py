#!/usr/bin/env python3
"""What copies cost and how fast a lost worker's copies come back.

One run, on this machine:
  - loopback TCP throughput (iperf3, one stream) and the disk's write
    throughput: the limits of writing several copies and of a repair;
  - `tierpool bench` (write, then read back verified) on pools of three
    workers keeping 1, 2 and 3 copies of each chunk: write and read MB/s,
    each against one copy and against TCP;
  - repair: a pool of four workers keeping two copies holds DATA; one
    worker is killed -9; time until the coordinator has copied every
    replica it held again (from `status --json`: nothing missing, nothing
    moving), the bytes it held, and the repair rate against TCP and disk.
Writes JSON to stdout and to bench/results/replication-<timestamp>.json.

Usage: python3 bench/replication.py [--quick] [--bin PATH]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402
import machine  # noqa: E402  (how the machine's CPUs idle)
from migration import Pool, disk_write_mb_per_sec, fill  # noqa: E402

ROOT = common.ROOT


def copies_run(binary, replicas, mem, disk, files, size):
    pool = Pool(binary, mem, disk, ("--replicas", str(replicas)))
    try:
        for _ in range(2):
            pool.join()
        pool.settle()
        return pool.bench(files, size)
    finally:
        pool.close()


def repaired(pool, dead_id):
    s = pool.status()
    r, m = s["replication"], s["migration"]
    return dead_id in r["workers_down"] and r["replicas_missing"] == 0 and not m["active"], s


def repair_run(binary, data, mem, disk, tmp):
    pool = Pool(binary, mem, disk, ("--replicas", "2", "--dead-after", "2s"))
    try:
        for _ in range(3):
            pool.join()
        pool.settle()
        fill(pool, data, tmp)
        workers = pool.status()["workers"]
        victim = workers[-1]
        held = victim["mem"]["used"] + victim["disk"]["used"]
        proc = pool.procs[len(workers)]  # coordinator first, then workers in order of joining
        t = time.time()
        proc.kill()
        proc.wait()
        declared = None
        while True:
            done, s = repaired(pool, victim["id"])
            if declared is None and victim["id"] in s["replication"]["workers_down"]:
                declared = time.time() - t
            if done:
                break
            if time.time() - t > 3600:
                raise SystemExit(f"not repaired: {s['replication']} {s['migration']}")
            time.sleep(0.1)
        secs = time.time() - t
        copy_secs = secs - (declared or 0)
        moved = s["migration"]["bytes_moved"]
        return {"bytes_held_by_the_dead_worker": held, "bytes_copied": moved, "declared_down_after_s": declared,
                "seconds_to_full_replication": secs, "copy_seconds": copy_secs,
                "copy_mb_per_sec": moved / copy_secs / 1e6 if copy_secs > 0 else None,
                "survivors": len(workers) - 1}
    finally:
        pool.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes for a fast check")
    ap.add_argument("--bin", help="the tierpool binary to measure (default: build this checkout's)")
    a = ap.parse_args()
    common.ensure_tools()
    binary = os.path.abspath(a.bin) if a.bin else common.BIN
    if not a.bin:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "tierpool"], cwd=ROOT, check=True)
    files, size = (4, "32MiB") if a.quick else (8, "64MiB")
    data = (512 << 20) if a.quick else (2 << 30)
    tmp = tempfile.mkdtemp(prefix="tierpool-replication-src-")
    result = {"machine": machine.describe(), "binary": binary}
    try:
        result["loopback_tcp_mb_per_sec"] = common.iperf3()
        result["disk_write_mb_per_sec"] = disk_write_mb_per_sec(tmp)
        tcp = result["loopback_tcp_mb_per_sec"]
        runs = {}
        for r in (1, 2, 3):
            runs[str(r)] = copies_run(binary, r, "1GiB", "4GiB", files, size)
        one = runs["1"]
        for r in runs.values():
            r["write_vs_one_copy"] = r["write_mb_per_sec"] / one["write_mb_per_sec"]
            r["read_vs_one_copy"] = r["read_mb_per_sec"] / one["read_mb_per_sec"]
            r["write_vs_tcp"] = r["write_mb_per_sec"] / tcp
            r["read_vs_tcp"] = r["read_mb_per_sec"] / tcp
        result["copies"] = runs
        rep = repair_run(binary, data, f"{data // 8 >> 20}MiB", f"{data * 2 >> 20}MiB", tmp)
        if rep["copy_mb_per_sec"]:
            rep["copy_vs_tcp"] = rep["copy_mb_per_sec"] / tcp
            rep["copy_vs_disk_write"] = rep["copy_mb_per_sec"] / result["disk_write_mb_per_sec"]
        result["repair"] = rep
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    common.write_result("replication-", result)


if __name__ == "__main__":
    main()
