#!/usr/bin/env python3
"""One Dask job whose results exceed its workers' memory, spilling to the
local disk (Dask's default) and to an embedded pool, run alternately.

The job: `--blocks` numpy blocks of `--block` bytes each are made and kept
(`persist`), so most of them must leave the workers' memory; then every
block is read back once (a checksum of each, summed), so every spilled
block comes back. Both phases are timed; the answer of both ways must
agree. Each way runs `--runs` times, interleaved, on a fresh cluster.

Writes JSON to stdout: seconds per phase and run for each way, their
medians and the ratio pool/disk of the medians (below 1: the pool is
faster). Each run also gives what the workers' spill buffers counted in
each phase (`spill_buffer`): the seconds and number of reads and writes
of the store below them (`disk-read`, `disk-write`: Dask's names, for
the pool too), so the time spent in the store can be told from the rest.

Usage: python3 bench/dask_spill.py [--blocks N] [--block BYTES] [--workers N]
       [--memory-limit SIZE] [--runs N] [--replicas N] [--prefault]
(needs the tierpool package installed: ./scripts/test-python.sh does it).
"""

import argparse
import json
import statistics
import tempfile
import time

import dask
import numpy as np
from dask.utils import parse_bytes
from distributed import Client, LocalCluster, wait

import tierpool
from tierpool.dask import spill_to_tierpool


def make_block(i, size):
    return np.random.default_rng(i).integers(0, 2**63, size // 8, dtype=np.int64)


def checksum(block):
    return int(block[::4096].sum() % 1_000_000_007)


def spill_metrics(client):
    """What the workers' spill buffers counted so far, summed over workers:
    seconds, counts and bytes of `disk-read` and `disk-write` (the store
    below them, disk or pool), `serialize`, `deserialize`, and more."""

    def of_worker(dask_worker):
        return {f"{label}_{unit}": v for (label, unit), v in dask_worker.data.cumulative_metrics.items()}

    total = {}
    for m in client.run(of_worker).values():
        for k, v in m.items():
            total[k] = total.get(k, 0) + v
    return total


def phase(before, after):
    """`after` less `before`, of the metrics worth reporting, rounded."""
    keep = ("disk-read_seconds", "disk-read_count", "disk-write_seconds", "disk-write_count")
    return {k: round(after.get(k, 0) - before.get(k, 0), 3) for k in keep}


def run_job(data, limit, a, scratch):
    """Seconds to make and keep the blocks, seconds to read them back, the
    answer, bytes spilled, and what the spill buffers counted in each phase."""
    with LocalCluster(
        n_workers=a.workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=limit,
        local_directory=scratch,
        dashboard_address=None,
        data=data,
    ) as cluster, Client(cluster) as client:
        start = spill_metrics(client)
        t = time.perf_counter()
        blocks = [client.submit(make_block, i, a.block, pure=False) for i in range(a.blocks)]
        wait(blocks)
        made = time.perf_counter() - t
        after_make = spill_metrics(client)
        t = time.perf_counter()
        sums = client.gather([client.submit(checksum, b, pure=False) for b in blocks])
        read = time.perf_counter() - t
        after_read = spill_metrics(client)
        spilled = sum(
            w["metrics"]["spilled_bytes"]["disk"] for w in client.scheduler_info()["workers"].values()
        )
        del blocks
        metrics = {"make": phase(start, after_make), "read": phase(after_make, after_read)}
        return made, read, sum(sums) % 1_000_000_007, spilled, metrics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=48)
    ap.add_argument("--block", type=parse_bytes, default="32MiB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", type=parse_bytes, default="512MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=1, help="copies of each spilled chunk in the pool")
    ap.add_argument("--prefault", action="store_true", help="the pool's workers fill their chunk buffers ahead")
    a = ap.parse_args()
    out = {
        "job": f"{a.blocks} blocks of {a.block} bytes made and kept, then each read back once, "
        f"on {a.workers} worker processes of {a.memory_limit} bytes each; the pool: 2 workers, "
        f"1 GiB MEM and 4 GiB DISK each{' (prefaulted)' if a.prefault else ''}, {a.replicas} copies of each spilled chunk",
        "runs": {"disk": [], "pool": []},
    }
    dask.config.set(
        {
            "distributed.worker.memory.target": 0.5,
            "distributed.worker.memory.spill": 0.7,
            "distributed.worker.memory.pause": False,
            "distributed.worker.memory.terminate": False,
        }
    )
    answers = set()
    with tierpool.local(workers=2, mem="1GiB", disk="4GiB", prefault=a.prefault) as pool:
        for _ in range(a.runs):
            for way in ("disk", "pool"):
                data = spill_to_tierpool(a.memory_limit, address=pool.address, replicas=a.replicas) if way == "pool" else None
                with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
                    made, read, answer, spilled, metrics = run_job(data, a.memory_limit, a, scratch)
                answers.add(answer)
                out["runs"][way].append(
                    {"make_s": round(made, 2), "read_s": round(read, 2), "total_s": round(made + read, 2),
                     "spilled_bytes": spilled, "spill_buffer": metrics}
                )
    assert len(answers) == 1, f"the two ways disagree: {answers}"
    for way in ("disk", "pool"):
        out[f"{way}_median_total_s"] = statistics.median(r["total_s"] for r in out["runs"][way])
    out["pool_over_disk"] = round(out["pool_median_total_s"] / out["disk_median_total_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
