"""Under-stores from Python, against a real pool: a directory attached
and read lazily (Client, open, fsspec), written through, loaded, freed,
changed behind the pool's back (Stale until sync_meta), a pool-only
attachment synced on request, bad stores, detach."""

from __future__ import annotations

import pathlib
import time

import fsspec
import pytest

import tierpool

from conftest import pattern


def tree(root: pathlib.Path) -> bytes:
    big = pattern(5 << 20, 3)
    (root / "sub").mkdir(parents=True)
    (root / "big.bin").write_bytes(big)
    (root / "sub" / "a.txt").write_bytes(b"hello")
    return big


def test_a_directory_reads_lazily_and_writes_through(client: tierpool.Client, base: str, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    big = tree(src)
    at = f"{base}/in"
    assert client.attach(f"file://{src}", at) == {"files": 2, "dirs": 1, "bytes": len(big) + 5}
    assert client.ls(at) == ["big.bin", "sub"]
    assert client.stat(f"{at}/big.bin").size == len(big)
    assert client.get(f"{at}/big.bin") == big
    with client.open(f"{at}/sub/a.txt", "rb") as f:
        assert f.read() == b"hello"
    assert fsspec.filesystem("tierpool").cat(f"{at}/sub/a.txt") == b"hello"

    client.put(b"from python", f"{at}/new.txt")
    assert (src / "new.txt").read_bytes() == b"from python"
    with client.open(f"{at}/sub/w.txt", "wb") as f:
        f.write(b"streamed")
    assert (src / "sub" / "w.txt").read_bytes() == b"streamed"
    client.rm(f"{at}/new.txt")
    assert not (src / "new.txt").exists()

    assert client.free(at)["files"] == 3
    assert client.load(at) == {"files": 3, "bytes": len(big) + 5 + 8}

    (src / "sub" / "a.txt").write_bytes(b"changed below")
    with pytest.raises(tierpool.Stale, match="changed in the under-store"):
        client.get(f"{at}/sub/a.txt")
    assert client.sync_meta(at) == {"added": 0, "changed": 1, "removed": 0, "conflicts": []}
    assert client.get(f"{at}/sub/a.txt") == b"changed below"

    [a] = [a for a in client.attachments() if a["path"] == at]
    assert (a["uri"], a["mode"], a["readonly"]) == (f"file://{src}", "through", False)
    assert client.detach(at) == 4
    assert client.ls(at) == []
    assert (src / "sub" / "w.txt").read_bytes() == b"streamed"


def test_pool_only_keeps_changes_until_synced(client: tierpool.Client, base: str, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    tree(src)
    at = f"{base}/po"
    client.attach(f"file://{src}", at, mode="pool-only")
    client.put(b"pool only", f"{at}/only.txt")
    assert not (src / "only.txt").exists()
    assert client.free(at)["skipped"] == [f"{at}/only.txt"]
    with pytest.raises(tierpool.Stale, match="not in the under-store yet"):
        client.detach(at)
    assert client.sync(at) == {"files": 1, "bytes": 9}
    assert (src / "only.txt").read_bytes() == b"pool only"
    client.detach(at)


def test_back_mode_writes_below_in_the_background_and_on_sync(
    client: tierpool.Client, base: str, tmp_path: pathlib.Path
) -> None:
    src = tmp_path / "src"
    tree(src)
    at = f"{base}/wb"
    client.attach(f"file://{src}", at, mode="back")
    [a] = [a for a in client.attachments() if a["path"] == at]
    assert a["mode"] == "back"
    # The pool's write-back writes it within a few of its 2 s rounds.
    with client.open(f"{at}/sub/later.txt", "wb") as f:
        f.write(b"written back")
    deadline = time.monotonic() + 30
    while not (src / "sub" / "later.txt").exists() or (src / "sub" / "later.txt").read_bytes() != b"written back":
        assert time.monotonic() < deadline, "never written back"
        time.sleep(0.05)
    # sync writes what is owed at once and waits for it: now.txt unless the
    # background got to it first, and later.txt too if its bytes landed
    # below but the pool had not yet recorded it clean.
    client.put(b"synced", f"{at}/now.txt")
    assert client.sync(at)["files"] in (0, 1, 2)
    assert (src / "now.txt").read_bytes() == b"synced"
    client.detach(at)


def test_bad_stores_and_modes_raise_and_attach_nothing(client: tierpool.Client, base: str) -> None:
    with pytest.raises(tierpool.NotFound):
        client.attach("file:///no/such/dir", f"{base}/x")
    with pytest.raises(ValueError, match="write mode"):
        client.attach("file:///tmp", f"{base}/x", mode="back-later")
    with pytest.raises(ValueError):
        client.attach("ftp://host/x", f"{base}/x")
    assert [a for a in client.attachments() if a["path"].startswith(base)] == []


def test_a_file_writes_by_its_own_mode_and_keeps_it(client: tierpool.Client, base: str, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    tree(src)
    at = f"{base}/own"
    client.attach(f"file://{src}", at)
    assert client.write_mode(f"{at}/sub/a.txt") == {"mode": "through", "own": False}
    # A pool-only file in a through attachment: rewrites stay in the pool.
    assert client.set_write_mode(f"{at}/sub/a.txt", "pool-only") == {"files": 1, "written": 0}
    client.put(b"pool 1", f"{at}/sub/a.txt")
    with client.open(f"{at}/sub/a.txt", "wb") as f:
        f.write(b"pool 2")
    assert client.get(f"{at}/sub/a.txt") == b"pool 2"
    assert (src / "sub" / "a.txt").read_bytes() == b"hello"
    assert client.write_mode(f"{at}/sub/a.txt") == {"mode": "pool-only", "own": True}
    [a] = [a for a in client.status()["attachments"] if a["path"] == at]
    assert (a["dirty_files"], a["write_back_files"], a["own_mode_files"]) == (1, 0, 1)
    # Back to the attachment's mode: written through before the call returns.
    assert client.set_write_mode(f"{at}/sub/a.txt", None) == {"files": 1, "written": 1}
    assert (src / "sub" / "a.txt").read_bytes() == b"pool 2"
    with pytest.raises(ValueError, match="write mode"):
        client.set_write_mode(f"{at}/sub/a.txt", "later")
    with pytest.raises(IsADirectoryError):
        client.set_write_mode(at, "back")
    assert client.set_write_mode(at, "pool-only", recursive=True) == {"files": 2, "written": 0}
    client.put(b"outside", f"{base}/outside.txt")
    with pytest.raises(ValueError, match="is not a file beneath an attached under-store"):
        client.write_mode(f"{base}/outside.txt")
    client.detach(at)
