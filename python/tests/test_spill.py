"""Files larger than the pool's MEM budget spill to DISK and come back exact."""

from __future__ import annotations

import hashlib

import numpy as np
from conftest import MEM

import tierpool


def test_a_file_larger_than_all_memory_spills_and_reads_back_exactly(client: tierpool.Client, base: str) -> None:
    size = 3 * 2 * MEM  # three times the MEM of both workers together
    rng = np.random.default_rng(42)
    digest = hashlib.sha256()
    with client.open(f"{base}/huge", "wb") as f:
        for _ in range(size // (16 << 20)):
            block = rng.integers(0, 256, size=16 << 20, dtype=np.uint8)
            digest.update(block)
            f.write(block)
    assert client.stat(f"{base}/huge").size == size
    workers = client.status()["workers"]
    assert sum(w["disk"]["used"] for w in workers) > 0 or _wait_for_disk_usage(client)
    assert all(w["mem"]["capacity"] == MEM for w in workers)

    buf = np.empty(size, dtype=np.uint8)
    with client.open(f"{base}/huge", "rb") as f:
        assert f.readinto(buf) == size
    assert hashlib.sha256(buf).hexdigest() == digest.hexdigest()

    again = hashlib.sha256()
    with client.open(f"{base}/huge", "rb") as f:
        while block := f.read(3 << 20):
            again.update(block)
    assert again.hexdigest() == digest.hexdigest()


def _wait_for_disk_usage(client: tierpool.Client) -> bool:
    # Workers report usage with their heartbeat, once a second.
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if sum(w["disk"]["used"] for w in client.status()["workers"]) > 0:
            return True
        time.sleep(0.2)
    return False
