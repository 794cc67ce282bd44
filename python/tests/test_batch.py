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
