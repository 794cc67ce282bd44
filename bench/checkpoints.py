#!/usr/bin/env python3
"""Incremental checkpoints of a memory region: after 1%, 10% and 100% of
its pages changed (either one contiguous run, or pages scattered at
random), the time of `Region.checkpoint` and the bytes it copied, against
a full copy: the first checkpoint (every chunk copied on the workers), and
a copy through the client (the region read and written out as a file).

A checkpoint copies whole chunks, so scattered pages cost the chunks they
touch: the figures are given for two chunk sizes. Writes JSON to stdout.

Usage: python3 bench/checkpoints.py [--size 512MiB] [--workers N] [--repeat N]
(needs the tierpool package installed: ./scripts/test-python.sh does it).
"""

import argparse
import json
import random
import statistics
import time

import tierpool

PAGE = 4096


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    size = tierpool.parse_size(a.size)
    out = {"workers": a.workers, "region_bytes": size, "runs": []}
    with tierpool.local(workers=a.workers, mem="3GiB", disk="8GiB", set_env=False) as c:
        for chunk in ("1MiB", "4MiB"):
            path = f"/grid-{chunk}"
            r = c.alloc(path, size, cache="256MiB", chunk_size=chunk)
            rng = random.Random(7)
            block = rng.randbytes(1 << 20)
            for off in range(0, size, len(block)):
                r.write(off, block[: size - off])
            t = time.perf_counter()
            full = r.checkpoint("base")
            full_s = time.perf_counter() - t
            # The copy a region without checkpoints would need: through the client.
            r.flush()
            t = time.perf_counter()
            c.put(c.get(path), f"{path}.copy")
            client_copy_s = time.perf_counter() - t
            c.rm(f"{path}.copy")
            pages = size // PAGE
            n = 0
            for percent in (1, 10, 100):
                for layout in ("contiguous", "scattered"):
                    if percent == 100 and layout == "scattered":
                        continue
                    changed = max(1, pages * percent // 100)
                    times, copied = [], []
                    for _ in range(a.repeat):
                        if layout == "contiguous":
                            start = rng.randrange(0, pages - changed + 1)
                            chosen = range(start, start + changed)
                        else:
                            chosen = rng.sample(range(pages), changed)
                        for p in chosen:
                            r.write(p * PAGE, rng.randbytes(16))
                        r.flush()
                        n += 1
                        t = time.perf_counter()
                        rep = r.checkpoint(f"c{n}")
                        times.append(time.perf_counter() - t)
                        copied.append(rep["bytes_copied"])
                        c.snapshot_remove(path, f"c{n - 1}" if n > 1 else "base")
                    out["runs"].append(
                        {
                            "chunk_size": chunk,
                            "pages_changed_percent": percent,
                            "layout": layout,
                            "seconds_median": round(statistics.median(times), 4),
                            "seconds_min": round(min(times), 4),
                            "seconds_max": round(max(times), 4),
                            "bytes_copied_median": int(statistics.median(copied)),
                            "fraction_of_full_copy": round(statistics.median(copied) / full["bytes_copied"], 4),
                        }
                    )
            out.setdefault("full", []).append(
                {
                    "chunk_size": chunk,
                    "first_checkpoint_seconds": round(full_s, 4),
                    "first_checkpoint_bytes_copied": full["bytes_copied"],
                    "client_copy_seconds": round(client_copy_s, 4),
                }
            )
            r.close()
            for s in c.snapshots(path):
                c.snapshot_remove(path, s["name"])
            c.rm(path)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
