#!/usr/bin/env python3
"""How fast partitions move when a worker joins, against the machine's limits,
and what a migration costs the traffic that goes on meanwhile.

One run, on this machine:
  - loopback TCP throughput (iperf3, one stream) and the disk's write
    throughput (1 GiB written and fsynced under the pool's directory): the
    two limits of a copy from one worker's DISK to another's;
  - a pool of one worker holding DATA (spilled: MEM is a quarter of it), a
    second worker joins: time until the migration is over, bytes moved, MB/s
    (from `status --json`), alone and with `--move-rate` caps;
  - `tierpool bench` (write then read back, verified) on a pool at rest, and
    the same while a second worker joins: foreground throughput during a
    migration as a fraction of without.
Writes JSON to stdout and to bench/results/migration-<timestamp>.json.

Usage: python3 bench/migration.py [--quick] [--bin PATH]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402  (iperf3, free_port, tool install)
import machine  # noqa: E402  (how the machine's CPUs idle)

ROOT = common.ROOT


class Pool:
    """A coordinator and workers started by hand, so that more can join."""

    def __init__(self, binary, mem, disk, coordinator_args=()):
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="tierpool-migration-", dir=os.environ.get("TIERPOOL_BENCH_DIR"))
        self.addr = f"127.0.0.1:{common.free_port()}"
        self.mem, self.disk = mem, disk
        self.procs = []
        self.start("coordinator", "--dir", f"{self.dir}/c", "--listen", self.addr, *coordinator_args)
        self.env = dict(os.environ, TIERPOOL_COORDINATOR=self.addr, TIERPOOL_SECRET_FILE=f"{self.dir}/c/secret")
        deadline = time.time() + 20
        while not os.path.exists(f"{self.dir}/c/secret") or self.cli("status", check=False).returncode != 0:
            if time.time() > deadline:
                raise SystemExit("the coordinator did not start")
            time.sleep(0.1)
        self.join()

    def start(self, *args):
        log = open(f"{self.dir}/{len(self.procs)}.log", "w")
        self.procs.append(subprocess.Popen([self.bin, *args, "--stop-with", str(os.getpid())], stdout=log, stderr=log))

    def join(self):
        n = sum(1 for _ in self.status()["workers"]) if len(self.procs) > 1 else 0
        self.start("worker", "--coordinator", self.addr, "--secret-file", f"{self.dir}/c/secret",
                   "--dir", f"{self.dir}/w{n}", "--mem", self.mem, "--disk", self.disk)
        deadline = time.time() + 30
        while sum(w["alive"] for w in self.status()["workers"]) < n + 1:
            if time.time() > deadline:
                raise SystemExit("a worker did not join")
            time.sleep(0.1)

    def cli(self, *args, check=True):
        return subprocess.run([self.bin, *args], env=self.env, capture_output=True, text=True, check=check)

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def settle(self, limit=3600):
        deadline = time.time() + limit
        while True:
            m = self.status()["migration"]
            if not m["active"] and m["partitions_moving"] == 0:
                return m
            if time.time() > deadline:
                raise SystemExit(f"still moving after {limit} s: {m}")
            time.sleep(0.1)

    def bench(self, files, size):
        out = self.cli("bench", "--files", str(files), "--size", size, "--threads", "2", "--json").stdout
        r = json.loads(out)
        return {"write_mb_per_sec": r["write"]["mb_per_sec"], "read_mb_per_sec": r["read"]["mb_per_sec"]}

    def close(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def disk_write_mb_per_sec(where, size=1 << 30):
    path = os.path.join(where, "disk-probe")
    block = os.urandom(4 << 20)
    t = time.time()
    with open(path, "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    secs = time.time() - t
    os.unlink(path)
    return size / secs / 1e6


def fill(pool, total, tmp):
    """Puts `total` bytes in files of 64 MiB (random bytes: nothing compresses)."""
    src = os.path.join(tmp, "src")
    with open(src, "wb") as f:
        f.write(os.urandom(64 << 20))
    pool.cli("mkdir", "/data")
    for i in range(total // (64 << 20)):
        pool.cli("put", src, f"/data/f{i}")
    os.unlink(src)


def join_and_time(pool):
    t = time.time()
    pool.join()
    m = pool.settle()
    secs = time.time() - t
    return {"seconds": secs, "bytes_moved": m["bytes_moved"], "partitions_moved": m["partitions_done"],
            "mb_per_sec": m["bytes_moved"] / secs / 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes for a fast check")
    ap.add_argument("--bin", help="the tierpool binary to measure (default: build this checkout's)")
    a = ap.parse_args()
    common.ensure_tools()
    binary = os.path.abspath(a.bin) if a.bin else common.BIN
    if not a.bin:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "tierpool"], cwd=ROOT, check=True)
    data = (512 << 20) if a.quick else (2 << 30)
    mem, disk = f"{data // 4 >> 20}MiB", f"{data * 2 >> 20}MiB"
    bench_files, bench_size = (4, "32MiB") if a.quick else (8, "64MiB")
    tmp = tempfile.mkdtemp(prefix="tierpool-migration-src-")
    result = {"machine": machine.describe(), "binary": binary, "data_bytes": data, "worker_mem": mem}
    try:
        result["loopback_tcp_mb_per_sec"] = common.iperf3()
        result["disk_write_mb_per_sec"] = disk_write_mb_per_sec(tmp)
        runs = {}
        for name, args in [("unlimited", ()), ("move_rate_100MiB", ("--move-rate", "100MiB")),
                           ("move_rate_25MiB", ("--move-rate", "25MiB"))]:
            if a.quick and name == "move_rate_25MiB":
                continue
            pool = Pool(binary, mem, disk, args)
            try:
                fill(pool, data, tmp)
                runs[name] = join_and_time(pool)
            finally:
                pool.close()
        for r in runs.values():
            r["vs_tcp"] = r["mb_per_sec"] / result["loopback_tcp_mb_per_sec"]
            r["vs_disk_write"] = r["mb_per_sec"] / result["disk_write_mb_per_sec"]
        result["join"] = runs
        # Foreground traffic during a migration, against the same at rest.
        fg = {}
        for name, args in [("unlimited", ()), ("move_rate_100MiB", ("--move-rate", "100MiB"))]:
            pool = Pool(binary, mem, disk, args)
            try:
                fill(pool, data, tmp)
                at_rest = pool.bench(bench_files, bench_size)
                box = {}
                joiner = threading.Thread(target=lambda: box.update(join=join_and_time(pool)))
                joiner.start()
                time.sleep(0.5)
                during = pool.bench(bench_files, bench_size)
                still = pool.status()["migration"]["active"]
                joiner.join()
                fg[name] = {
                    "at_rest": at_rest, "during_migration": during,
                    "migration_still_active_after_bench": still, "migration": box["join"],
                    "write_fraction": during["write_mb_per_sec"] / at_rest["write_mb_per_sec"],
                    "read_fraction": during["read_mb_per_sec"] / at_rest["read_mb_per_sec"],
                }
            finally:
                pool.close()
        result["foreground"] = fg
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    common.write_result("migration-", result)


if __name__ == "__main__":
    main()
