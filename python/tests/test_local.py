"""tierpool.local(): an embedded pool that starts, serves and cleans up."""

from __future__ import annotations

import os

import pytest

import tierpool


def test_local_pool_lifecycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERPOOL_COORDINATOR", "192.0.2.1:1")
    pool = tierpool.local(workers=3, mem="32MiB", disk="64MiB")
    with pool as client:
        assert isinstance(client, tierpool.Client)
        host, port = client.address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert pool.address == client.address
        assert os.environ["TIERPOOL_COORDINATOR"] == client.address
        s = client.status()
        assert len(s["workers"]) == 3 and all(w["alive"] for w in s["workers"])
        assert {w["mem_capacity"] for w in s["workers"]} == {32 << 20}
        client.put(b"hello", "/hello")
        assert client.get("/hello") == b"hello"
        directory = pool.dir
        procs = list(pool._procs)
        assert directory is not None and os.path.isdir(directory)
    assert not os.path.exists(directory)
    assert all(p.poll() is not None for p in procs)
    assert os.environ["TIERPOOL_COORDINATOR"] == "192.0.2.1:1"
    with pytest.raises(RuntimeError):
        pool.address


def test_local_pool_reports_a_server_that_cannot_start() -> None:
    with pytest.raises(RuntimeError, match="worker 0|workers"):
        with tierpool.local(workers=1, mem="lots", disk="1GiB", timeout=10):
            pass


def test_local_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError):
        tierpool.local(workers=0)
