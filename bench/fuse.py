#!/usr/bin/env python3
"""The FUSE mount beside the CLI and tmpfs, in one run.

Starts a local pool (2 workers) and mounts it, then measures:
  - sequential write and read of a file (2 GiB by default) in 1 MiB blocks:
    through the mount, with `tierpool put`/`get`, and on tmpfs (/dev/shm);
  - creating, stat-ing and deleting 10,000 small files: through the mount and on tmpfs.
Reads through the mount are of a file written by the CLI, after dropping the
kernel's page cache of it (a fresh mount), so they come from the pool.
Writes JSON to stdout and bench/results/fuse-<timestamp>.json.

Usage: python3 bench/fuse.py [--size 2GiB] [--files 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import tierpool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "target", "release", "tierpool")
BLOCK = 1 << 20


def write_file(path: str, size: int) -> float:
    block = os.urandom(BLOCK)
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(size // BLOCK):
            f.write(block)
    return size / (time.perf_counter() - t) / 1e6


def read_file(path: str, size: int) -> float:
    buf = bytearray(BLOCK)
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while (k := f.readinto(buf)) > 0:
            n += k
    assert n == size, (n, size)
    return size / (time.perf_counter() - t) / 1e6


def small_files(dir: str, n: int) -> dict:
    out = {}
    t = time.perf_counter()
    for i in range(n):
        with open(os.path.join(dir, f"f{i}"), "wb") as f:
            f.write(b"x" * 100)
    out["create_per_s"] = round(n / (time.perf_counter() - t))
    t = time.perf_counter()
    for i in range(n):
        os.stat(os.path.join(dir, f"f{i}"))
    out["stat_per_s"] = round(n / (time.perf_counter() - t))
    t = time.perf_counter()
    for i in range(n):
        os.unlink(os.path.join(dir, f"f{i}"))
    out["delete_per_s"] = round(n / (time.perf_counter() - t))
    return out


def mount(cli: str, addr: str, mnt: str) -> None:
    subprocess.run([cli, "mount", mnt, "--coordinator", addr], check=True, capture_output=True)


def umount(cli: str, mnt: str) -> None:
    subprocess.run([cli, "umount", mnt], check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--files", type=int, default=10000)
    a = ap.parse_args()
    size = tierpool.parse_size(a.size) // BLOCK * BLOCK
    if not os.path.exists(CLI):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tierpool"], cwd=ROOT, check=True)
    res: dict = {"benchmark": "fuse", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "file_bytes": size, "files": a.files}
    work = tempfile.mkdtemp(prefix="tierpool-fuse-bench-")
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    shm = tempfile.mkdtemp(prefix="tierpool-bench-", dir="/dev/shm")
    local = os.path.join(shm, "src")
    mem = max(256 << 20, size)  # the file fits in the workers' memory
    try:
        with tierpool.local(workers=2, mem=mem, disk=2 * mem) as c:
            addr = c.address
            # tmpfs
            res["tmpfs_write_mb_s"] = round(write_file(local, size))
            res["tmpfs_read_mb_s"] = round(read_file(local, size))
            # CLI
            t = time.perf_counter()
            subprocess.run([CLI, "put", local, "/cli.bin", "--coordinator", addr], check=True)
            res["cli_put_mb_s"] = round(size / (time.perf_counter() - t) / 1e6)
            t = time.perf_counter()
            subprocess.run([CLI, "get", "/cli.bin", "-", "--coordinator", addr], check=True, stdout=subprocess.DEVNULL)
            res["cli_get_mb_s"] = round(size / (time.perf_counter() - t) / 1e6)
            # mount: write a new file, then read the CLI's file on a fresh mount
            mount(CLI, addr, mnt)
            res["mount_write_mb_s"] = round(write_file(os.path.join(mnt, "fuse.bin"), size))
            umount(CLI, mnt)
            mount(CLI, addr, mnt)
            res["mount_read_mb_s"] = round(read_file(os.path.join(mnt, "cli.bin"), size))
            res["mount_write_vs_cli_put"] = round(res["mount_write_mb_s"] / res["cli_put_mb_s"], 2)
            res["mount_read_vs_cli_get"] = round(res["mount_read_mb_s"] / res["cli_get_mb_s"], 2)
            os.makedirs(os.path.join(mnt, "small"))
            res["mount_small_files"] = small_files(os.path.join(mnt, "small"), a.files)
            umount(CLI, mnt)
            os.makedirs(os.path.join(shm, "small"))
            res["tmpfs_small_files"] = small_files(os.path.join(shm, "small"), a.files)
    finally:
        subprocess.run([CLI, "umount", mnt], capture_output=True)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(res, indent=2)
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"fuse-{time.strftime('%Y%m%d-%H%M%S')}.json"), "w") as f:
        f.write(text + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
