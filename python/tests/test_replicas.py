"""Copies per chunk from Python, against a real pool of three workers
keeping two: set_replicas up and down (every byte read back), fsck, the
replication figures of status(), and replicas on FileInfo."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

import tierpool

from conftest import pattern

KIB = 1024


@pytest.fixture(scope="module")
def pool3() -> Iterator[tierpool.Client]:
    with tierpool.local(workers=3, mem="64MiB", disk="256MiB", partitions=256, replicas=2, set_env=False) as c:
        yield c


def test_status_reports_the_replication_of_a_healthy_pool(pool3: tierpool.Client) -> None:
    r = pool3.status()["replication"]
    assert r == {
        "replicas": 2,
        "possible": 2,
        "workers_down": [],
        "replicas_missing": 0,
        "chunks_under": 0,
        "bytes_under": 0,
        "chunks_lost": 0,
        "degraded": False,
        "spread": "host",
    }


def test_copies_go_down_and_up_with_every_byte_kept(pool3: tierpool.Client) -> None:
    data = pattern(1000 * KIB, seed=1)
    info = pool3.put(data, "/updown", chunk_size="64KiB")
    assert info.replicas == 2 and info.to_dict()["replicas"] == 2
    assert pool3.stat("/updown").replicas == 2

    assert pool3.set_replicas("/updown", 1) == {"files": 1, "chunks": 16, "bytes": len(data)}
    assert pool3.stat("/updown").replicas == 1
    assert pool3.get("/updown") == data

    assert pool3.set_replicas("/updown", 2) == {"files": 1, "chunks": 16, "bytes": len(data)}
    assert pool3.stat("/updown").replicas == 2
    assert pool3.get("/updown") == data
    assert pool3.set_replicas("/updown", 2) == {"files": 0, "chunks": 0, "bytes": 0}


def test_a_directory_passes_its_copies_to_new_entries_and_recursive_changes_the_rest(
    pool3: tierpool.Client,
) -> None:
    pool3.mkdir("/tree/sub", parents=True)
    old = pattern(5000, seed=3)  # past --inline-max: its chunk is on the workers
    pool3.put(old, "/tree/sub/old")
    assert pool3.set_replicas("/tree", 1) == {"files": 0, "chunks": 0, "bytes": 0}
    assert (pool3.stat("/tree").replicas, pool3.stat("/tree/sub/old").replicas) == (1, 2)
    pool3.put(b"new", "/tree/new")
    assert pool3.stat("/tree/new").replicas == 1
    assert pool3.set_replicas("/tree", 1, recursive=True) == {"files": 1, "chunks": 1, "bytes": 5000}
    assert pool3.stat("/tree/sub/old").replicas == 1
    assert pool3.get("/tree/sub/old") == old


def test_bad_counts_raise_and_change_nothing(pool3: tierpool.Client) -> None:
    pool3.put(b"x" * 100, "/bad")
    with pytest.raises(tierpool.InvalidArgument, match="at most 2"):
        pool3.set_replicas("/bad", 3)
    for bad in (0, -1, 256, 2**70):
        with pytest.raises(ValueError, match="replicas"):
            pool3.set_replicas("/bad", bad)
    with pytest.raises(TypeError):
        pool3.set_replicas("/bad", "2")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        pool3.set_replicas("/nowhere", 1)
    assert pool3.stat("/bad").replicas == 2


def test_fsck_of_a_healthy_pool_is_empty(pool3: tierpool.Client) -> None:
    pool3.put(pattern(300 * KIB, seed=2), "/checked", chunk_size="64KiB")
    assert pool3.fsck() == []
    assert pool3.fsck("/checked") == []
    with pytest.raises(FileNotFoundError):
        pool3.fsck("/nowhere")


def test_fsspec_info_has_the_copies(pool3: tierpool.Client) -> None:
    from tierpool.fsspec import TierpoolFileSystem

    pool3.put(b"abc", "/spec")
    fs = TierpoolFileSystem(client=pool3, skip_instance_cache=True)
    assert fs.info("/spec")["replicas"] == 2


def test_a_local_pool_keeps_the_copies_it_is_given() -> None:
    with tierpool.local(workers=2, mem="32MiB", disk="64MiB", partitions=64, replicas=1, set_env=False) as c:
        assert c.status()["replication"]["replicas"] == 1
        assert c.put(b"one", "/one").replicas == 1
        with pytest.raises(tierpool.InvalidArgument):
            c.set_replicas("/one", 2)
    with pytest.raises(tierpool.InvalidArgument):
        tierpool.local(workers=1, replicas=9).start()


def test_placement_policies_are_set_shown_and_honoured(pool3: tierpool.Client) -> None:
    pool3.mkdir("/rr")
    pool3.set_replicas("/rr", 1)
    assert pool3.set_placement("/rr", "round-robin") == 1
    assert pool3.stat("/rr").placement == "round-robin"
    before = {w["id"]: w["mem"]["used"] + w["disk"]["used"] for w in pool3.status()["workers"]}
    data = pattern(3 * 64 * KIB, seed=7)
    info = pool3.put(data, "/rr/f", chunk_size="64KiB")
    assert (info.placement, info.to_dict()["placement"]) == ("round-robin", "round-robin")
    assert pool3.get("/rr/f") == data

    # Each of the three workers took one chunk (usage is reported with heartbeats).
    deadline = time.monotonic() + 10
    while True:
        after = {w["id"]: w["mem"]["used"] + w["disk"]["used"] for w in pool3.status()["workers"]}
        grown = sorted(after[w] - before[w] for w in after)
        if grown == [64 * KIB] * 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert grown == [64 * KIB] * 3

    # Local-only: one copy, on this machine's worker (every worker of a
    # local pool has this machine's hostname as its --host).
    pool3.mkdir("/lo")
    pool3.set_placement("/lo", "local-only")
    assert (pool3.stat("/lo").placement, pool3.stat("/lo").replicas) == ("local-only", 1)
    pool3.put(data, "/lo/f", chunk_size="64KiB")
    assert pool3.get("/lo/f") == data

    with pytest.raises(tierpool.InvalidArgument, match="unknown placement policy"):
        pool3.set_placement("/lo", "nearby")

