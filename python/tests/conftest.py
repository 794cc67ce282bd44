"""Fixtures: real pools started with tierpool.local(), never mocks.

One pool serves most of the session (two workers with a small MEM budget, so
big files spill to DISK); tests that need a pool of their own (pool full,
lifecycle) start one. Each test works under a directory of its own.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Iterator

import pytest

import tierpool

#: Per-worker budgets of the shared pool. Files larger than 2 * MEM spill.
MEM = 64 << 20
DISK = 1 << 30


@pytest.fixture(scope="session")
def pool() -> Iterator[tierpool.Client]:
    with tierpool.local(workers=2, mem=MEM, disk=DISK) as client:
        yield client


@pytest.fixture
def client(pool: tierpool.Client) -> tierpool.Client:
    # local() points TIERPOOL_COORDINATOR at the pool while it runs.
    assert os.environ["TIERPOOL_COORDINATOR"] == pool.address
    return pool


@pytest.fixture
def base(client: tierpool.Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty directory for one test, removed afterwards."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:80]
    path = f"/t/{name}-{uuid.uuid4().hex[:8]}"
    client.mkdir(path, parents=True)
    yield path
    try:
        client.rm(path, recursive=True)
    except FileNotFoundError:
        pass


def pattern(n: int, seed: int = 0) -> bytes:
    """``n`` bytes that differ at every offset and between seeds."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8).tobytes()
