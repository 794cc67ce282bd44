"""The Client API against a real pool: namespace operations, put/get in all
their forms, attributes, status, connecting."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest
from conftest import pattern

import tierpool


def test_connect_uses_the_environment_then_the_default(client: tierpool.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tierpool.connect().address == client.address
    assert tierpool.connect(client.address).address == client.address
    monkeypatch.delenv("TIERPOOL_COORDINATOR")
    if _default_port_in_use():
        pytest.skip("something listens on 127.0.0.1:7700")
    with pytest.raises(ConnectionError, match="127.0.0.1:7700"):
        tierpool.connect(timeout=0.5)


def _default_port_in_use() -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", 7700)) == 0


def test_put_bytes_and_get_round_trip_exactly(client: tierpool.Client, base: str) -> None:
    data = pattern(10 * 1024 * 1024 + 123)
    info = client.put(data, f"{base}/a.bin")
    assert (info.path, info.size, info.kind, info.chunks) == (f"{base}/a.bin", len(data), "file", 3)
    assert client.get(f"{base}/a.bin") == data


@pytest.mark.parametrize("make", [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_put_accepts_any_bytes_like_object(client: tierpool.Client, base: str, make: object) -> None:
    data = pattern(70_000, seed=3)
    client.put(make(data), f"{base}/x")  # type: ignore[operator]
    assert client.get(f"{base}/x") == data


def test_put_and_get_local_files_and_file_objects(client: tierpool.Client, base: str, tmp_path: object) -> None:
    data = pattern(5 * 1024 * 1024 + 7, seed=4)
    src = os.path.join(str(tmp_path), "src.bin")
    with open(src, "wb") as f:
        f.write(data)
    client.put(src, f"{base}/from-file")
    client.put(io.BytesIO(data), f"{base}/from-fileobj")
    dst = os.path.join(str(tmp_path), "dst.bin")
    assert client.get(f"{base}/from-file", dst) == len(data)
    with open(dst, "rb") as f:
        assert f.read() == data
    out = io.BytesIO()
    assert client.get(f"{base}/from-fileobj", out) == len(data)
    assert out.getvalue() == data


def test_empty_file(client: tierpool.Client, base: str) -> None:
    info = client.put(b"", f"{base}/empty")
    assert info.size == 0 and info.chunks == 0
    assert client.get(f"{base}/empty") == b""


def test_read_range(client: tierpool.Client, base: str) -> None:
    data = pattern(9 << 20, seed=5)
    client.put(data, f"{base}/r", chunk_size="1MiB")
    assert client.read_range(f"{base}/r", 1_000_000, 3_500_000) == data[1_000_000:3_500_000]
    assert client.read_range(f"{base}/r", (9 << 20) - 10) == data[-10:]
    assert client.read_range(f"{base}/r", 10 << 20) == b""


def test_put_options_reach_the_file(client: tierpool.Client, base: str) -> None:
    info = client.put(b"x" * 100, f"{base}/opts", chunk_size="64KiB", priority=5, pin=True)
    assert (info.chunk_size, info.priority, info.pinned) == (64 << 10, 5, True)
    st = client.stat(f"{base}/opts")
    assert (st.chunk_size, st.priority, st.pinned) == (64 << 10, 5, True)


def test_put_replaces_atomically_or_refuses_without_overwrite(client: tierpool.Client, base: str) -> None:
    client.put(b"old", f"{base}/f")
    client.put(b"new", f"{base}/f")
    assert client.get(f"{base}/f") == b"new"
    with pytest.raises(FileExistsError):
        client.put(b"newer", f"{base}/f", overwrite=False)
    assert client.get(f"{base}/f") == b"new"


def test_ls_stat_and_exists(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/d")
    client.put(b"12345", f"{base}/f")
    assert client.ls(base) == ["d", "f"]
    d, f = client.ls(base, detail=True)
    assert (d.path, d.kind, d.is_dir(), f.path, f.size, f.is_file()) == (f"{base}/d", "directory", True, f"{base}/f", 5, True)
    assert client.ls(f"{base}/f") == ["f"]
    assert client.ls(f"{base}/f", detail=True)[0].path == f"{base}/f"
    assert client.stat(base + "/").path == base
    assert client.exists(f"{base}/f") and not client.exists(f"{base}/nope")
    st = client.stat(f"{base}/f")
    assert st.to_dict()["size"] == 5 and st.mtime > 1.6e9
    assert "/f" in repr(st)


def test_ls_tells_a_file_from_a_directory_holding_its_namesake(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/x")
    client.put(b"1", f"{base}/x/x")
    [entry] = client.ls(f"{base}/x", detail=True)
    assert entry.path == f"{base}/x/x"


def test_mkdir_parents_and_exist_ok(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/a/b/c", parents=True)
    assert client.stat(f"{base}/a/b/c").is_dir()
    client.mkdir(f"{base}/a/b/c", parents=True)
    with pytest.raises(FileExistsError):
        client.mkdir(f"{base}/a")
    client.mkdir(f"{base}/a", exist_ok=True)
    client.put(b"", f"{base}/file")
    with pytest.raises(FileExistsError):
        client.mkdir(f"{base}/file", exist_ok=True)


def test_rm_counts_and_recursion(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/d/e", parents=True)
    client.put(b"1", f"{base}/d/e/f")
    client.put(b"2", f"{base}/d/g")
    assert client.rm(f"{base}/d/g") == 1
    assert client.rm(f"{base}/d", recursive=True) == 3
    assert client.ls(base) == []


def test_mv_renames_files_and_directories_atomically(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/src")
    client.put(b"payload", f"{base}/src/f")
    client.mv(f"{base}/src", f"{base}/dst")
    assert client.ls(base) == ["dst"]
    client.put(b"other", f"{base}/g")
    client.mv(f"{base}/g", f"{base}/dst/f")
    assert client.get(f"{base}/dst/f") == b"other"


def test_pin_unpin_and_priority_apply_to_a_subtree(client: tierpool.Client, base: str) -> None:
    client.put(b"1", f"{base}/a")
    client.put(b"2", f"{base}/b")
    assert client.pin(base) == 2
    assert all(e.pinned for e in client.ls(base, detail=True))
    assert client.unpin(f"{base}/a") == 1
    assert not client.stat(f"{base}/a").pinned and client.stat(f"{base}/b").pinned
    assert client.set_priority(f"{base}/b", 1) == 1
    assert client.stat(f"{base}/b").priority == 1


def test_status_reports_the_workers(client: tierpool.Client) -> None:
    s = client.status()
    assert s["coordinator"] == client.address
    assert s["partitions"] == 4096
    assert len(s["workers"]) == 2 and all(w["alive"] for w in s["workers"])
    assert {w["mem"]["capacity"] for w in s["workers"]} == {64 << 20}
    # Shares by capacity and bandwidth: no worker is slow; little traffic yet.
    assert all(w["speed"] == 100 and "bandwidth" in w and not w["draining"] for w in s["workers"])
    assert s["migration"]["active"] is False and s["migration"]["partitions_left"] == 0


def test_client_pickles_as_its_address(client: tierpool.Client, base: str) -> None:
    client.put(b"p", f"{base}/p")
    again = pickle.loads(pickle.dumps(client))
    assert again.address == client.address and again.get(f"{base}/p") == b"p"


def test_help_reads_well() -> None:
    doc = tierpool.Client.__doc__ or ""
    assert "A connection to a tierpool pool" in doc
    for name in ["ls", "stat", "mkdir", "rm", "mv", "put", "get", "pin", "unpin", "open"]:
        assert getattr(tierpool.Client, name).__doc__, name
    text = io.StringIO()
    import contextlib
    import pydoc

    with contextlib.redirect_stdout(text):
        pydoc.help(tierpool.Client)
    assert "class Client" in text.getvalue() and "open(self, path: str, mode: str = 'rb'" in text.getvalue()
