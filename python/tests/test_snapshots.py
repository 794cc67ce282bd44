"""Snapshots from Python and through fsspec: taken, read byte-exact at
PATH/.snapshots/NAME while the live files change, read-only, restored, and
removed."""

from __future__ import annotations

import errno

import fsspec
import pytest

import tierpool

from conftest import pattern


def test_snapshot_reads_as_taken_restores_and_is_read_only(client: tierpool.Client) -> None:
    old = pattern(3 << 20, seed=1)
    client.mkdir("/snap/d", parents=True)
    client.put(old, "/snap/d/big")
    client.put(b"small", "/snap/d/small")
    s = client.snapshot_create("/snap/d", "first")
    assert (s["path"], s["name"], s["entries"], s["bytes"]) == ("/snap/d", "first", 3, len(old) + 5)
    with pytest.raises(FileExistsError, match="/snap/d@first: a snapshot of that name exists"):
        client.snapshot_create("/snap/d", "first")

    client.put(b"new contents", "/snap/d/big")
    client.rm("/snap/d/small")
    assert client.get("/snap/d/.snapshots/first/big") == old
    assert client.get("/snap/d/.snapshots/first/small") == b"small"
    assert client.ls("/snap/d/.snapshots") == ["first"]
    assert client.snapshots("/snap/d")[0]["kept_bytes"] == len(old)

    fs = fsspec.filesystem("tierpool")
    assert fs.cat("/snap/d/.snapshots/first/big") == old
    assert sorted(fs.ls("/snap/d/.snapshots/first", detail=False)) == [
        "/snap/d/.snapshots/first/big",
        "/snap/d/.snapshots/first/small",
    ]
    with pytest.raises(tierpool.ReadOnly) as e:
        client.rm("/snap/d/.snapshots/first/big")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError):
        client.put(b"x", "/snap/d/.snapshots/first/new")

    client.snapshot_restore("/snap/d", "first")
    assert client.get("/snap/d/big") == old
    assert client.get("/snap/d/small") == b"small"
    client.snapshot_remove("/snap/d", "first")
    assert client.snapshots("/snap/d") == []
    with pytest.raises(FileNotFoundError, match="/snap/d@first: no such snapshot"):
        client.snapshot_remove("/snap/d", "first")
    client.rm("/snap", recursive=True)
