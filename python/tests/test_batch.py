"""Many small files at once, from Python and through fsspec: every item is
tried, a failure in the middle is returned for its item alone (not
raised), and results come back in the order given."""

from __future__ import annotations

import pytest

import tierpool
import fsspec

from conftest import pattern


def test_put_many_and_get_many_report_each_item(client: tierpool.Client) -> None:
    client.mkdir("/batch", parents=True)
    client.put(b"old", "/batch/taken")
    items = {f"/batch/f{i}": pattern(100 + i, seed=i) for i in range(100)}
    items["/batch/taken"] = b"new"
    out = client.put_many(items, overwrite=False)
    assert len(out) == 101
    assert all(isinstance(r, tierpool.FileInfo) for r in out[:100])
    assert [r.size for r in out[:100]] == [100 + i for i in range(100)]
    assert isinstance(out[100], FileExistsError)

    paths = list(items)
    paths.insert(3, "/batch/missing")
    got = client.get_many(paths)
    assert isinstance(got[3], FileNotFoundError)
    assert got[:3] + got[4:-1] == [items[p] for p in paths[:3] + paths[4:-1]]
    assert got[-1] == b"old", "the taken path kept its content"
    assert client.put_many([]) == [] and client.get_many([]) == []


def test_fsspec_cat_and_pipe_of_many_paths(client: tierpool.Client) -> None:
    fs = fsspec.filesystem("tierpool")
    data = {f"/fsb/d{i % 3}/f{i}": pattern(50 + i, seed=i) for i in range(30)}
    fs.pipe(data)
    assert fs.cat(list(data)) == data
    wanted = list(data)[:2] + ["/fsb/none"]
    with pytest.raises(FileNotFoundError):
        fs.cat(wanted)
    assert set(fs.cat(wanted, on_error="omit")) == set(wanted[:2])
    assert isinstance(fs.cat(wanted, on_error="return")["/fsb/none"], FileNotFoundError)


def test_small_files_are_kept_inline_by_the_metadata(client: tierpool.Client) -> None:
    """Files up to the coordinator's --inline-max (4 KiB) written whole are
    held by the metadata: one round trip each way, nothing on the workers."""
    fs = fsspec.filesystem("tierpool")
    client.mkdir("/inl", parents=True)
    before = client.status()["inline"]
    client.put(pattern(4096, seed=1), "/inl/edge")
    client.put_many({"/inl/a": b"a" * 10, "/inl/b": b""})
    fs.pipe("/inl/c", b"through fsspec")
    client.put(pattern(4097, seed=2), "/inl/big")
    assert [client.stat(f"/inl/{n}").inline for n in ("edge", "a", "b", "c", "big")] == [True, True, False, True, False]
    assert fs.info("/inl/c")["inline"] is True
    assert client.get_many(["/inl/edge", "/inl/a", "/inl/c"]) == [pattern(4096, seed=1), b"a" * 10, b"through fsspec"]
    with client.open("/inl/c", "rb") as f:
        f.seek(8)
        assert f.read() == b"fsspec"
    after = client.status()["inline"]
    assert after["files"] - before["files"] == 3
    assert after["bytes"] - before["bytes"] == 4096 + 10 + 14
    assert after["max_file"] == 4096
    client.rm("/inl", recursive=True)
    assert client.status()["inline"]["files"] == before["files"]
