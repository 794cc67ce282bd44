#!/usr/bin/env python3
"""The FUSE mount beside the CLI and tmpfs, in one run.

Starts a local pool (2 workers) and mounts it, then measures:
  - sequential write and read of a file (2 GiB by default) in 1 MiB blocks:
    through the mount, with `tierpool put`/`get`, and on tmpfs (/dev/shm);
  - extracting this Python's standard library from a tarball (`tar x`, then
    `sync`) and archiving it back (`tar c`, read whole), twice (the second
    time, files whose pages the kernel may still hold): through the mount, on
    the local disk, on tmpfs and on a FUSE file system that stores nothing;
  - how many inodes and names the mount told its kernel to drop during the
    tree's extraction, archiving and removal (`*_told`): no other client
    changes anything, so each is a change of its own taken for another's;
  - creating, stat-ing (twice: the second time, names the kernel may hold),
    replacing (a new file renamed over each) and deleting 10,000 small files:
    through the mount, on tmpfs, and on the FUSE file system that stores
    nothing; through the mount, also what it told its kernel to drop while
    replacing and deleting;
  - the same tree and small files in a directory of the mount attached to an
    under-store in `back` mode (a local directory), whose names the pool
    mirrors below: each namespace change there also names its directory's
    path and changes the store.
Each tree is removed after (`rm -rf`, timed too).
That file system (the `null_fs` example of tierpool-fuse, mounted as the
pool's mount is, its reads zeros) gives FUSE's own ceiling here.
Reads through the mount are of a file written by the CLI, after dropping the
kernel's page cache of it (a fresh mount), so they come from the pool. The
workers' memory holds everything one run writes, and each run deletes its
files, so every write lands in memory (like for like). Each figure is the
median of --runs runs; every run's figures are kept too.
Writes JSON to stdout and bench/results/fuse-<timestamp>.json.

Usage: python3 bench/fuse.py [--size 2GiB] [--files 10000] [--runs 3] [--log-sync always|DURATION]
($TIERPOOL_BIN: the binary of the pool and the mount; else this checkout's release build.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from typing import Optional

import tierpool

import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# $TIERPOOL_BIN (as for the pool `tierpool.local` starts), else this checkout's build.
CLI = os.environ.get("TIERPOOL_BIN") or os.path.join(ROOT, "target", "release", "tierpool")
NULL_FS = os.path.join(ROOT, "target", "release", "examples", "null_fs")
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


def small_files(dir: str, n: int, log: str = "") -> dict:
    """Creates (100 bytes written), stats, stats again, replaces (a new
    file written and renamed over each, as editors and installers save)
    and deletes `n` files in `dir`, per second. With `log` (a mount's),
    also what the mount told its kernel to drop while replacing and
    deleting (`told`)."""
    out = {}
    t = time.perf_counter()
    for i in range(n):
        with open(os.path.join(dir, f"f{i}"), "wb") as f:
            f.write(b"x" * 100)
    out["create_per_s"] = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(n):
        os.stat(os.path.join(dir, f"f{i}"))
    out["stat_per_s"] = n / (time.perf_counter() - t)
    # Again: names and attributes the kernel may still hold.
    t = time.perf_counter()
    for i in range(n):
        os.stat(os.path.join(dir, f"f{i}"))
    out["restat_per_s"] = n / (time.perf_counter() - t)
    phase = Told(log)
    t = time.perf_counter()
    for i in range(n):
        path = os.path.join(dir, f"f{i}")
        with open(path + ".new", "wb") as f:
            f.write(b"y" * 100)
        os.replace(path + ".new", path)
    out["replace_per_s"] = n / (time.perf_counter() - t)
    phase.count(out, "replace_told")
    t = time.perf_counter()
    for i in range(n):
        os.unlink(os.path.join(dir, f"f{i}"))
    out["delete_per_s"] = n / (time.perf_counter() - t)
    phase.count(out, "delete_told")
    return out


def mount(cli: str, addr: str, mnt: str) -> str:
    """Mounts the pool at `mnt`: the path of the mount's log, which counts
    what the mount tells its kernel to drop (`told`)."""
    env = dict(os.environ, TIERPOOL_LOG="info,tierpool_fuse::watch=debug")
    p = subprocess.run([cli, "mount", mnt, "--coordinator", addr], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"tierpool mount failed: {p.stderr.strip()}")
    logged = re.search(r"log (.*)\)$", p.stdout.strip())
    return logged.group(1) if logged else ""


def told(log: str) -> int:
    """How many inodes and names the mount logging to `log` has told its
    kernel to drop as changed by other clients: with no other client, every
    one is a change of its own it did not know as such."""
    try:
        with open(log) as f:
            return sum(int(n) for n in re.findall(r"telling the kernel to drop (\d+)", f.read()))
    except OSError:
        return 0


class Told:
    """What a mount logging to `log` told its kernel phase by phase (none
    without `log`), each counted after a pause: the feed's news come tens of
    ms after a change."""

    def __init__(self, log: str) -> None:
        self.log = log
        if log:
            time.sleep(0.3)  # what came before is told meanwhile
        self.counted = told(log)

    def count(self, out: dict, key: str) -> None:
        """`out[key]`: what was told since the last count."""
        if self.log:
            time.sleep(0.3)
            now = told(self.log)
            out[key] = now - self.counted
            self.counted = now


def digits(key: str) -> Optional[int]:
    """Decimals a figure keeps: seconds three, rates none."""
    return 3 if key.endswith(TREE_KEYS) else None


TREE_KEYS = ("tar_x_s", "tar_c_s", "tar_c_again_s", "rm_s")


def stdlib_tarball(dir: str) -> str:
    """A tarball of this Python's standard library (without site-packages
    and bytecode caches: a real source tree of a few thousand files) in `dir`."""
    path = os.path.join(dir, "stdlib.tar")
    skip = ("site-packages", "__pycache__")
    with tarfile.open(path, "w") as t:
        t.add(sysconfig.get_paths()["stdlib"], arcname="lib",
              filter=lambda ti: None if any(p in ti.name.split("/") for p in skip) else ti)
    return path


def tree(dir: str, tarball: str, log: str = "") -> dict:
    """Seconds to extract `tarball` into `dir` (with a `sync` after, so a
    disk's writes count), then to archive the tree back, every byte read,
    twice, and to remove it. With `log` (a mount's), also how many inodes
    and names the mount told its kernel to drop in each phase (`told`),
    counted after a pause (the feed's news come tens of ms after a change)."""
    out: dict = {}
    phase = Told(log)
    t = time.perf_counter()
    subprocess.run(["tar", "xf", tarball, "-C", dir], check=True)
    subprocess.run(["sync"], check=True)
    out["tar_x_s"] = time.perf_counter() - t
    phase.count(out, "tar_x_told")
    for key in ("tar_c_s", "tar_c_again_s"):
        t = time.perf_counter()
        # Through a pipe: GNU tar writing to /dev/null itself would not read the files.
        subprocess.run(f"tar cf - -C {dir} lib | cat > /dev/null", shell=True, check=True)
        out[key] = time.perf_counter() - t
    phase.count(out, "tar_c_told")
    t = time.perf_counter()
    subprocess.run(["rm", "-rf", os.path.join(dir, "lib")], check=True)
    out["rm_s"] = time.perf_counter() - t
    phase.count(out, "rm_told")
    return out


def null_fs_run(mnt: str, n: int, tarball: str) -> dict:
    """`small_files` and `tree` on a FUSE file system that stores nothing,
    mounted at `mnt` (what FUSE itself allows here)."""
    server = subprocess.Popen([NULL_FS, mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.ismount(mnt) or server.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.ismount(mnt):
            raise SystemExit(f"null_fs did not mount at {mnt} (exit status {server.poll()})")
        os.makedirs(os.path.join(mnt, "small"))
        out = {f"small_{k}": v for k, v in small_files(os.path.join(mnt, "small"), n).items()}
        os.rmdir(os.path.join(mnt, "small"))
        out.update(tree(mnt, tarball))
        return out
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def umount(cli: str, mnt: str) -> None:
    subprocess.run([cli, "umount", mnt], check=True, capture_output=True)


def warm_memory(limit: int) -> int:
    """Writes and frees up to `limit` bytes of memory (in /dev/shm), keeping
    2 GiB free. On a virtual machine whose host backs guest memory only when
    first touched, the first use of a page costs far more than later uses;
    the page cache of a mount meets that cost, the CLI much less. Touching
    the memory first (before every run, as the host takes freed memory back)
    measures the paths, not the host. Returns the bytes touched."""
    with open("/proc/meminfo") as f:
        info = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f}
    n = max(0, min(limit, info.get("MemAvailable", 0) - (2 << 30))) // BLOCK * BLOCK
    path = os.path.join("/dev/shm", f"tierpool-warm-{os.getpid()}")
    try:
        with open(path, "wb") as f:
            zeros = bytes(BLOCK)
            for _ in range(n // BLOCK):
                f.write(zeros)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return n


def wait_collected(cli: str, addr: str) -> None:
    """Waits until the pool has deleted the chunks of removed files."""
    for _ in range(300):
        st = json.loads(subprocess.run([cli, "status", "--json", "--coordinator", addr], check=True,
                                       capture_output=True).stdout)
        if st["pending_gc"] == 0 and st.get("pending_chunks", 0) == 0:
            return
        time.sleep(0.2)
    raise SystemExit("the pool did not collect removed files within 60 s")


def attached_run(c: tierpool.Client, mnt: str, log: str, files: int, tarball: str, below: str) -> dict:
    """`tree` and `small_files` in a directory of the mount at `mnt`
    attached to the empty local directory `below` in `back` mode."""
    os.makedirs(below)
    c.attach(f"file://{below}", "/below", mode="back")
    out = tree(os.path.join(mnt, "below"), tarball, log)
    os.makedirs(os.path.join(mnt, "below", "small"))
    for k, v in small_files(os.path.join(mnt, "below", "small"), files, log).items():
        out[f"small_{k}"] = v
    os.rmdir(os.path.join(mnt, "below", "small"))
    c.detach("/below", force=True)
    c.rm("/below", recursive=True)
    shutil.rmtree(below)
    return out


def one_run(c: tierpool.Client, mnt: str, local: str, shm: str, size: int, files: int, tarball: str,
            disk: str) -> dict:
    addr = c.address
    r: dict = {}
    r["tmpfs_write_mb_s"] = write_file(local, size)
    r["tmpfs_read_mb_s"] = read_file(local, size)
    t = time.perf_counter()
    subprocess.run([CLI, "put", local, "/cli.bin", "--coordinator", addr], check=True)
    r["cli_put_mb_s"] = size / (time.perf_counter() - t) / 1e6
    t = time.perf_counter()
    subprocess.run([CLI, "get", "/cli.bin", "-", "--coordinator", addr], check=True, stdout=subprocess.DEVNULL)
    r["cli_get_mb_s"] = size / (time.perf_counter() - t) / 1e6
    # mount: write a new file, then read the CLI's file on a fresh mount
    mount(CLI, addr, mnt)
    r["mount_write_mb_s"] = write_file(os.path.join(mnt, "fuse.bin"), size)
    umount(CLI, mnt)
    log = mount(CLI, addr, mnt)
    r["mount_read_mb_s"] = read_file(os.path.join(mnt, "cli.bin"), size)
    os.makedirs(os.path.join(mnt, "small"))
    for k, v in small_files(os.path.join(mnt, "small"), files, log).items():
        r[f"mount_small_{k}"] = v
    os.rmdir(os.path.join(mnt, "small"))
    for where, dir in (("mount", mnt), ("disk", disk), ("tmpfs", shm)):
        for k, v in tree(dir, tarball, log if where == "mount" else "").items():
            r[f"{where}_{k}"] = v
    for k, v in attached_run(c, mnt, log, files, tarball, os.path.join(os.path.dirname(disk), "below")).items():
        r[f"attached_{k}"] = v
    umount(CLI, mnt)
    os.makedirs(os.path.join(shm, "small"))
    for k, v in small_files(os.path.join(shm, "small"), files).items():
        r[f"tmpfs_small_{k}"] = v
    os.rmdir(os.path.join(shm, "small"))
    for k, v in null_fs_run(mnt, files, tarball).items():
        r[f"null_fuse_{k}"] = v
    os.unlink(local)
    for f in ("/cli.bin", "/fuse.bin"):
        subprocess.run([CLI, "rm", f, "--coordinator", addr], check=True)
    wait_collected(CLI, addr)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log-sync", default="always", help="when the metadata log is fsynced (`up --log-sync`)")
    a = ap.parse_args()
    size = tierpool.parse_size(a.size) // BLOCK * BLOCK
    if not os.path.exists(CLI):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tierpool"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tierpool-fuse", "--example", "null_fs"], cwd=ROOT,
                   check=True)
    res: dict = {"benchmark": "fuse", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine.describe(),
                 "file_bytes": size, "files": a.files, "runs": a.runs, "log_sync": a.log_sync}
    work = tempfile.mkdtemp(prefix="tierpool-fuse-bench-")
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    shm = tempfile.mkdtemp(prefix="tierpool-bench-", dir="/dev/shm")
    local = os.path.join(shm, "src")
    # Two workers whose memory holds the run's two files twice over: every
    # write and read is served by memory, as the CLI's are.
    mem = max(256 << 20, 2 * size)
    disk = os.path.join(work, "disk")
    os.makedirs(disk)
    tarball = stdlib_tarball(work)
    res["tarball_bytes"] = os.path.getsize(tarball)
    with tarfile.open(tarball) as t:
        res["tarball_files"] = sum(1 for m in t.getmembers() if m.isfile())
    runs = []
    try:
        with tierpool.local(workers=2, mem=mem, disk=2 * mem, log_sync=a.log_sync) as c:
            for _ in range(a.runs):
                # Before every run: the previous run's freed memory may be back with the host.
                res["memory_warmed_bytes"] = warm_memory(8 * size + (2 << 30))
                runs.append(one_run(c, mnt, local, shm, size, a.files, tarball, disk))
    finally:
        subprocess.run([CLI, "umount", mnt], capture_output=True)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    for k in runs[0]:
        res[k] = round(statistics.median(r[k] for r in runs), digits(k))
    res["mount_write_vs_cli_put"] = round(res["mount_write_mb_s"] / res["cli_put_mb_s"], 2)
    res["mount_read_vs_cli_get"] = round(res["mount_read_mb_s"] / res["cli_get_mb_s"], 2)
    res["mount_write_vs_tmpfs"] = round(res["mount_write_mb_s"] / res["tmpfs_write_mb_s"], 2)
    res["mount_read_vs_tmpfs"] = round(res["mount_read_mb_s"] / res["tmpfs_read_mb_s"], 2)
    for k in ("create_per_s", "stat_per_s", "restat_per_s", "replace_per_s", "delete_per_s"):
        res[f"mount_small_{k}_vs_null_fuse"] = round(res[f"mount_small_{k}"] / res[f"null_fuse_small_{k}"], 3)
    for k in ("create_per_s", "stat_per_s", "replace_per_s", "delete_per_s"):
        res[f"attached_small_{k}_vs_mount"] = round(res[f"attached_small_{k}"] / res[f"mount_small_{k}"], 3)
    for k in TREE_KEYS:
        res[f"attached_{k}_vs_mount"] = round(res[f"attached_{k}"] / res[f"mount_{k}"], 2)
        res[f"mount_{k}_vs_disk"] = round(res[f"mount_{k}"] / res[f"disk_{k}"], 2)
        res[f"mount_{k}_vs_null_fuse"] = round(res[f"mount_{k}"] / res[f"null_fuse_{k}"], 2)
        res[f"null_fuse_{k}_vs_disk"] = round(res[f"null_fuse_{k}"] / res[f"disk_{k}"], 2)
    res["each_run"] = [{k: round(v, digits(k)) for k, v in r.items()} for r in runs]
    text = json.dumps(res, indent=2)
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"fuse-{time.strftime('%Y%m%d-%H%M%S')}.json"), "w") as f:
        f.write(text + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
