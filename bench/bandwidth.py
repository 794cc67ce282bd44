#!/usr/bin/env python3
"""Shares by bandwidth against shares by capacity, on a real multi-host pool
(scripts/netns-pool.sh: one network namespace per process, links shaped
with tc). Needs root.

One run, on this machine:
  - 4 workers of equal capacity; links of workers 1 and 2 at FAST, of
    workers 3 and 4 at a quarter of it. Traffic until the shares settle,
    then `tierpool bench` from the root namespace writes files and reads
    them back in parallel: aggregate read (and write) MB/s with the
    coordinator weighing shares by measured bandwidth (the default) and by
    capacity only (--bandwidth-threshold 0);
  - all 4 links at FAST, traffic running; worker 3's link drops to a
    quarter: seconds until the coordinator logs its speed, and until the
    partitions it gives away have moved.
Writes JSON to stdout and to bench/results/bandwidth-<timestamp>.json.

Usage: sudo python3 bench/bandwidth.py [--fast 400mbit] [--window 10s] [--bin PATH]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402  (results)
import machine  # noqa: E402  (how the machine's CPUs idle)

ROOT = common.ROOT
SCRIPT = os.path.join(ROOT, "scripts", "netns-pool.sh")


def mbit(rate):
    assert rate.endswith("mbit"), "give rates in mbit, e.g. 400mbit"
    return int(rate[:-4])


class Pool:
    def __init__(self, binary, name, rates, coordinator_args):
        self.bin, self.name = binary, name
        self.dir = tempfile.mkdtemp(prefix=f"tierpool-bw-{name}-")
        args = ["up", "--workers", "4", "--mem", "512MiB", "--disk", "1GiB", "--dir", self.dir,
                "--subnet", f"10.{190 + len(name) % 9}.{os.getpid() % 250}.0/24", "--partitions", "1024",
                "--stop-with", str(os.getpid())]
        for i, r in rates.items():
            args += ["--rate", f"{i}={r}"]
        for a in coordinator_args:
            args += ["--coordinator-arg", a]
        out = self.script(*args)
        self.env = dict(os.environ)
        for line in out.splitlines():
            if line.startswith("export "):
                k, v = line[len("export "):].split("=", 1)
                self.env[k] = v

    def script(self, *args):
        r = subprocess.run([SCRIPT, "--name", self.name, *args], capture_output=True, text=True,
                           env=dict(os.environ, TIERPOOL_BIN=self.bin))
        if r.returncode != 0:
            raise SystemExit(f"netns-pool.sh {args[0]}: {r.stdout}{r.stderr}")
        return r.stdout

    def cli(self, *args):
        return subprocess.run([self.bin, *args], env=self.env, capture_output=True, text=True, check=True).stdout

    def status(self):
        return json.loads(self.cli("status", "--json"))

    def speeds(self):
        return {w["host"]: w["speed"] for w in self.status()["workers"]}

    def shares(self):
        return {w["host"]: w["partitions"] for w in self.status()["workers"]}

    def bench(self, files, size, threads):
        out = self.cli("bench", "--files", str(files), "--size", size, "--threads", str(threads),
                       "--chunk-size", "1MiB", "--json")
        r = json.loads(out)
        return {"write_mb_per_sec": r["write"]["mb_per_sec"], "read_mb_per_sec": r["read"]["mb_per_sec"]}

    def traffic_until(self, done, limit):
        t = time.time()
        while not done():
            if time.time() - t > limit:
                raise SystemExit(f"not within {limit} s: {self.status()}")
            self.bench(4, "16MiB", 4)
        return time.time() - t

    def settle(self, limit=300):
        t = time.time()
        while True:
            m = self.status()["migration"]
            if not m["active"] and m["partitions_moving"] == 0:
                return time.time() - t
            if time.time() - t > limit:
                raise SystemExit(f"still moving after {limit} s: {m}")
            time.sleep(0.2)

    def down(self):
        self.script("down", "--purge")


def placement(binary, fast, slow, window, aware):
    rates = {1: fast, 2: fast, 3: slow, 4: slow}
    args = ["--bandwidth-window", window] + ([] if aware else ["--bandwidth-threshold", "0"])
    pool = Pool(binary, "bwa" if aware else "bwc", rates, args)
    try:
        if aware:
            pool.traffic_until(lambda: all(pool.speeds()[h] < 100 for h in ("host3", "host4")), 300)
            pool.settle()
        else:
            pool.bench(4, "16MiB", 4)
        result = pool.bench(16, "32MiB", 8)
        result["speeds"], result["shares"] = pool.speeds(), pool.shares()
        return result
    finally:
        pool.down()


def degrade(binary, fast, slow, window):
    pool = Pool(binary, "bwd", {i: fast for i in range(1, 5)}, ["--bandwidth-window", window])
    try:
        pool.traffic_until(lambda: all(pool.status()["workers"][i]["bandwidth"] for i in range(4)), 120)
        stop = threading.Event()

        def load():
            while not stop.is_set():
                pool.bench(4, "16MiB", 4)

        bg = threading.Thread(target=load)
        bg.start()
        try:
            t0 = time.time()
            pool.script("shape", "3", slow)
            while pool.speeds()["host3"] == 100:
                if time.time() - t0 > 300:
                    raise SystemExit("worker 3's speed never changed")
                time.sleep(0.2)
            detected = time.time() - t0
            pool.settle()
            settled = time.time() - t0
        finally:
            stop.set()
            bg.join()
        return {"speed": pool.speeds()["host3"], "shares": pool.shares(),
                "seconds_to_speed_logged": detected, "seconds_to_partitions_moved": settled}
    finally:
        pool.down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fast", default="400mbit", help="rate of a fast link (mbit)")
    ap.add_argument("--window", default="10s", help="--bandwidth-window of the coordinator")
    ap.add_argument("--bin", help="the tierpool binary (default: build this checkout's release)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("network namespaces need root")
    binary = os.path.abspath(a.bin) if a.bin else os.path.join(ROOT, "target", "release", "tierpool")
    if not a.bin:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "tierpool"], cwd=ROOT, check=True)
    slow = f"{mbit(a.fast) // 4}mbit"
    result = {"machine": machine.describe(), "binary": binary, "fast_link": a.fast, "slow_link": slow,
              "window": a.window}
    result["bandwidth_aware"] = placement(binary, a.fast, slow, a.window, True)
    result["capacity_only"] = placement(binary, a.fast, slow, a.window, False)
    for k in ("read_mb_per_sec", "write_mb_per_sec"):
        result[k.replace("_mb_per_sec", "_aware_vs_capacity")] = result["bandwidth_aware"][k] / result["capacity_only"][k]
    result["degrade"] = degrade(binary, a.fast, slow, a.window)
    common.write_result("bandwidth-", result)


if __name__ == "__main__":
    main()
