#!/usr/bin/env python3
"""A full restart of the embedded pool: `tierpool down` then `tierpool up`
on the same --dir, with GiB of data held in the workers' memory.

One run, on this machine, two workers, one copy of each chunk:
  - fill: SIZE of files written with `tierpool put` (all in MEM);
  - down: seconds for `tierpool down` (workers write MEM to DISK first),
    and that rate against writing the same bytes to a file with `dd` on
    the same file system, without fsync (as the spill) and with it;
  - up: seconds for `tierpool up` to return a ready pool;
  - first byte: seconds from `up` returning to the first 4 KiB of a file
    read back, and a full read of every file (MB/s), checked byte-exact
    by checksum.
Writes JSON to stdout and to bench/results/restart-<timestamp>.json.

Usage: python3 bench/restart.py [--size 2GiB] [--files 8]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402

import tierpool  # noqa: E402

BIN = common.BIN


def tp(addr, *args, out=None):
    env = dict(os.environ, TIERPOOL_COORDINATOR=addr)
    return subprocess.run([BIN, *args], env=env, check=True, stdout=out or subprocess.PIPE).stdout


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--files", type=int, default=8)
    a = ap.parse_args()
    size = tierpool.parse_size(a.size)
    each = size // a.files
    result = {"bytes": each * a.files, "files": a.files}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        pool = os.path.join(tmp, "pool")
        port = str(common.free_port())
        addr = f"127.0.0.1:{port}"
        mem = f"{size // 2 + (256 << 20)}"
        up = [BIN, "up", "--dir", pool, "--port", port, "--workers", "2", "--replicas", "1",
              "--mem", mem, "--disk", f"{size * 2}"]
        subprocess.run(up, check=True, stdout=subprocess.DEVNULL)
        sums = []
        src = os.path.join(tmp, "src.bin")
        for i in range(a.files):
            with open(src, "wb") as f:
                block = os.urandom(1 << 20)
                h = hashlib.sha256()
                for _ in range(each >> 20):
                    f.write(block)
                    h.update(block)
                    block = block[1:] + block[:1]
            sums.append(h.hexdigest())
            tp(addr, "put", src, f"/f{i}")
        os.remove(src)
        st = json.loads(tp(addr, "status", "--json"))
        held = sum(w["mem"]["used"] for w in st["workers"])
        result["held_in_memory_bytes"] = held
        down = timed(lambda: subprocess.run([BIN, "down", "--dir", pool], check=True, stdout=subprocess.DEVNULL))
        ddfile = os.path.join(tmp, "dd.bin")

        def dd(*extra):
            secs = timed(lambda: subprocess.run(
                ["dd", "if=/dev/zero", f"of={ddfile}", "bs=4M", f"count={held >> 22}", *extra],
                check=True, stderr=subprocess.DEVNULL))
            os.remove(ddfile)
            return secs
        # The spill does not fsync (a process kill is what it must outlive): the
        # peer is dd into the page cache; dd with fsync shows the disk itself.
        plain, synced = dd(), dd("conv=fsync")
        result["down_s"] = round(down, 2)
        result["down_mb_per_sec"] = round(held / down / 1e6)
        result["dd_mb_per_sec"] = round(held / plain / 1e6)
        result["dd_fsync_mb_per_sec"] = round(held / synced / 1e6)
        result["down_vs_dd"] = round(plain / down, 2)
        t_up = timed(lambda: subprocess.run(up, check=True, stdout=subprocess.DEVNULL))
        result["up_s"] = round(t_up, 2)

        def first():
            env = dict(os.environ, TIERPOOL_COORDINATOR=addr)
            p = subprocess.Popen([BIN, "cat", "/f0"], env=env, stdout=subprocess.PIPE)
            p.stdout.read(4096)
            p.kill()
            p.wait()
        result["first_4k_s"] = round(timed(first), 3)

        def read_all():
            for i in range(a.files):
                env = dict(os.environ, TIERPOOL_COORDINATOR=addr)
                p = subprocess.Popen([BIN, "cat", f"/f{i}"], env=env, stdout=subprocess.PIPE)
                h = hashlib.sha256()
                while True:
                    b = p.stdout.read(8 << 20)
                    if not b:
                        break
                    h.update(b)
                assert p.wait() == 0
                assert h.hexdigest() == sums[i], f"/f{i} came back different"
        secs = timed(read_all)
        result["read_after_up_mb_per_sec"] = round(result["bytes"] / secs / 1e6)
        result["byte_exact"] = True
        subprocess.run([BIN, "down", "--dir", pool], check=True, stdout=subprocess.DEVNULL)
    common.write_result("restart-", result)


if __name__ == "__main__":
    main()
