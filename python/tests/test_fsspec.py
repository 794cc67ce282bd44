"""The fsspec filesystem: registered for tierpool:// by entry point, passes
fsspec's own abstract test suite, and carries pandas, pyarrow and Dask."""

from __future__ import annotations

import uuid
from typing import Iterator

import fsspec
import pytest
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

import tierpool
from tierpool.fsspec import TierpoolFileSystem


class TierpoolFixtures(AbstractFixtures):
    @pytest.fixture
    def fs(self, client: tierpool.Client) -> TierpoolFileSystem:
        return fsspec.filesystem("tierpool")

    @pytest.fixture
    def fs_join(self):  # type: ignore[no-untyped-def]
        return lambda *parts: "/".join(parts)

    @pytest.fixture
    def fs_path(self, fs: TierpoolFileSystem) -> Iterator[str]:
        path = f"/abstract-{uuid.uuid4().hex[:12]}"
        fs.mkdir(path)
        yield path
        fs.rm(path, recursive=True)


class TestTierpoolCopy(AbstractCopyTests, TierpoolFixtures):
    pass


class TestTierpoolGet(AbstractGetTests, TierpoolFixtures):
    pass


class TestTierpoolPut(AbstractPutTests, TierpoolFixtures):
    pass


class TestTierpoolOpen(AbstractOpenTests, TierpoolFixtures):
    pass


class TestTierpoolPipe(AbstractPipeTests, TierpoolFixtures):
    pass


# ---- our own checks -------------------------------------------------------


def test_the_protocol_is_registered_by_entry_point(client: tierpool.Client) -> None:
    assert fsspec.get_filesystem_class("tierpool") is TierpoolFileSystem
    fs, path = fsspec.core.url_to_fs("tierpool://data/x.csv")
    assert isinstance(fs, TierpoolFileSystem) and path == "/data/x.csv"
    assert fs.address == client.address
    assert fs.unstrip_protocol("/data/x.csv") == "tierpool://data/x.csv"


def test_fsspec_open_reads_and_writes_pool_files(client: tierpool.Client, base: str) -> None:
    url = f"tierpool:/{base}/new/dir/x.csv"
    with fsspec.open(url, "w") as f:
        f.write("a,b\n1,2\n")
    assert client.get(f"{base}/new/dir/x.csv") == b"a,b\n1,2\n"
    with fsspec.open(url, "rb") as f:
        assert f.read() == b"a,b\n1,2\n"
    fs = fsspec.filesystem("tierpool")
    assert fs.cat_file(url, start=2, end=5) == b"b\n1"
    assert fs.cat_file(url, start=-4) == b"1,2\n"
    assert fs.info(url)["type"] == "file" and fs.info(url)["size"] == 8
    assert fs.isdir(f"tierpool:/{base}/new") and fs.exists(url)
    assert fs.ls(f"{base}/new/dir", detail=False) == [f"{base}/new/dir/x.csv"]


def test_storage_options_choose_the_pool(client: tierpool.Client, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client.put(b"here", f"{base}/f")
    monkeypatch.setenv("TIERPOOL_COORDINATOR", "127.0.0.1:1")
    with fsspec.open(f"tierpool:/{base}/f", "rb", address=client.address) as f:
        assert f.read() == b"here"


def test_mv_is_an_atomic_rename_into_directories(client: tierpool.Client, base: str) -> None:
    fs = fsspec.filesystem("tierpool")
    fs.pipe_file(f"{base}/a/f", b"1")
    inode = client.stat(f"{base}/a/f").inode
    fs.mkdir(f"{base}/b")
    fs.mv(f"{base}/a/f", f"{base}/b")
    assert client.stat(f"{base}/b/f").inode == inode
    fs.mv(f"{base}/b", f"{base}/c")
    assert client.ls(f"{base}/c") == ["f"]


def test_pandas_csv_and_parquet_round_trip(client: tierpool.Client, base: str) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": range(1000), "y": [f"row {i}" for i in range(1000)], "z": [i / 7 for i in range(1000)]})
    df.to_parquet(f"tierpool:/{base}/t.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(f"tierpool:/{base}/t.parquet"), df)
    df.to_csv(f"tierpool:/{base}/t.csv", index=False)
    pd.testing.assert_frame_equal(pd.read_csv(f"tierpool:/{base}/t.csv"), df)


def test_pyarrow_dataset_over_a_directory(client: tierpool.Client, base: str) -> None:
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    fs = fsspec.filesystem("tierpool")
    table = pa.table({"k": list(range(3000)), "part": [i % 3 for i in range(3000)]})
    ds.write_dataset(table, f"{base}/ds", filesystem=fs, format="parquet", partitioning=["part"])
    assert sorted(fs.ls(f"{base}/ds", detail=False)) == [f"{base}/ds/{p}" for p in ("0", "1", "2")]
    back = ds.dataset(f"{base}/ds", filesystem=fs, format="parquet", partitioning=["part"]).to_table()
    assert sorted(back.column("k").to_pylist()) == list(range(3000))
    assert back.num_rows == 3000


def test_dask_read_csv_with_a_glob(client: tierpool.Client, base: str) -> None:
    dd = pytest.importorskip("dask.dataframe")
    client.mkdir(f"{base}/logs")
    for i in range(4):
        rows = "".join(f"{i},{j},{i * 100 + j}\n" for j in range(100))
        client.put(("part,j,v\n" + rows).encode(), f"{base}/logs/{i}.csv")
    client.put(b"not,a,log\n", f"{base}/logs/readme.txt")
    df = dd.read_csv(f"tierpool:/{base}/logs/*.csv")
    assert df.npartitions == 4
    assert int(df.v.sum().compute()) == sum(i * 100 + j for i in range(4) for j in range(100))
    out = f"tierpool:/{base}/out"
    df.to_parquet(out)
    assert int(dd.read_parquet(out).v.sum().compute()) == int(df.v.sum().compute())
