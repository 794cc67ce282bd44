"""Dask workers that spill to the pool: the mapping itself, and a cluster
whose data exceeds its memory limit finishing with no local disk spills."""

from __future__ import annotations

import os
import time

import pytest

import tierpool

pytest.importorskip("distributed")
from tierpool.dask import TierpoolMapping, TierpoolSpillBuffer, spill_to_tierpool  # noqa: E402


def test_mapping_stores_bytes_and_frame_lists(client: tierpool.Client, base: str) -> None:
    m = TierpoolMapping(f"{base}/spill", client=client)
    assert m.directory.startswith(f"{base}/spill/")
    m["a"] = b"alpha"
    m[("x", 1)] = [b"fr", bytearray(b"am"), memoryview(b"es")]
    m["empty"] = []
    assert m["a"] == b"alpha" and m[("x", 1)] == b"frames" and m["empty"] == b""
    # Writable, so Dask's deserialisation makes no copy of it.
    assert isinstance(m["a"], bytearray) and isinstance(m[("x", 1)], bytearray)
    assert len(m) == 3 and set(m) == {"a", ("x", 1), "empty"} and "a" in m and "b" not in m
    assert len(client.ls(m.directory)) == 3
    m["a"] = b"again"
    assert m["a"] == b"again" and len(client.ls(m.directory)) == 3
    del m["a"]
    assert "a" not in m and len(client.ls(m.directory)) == 2
    with pytest.raises(KeyError):
        m["a"]
    with pytest.raises(KeyError):
        del m["a"]
    files = client.ls(m.directory, detail=True)
    # Low priority, and one copy of each chunk in this pool of two.
    assert all(f.priority == 1 and f.replicas == 1 for f in files)
    assert client.stat(m.directory).replicas == 1
    m.close()
    assert not client.exists(m.directory) and len(m) == 0
    kept = TierpoolMapping(f"{base}/spill", client=client, replicas=None)
    kept["a"] = b"alpha"
    assert client.stat(f"{kept.directory}/0").replicas == 2
    kept.close()


def test_spill_buffer_moves_values_past_target_to_the_pool(client: tierpool.Client, base: str) -> None:
    np = pytest.importorskip("numpy")
    buf = TierpoolSpillBuffer(target=3 << 20, address=client.address, prefix=f"{base}/sb")
    arrays = {f"k{i}": np.full(1 << 18, i, dtype=np.float64) for i in range(6)}  # 2 MiB each
    for k, v in arrays.items():
        buf[k] = v
    assert len(buf.slow) >= 4 and len(buf.fast) <= 1
    assert len(client.ls(buf.store.directory)) == len(buf.slow)
    for k, v in arrays.items():
        assert np.array_equal(buf[k], v)
    buf.close()
    assert not client.exists(buf.store.directory)


def test_factory_computes_the_target_and_resolves_the_address(client: tierpool.Client) -> None:
    cls, kwargs = spill_to_tierpool("100MiB", target=0.5, max_spill="1GiB")
    assert cls is TierpoolSpillBuffer
    assert kwargs == {
        "target": 50 << 20,
        "max_spill": 1 << 30,
        "address": client.address,
        "prefix": "/dask-spill",
        "replicas": 1,
    }


def test_a_cluster_whose_data_exceeds_memory_spills_to_the_pool_not_to_disk(client: tierpool.Client) -> None:
    da = pytest.importorskip("dask.array")
    import dask
    from distributed import Client, LocalCluster, wait

    n = 50_000_000  # 400 MB of float64, against 2 x 128 MiB of worker memory
    settings = {
        "distributed.worker.memory.target": 0.5,
        # The managed-memory target above is what must spill; keep the
        # process-memory monitor from pausing or killing these small workers.
        "distributed.worker.memory.spill": False,
        "distributed.worker.memory.pause": False,
        "distributed.worker.memory.terminate": False,
    }
    with dask.config.set(settings):
        with LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="128MiB",
            data=spill_to_tierpool("128MiB"),
            dashboard_address=None,
        ) as cluster, Client(cluster) as dc:
            x = (da.arange(n, chunks=1_000_000, dtype="f8") * 2).persist()
            wait(x)
            kinds = dc.run(lambda dask_worker: type(dask_worker.data).__name__)
            assert set(kinds.values()) == {"TierpoolSpillBuffer"}
            spilled = dc.run(lambda dask_worker: dask_worker.data.spilled_total.disk)
            assert sum(spilled.values()) > 100 << 20, spilled
            dirs = [f.path for f in client.ls("/dask-spill", detail=True)]
            stored = sum(f.size for d in dirs for f in client.ls(d, detail=True))
            assert stored > 100 << 20
            assert int(x.sum().compute()) == n * (n - 1)
            local_files = dc.run(_files_under_local_directory)
            assert not any(local_files.values()), local_files
    deadline = time.monotonic() + 10
    while client.ls("/dask-spill") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.ls("/dask-spill") == []


def _files_under_local_directory(dask_worker: object) -> list:
    root = dask_worker.local_directory  # type: ignore[attr-defined]
    return [
        os.path.join(d, f) for d, _, files in os.walk(root) for f in files if not f.endswith((".lock", ".py", ".pyc"))
    ]
