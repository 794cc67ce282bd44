"""Under-stores served by real servers that these tests start (an S3 server
and an HDFS minicluster, see servers.py), reached from Python: pandas and
Dask read an attached S3 prefix through ``tierpool://``, written files reach
the store, freed files are read from it again; an HDFS directory written
through one attachment is read, byte-exact, through another."""

from __future__ import annotations

import multiprocessing
import pathlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Tuple

import dask.dataframe as dd
import fsspec
import pandas as pd
import pytest

import tierpool

from conftest import pattern
from servers import S3, Hdfs


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hdfs() -> Iterator[Hdfs]:
    server = Hdfs()
    yield server
    server.stop()


def frame(n: int, seed: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"day": range(n), "v": [(i * seed) % 101 for i in range(n)], "name": [f"n{i % 17}" for i in range(n)]}
    )


def test_pandas_and_dask_read_an_attached_s3_prefix(client: tierpool.Client, base: str, s3: S3) -> None:
    prefix = s3.bucket("lake") / "sales"
    (prefix / "csv").mkdir(parents=True)
    parts = [frame(500, 3), frame(700, 5)]
    for i, part in enumerate(parts):
        part.to_csv(prefix / "csv" / f"part-{i}.csv", index=False)
    table = frame(2000, 7)
    table.to_parquet(prefix / "table.parquet")

    at = f"{base}/lake"
    done = client.attach("s3://lake/sales", at, options=s3.options())
    assert (done["files"], done["dirs"]) == (3, 1)
    [a] = [a for a in client.attachments() if a["path"] == at]
    assert (a["uri"], a["options"]["secret_access_key"]) == ("s3://lake/sales", "***")

    # pandas and Dask read the prefix through the pool, loading it on first read.
    pd.testing.assert_frame_equal(pd.read_parquet(f"tierpool:/{at}/table.parquet"), table)
    got = dd.read_csv(f"tierpool:/{at}/csv/*.csv").compute().reset_index(drop=True)
    # (Dask reads strings as Arrow's, pandas as its own: the values are compared.)
    pd.testing.assert_frame_equal(got, pd.concat(parts).reset_index(drop=True), check_dtype=False)

    # Written from Python: through to the bucket before put returns.
    out = frame(300, 11)
    out.to_csv(f"tierpool:/{at}/out.csv", index=False)
    assert pd.read_csv(prefix / "out.csv").equals(out)
    client.put(b"a note", f"{at}/csv/note.txt")
    assert (prefix / "csv" / "note.txt").read_bytes() == b"a note"
    assert fsspec.filesystem("tierpool").cat(f"{at}/csv/note.txt") == b"a note"

    # Freed, the pool reads the bucket again.
    freed = client.free(at)
    assert (freed["files"], freed["skipped"]) == (5, [])
    pd.testing.assert_frame_equal(pd.read_parquet(f"tierpool:/{at}/table.parquet"), table)
    client.rm(f"{at}/csv/note.txt")
    assert not (prefix / "csv" / "note.txt").exists()
    client.detach(at)


def test_wrong_s3_credentials_and_a_missing_bucket_attach_nothing(client: tierpool.Client, base: str, s3: S3) -> None:
    s3.bucket("guarded")
    with pytest.raises(OSError, match="s3://guarded"):
        client.attach("s3://guarded", f"{base}/g", options={**s3.options(), "secret_access_key": "wrong"})
    with pytest.raises(OSError, match="nobucket"):
        client.attach("s3://nobucket/x", f"{base}/g", options=s3.options())
    assert [a for a in client.attachments() if a["path"].startswith(base)] == []


def test_an_hdfs_directory_written_through_one_attachment_is_read_through_another(
    client: tierpool.Client, base: str, hdfs: Hdfs
) -> None:
    big = pattern(3 << 20, 21)
    writer = f"{base}/w"
    client.attach(hdfs.uri(), writer)
    client.mkdir(f"{writer}/day1/sub", parents=True)
    client.put(big, f"{writer}/day1/part-0.bin")
    frame(400, 13).to_parquet(f"tierpool:/{writer}/day1/sub/t.parquet")
    client.detach(writer)

    reader = f"{base}/r"
    done = client.attach(hdfs.uri("day1"), reader, readonly=True)
    assert (done["files"], done["dirs"]) == (2, 1)
    assert client.ls(reader) == ["part-0.bin", "sub"]
    assert client.stat(f"{reader}/part-0.bin").size == len(big)
    assert client.get(f"{reader}/part-0.bin") == big
    pd.testing.assert_frame_equal(pd.read_parquet(f"tierpool:/{reader}/sub/t.parquet"), frame(400, 13))
    assert client.free(reader)["files"] == 2
    with client.open(f"{reader}/part-0.bin", "rb") as f:
        f.seek(1 << 20)
        assert f.read(4096) == big[1 << 20 : (1 << 20) + 4096]
    with pytest.raises(tierpool.ReadOnly, match="attached read-only"):
        client.put(b"x", f"{reader}/nope.txt")
    client.detach(reader)


def test_an_unreachable_namenode_is_named(client: tierpool.Client, base: str) -> None:
    from servers import free_port

    port = free_port()
    with pytest.raises(OSError, match=f"NameNode at 127.0.0.1:{port}"):
        client.attach(f"hdfs://127.0.0.1:{port}/x", f"{base}/n")


def test_pool_paths_seen_by_fsspec_list_attached_store_entries(client: tierpool.Client, base: str, s3: S3) -> None:
    prefix = s3.bucket("listing")
    (prefix / "a").mkdir()
    (prefix / "a" / "x.bin").write_bytes(b"x" * 10)
    (prefix / "y.bin").write_bytes(b"y" * 20)
    at = f"{base}/ls"
    client.attach("s3://listing", at, options=s3.options())
    fs = fsspec.filesystem("tierpool")
    assert sorted(pathlib.PurePosixPath(p).name for p in fs.find(at)) == ["x.bin", "y.bin"]
    assert fs.du(at) == 30
    client.detach(at)


def attached_prefix(client: tierpool.Client, base: str, s3: S3, bucket: str) -> Tuple[pathlib.Path, str]:
    """Objects f0 and f1 (``pattern(1000 + i, seed=i)``) in a new bucket, attached
    at ``base/bucket``: the bucket's directory and the attachment's path."""
    prefix = s3.bucket(bucket) / "p"
    prefix.mkdir(parents=True)
    for i in range(2):
        (prefix / f"f{i}").write_bytes(pattern(1000 + i, seed=i))
    at = f"{base}/{bucket}"
    client.attach(f"s3://{bucket}/p", at, options=s3.options())
    return prefix, at


def test_threads_take_turns_with_an_attached_s3_prefix(client: tierpool.Client, base: str, s3: S3) -> None:
    # Each thread waits on a runtime of its own, which runs only while that
    # thread waits: a connection to the store the first thread opened must
    # still serve the second while the first sits idle.
    prefix, at = attached_prefix(client, base, s3, "turns")
    idle, done = threading.Event(), threading.Event()

    def first() -> None:
        assert client.get(f"{at}/f0") == pattern(1000, seed=0)
        idle.set()
        done.wait(60)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert idle.wait(30)
        with ThreadPoolExecutor(1) as ex:
            second = ex.submit(lambda: (client.get(f"{at}/f1"), client.put(b"late", f"{at}/w")))
            try:
                assert second.result(timeout=30)[0] == pattern(1001, seed=1)
            finally:
                done.set()
    finally:
        done.set()
        t.join()
    assert (prefix / "w").read_bytes() == b"late"


def read_in_child(conn: Any, client: tierpool.Client, path: str) -> None:
    try:
        conn.send(client.get(path))
    except Exception as e:  # reported to the parent
        conn.send(repr(e))
    conn.close()


def test_a_fork_child_reads_an_s3_prefix_its_parent_read(client: tierpool.Client, base: str, s3: S3) -> None:
    # The parent's connections to the store stay with the parent: a child
    # opens its own instead of waiting on one whose task it does not have.
    _, at = attached_prefix(client, base, s3, "forked")
    assert client.get(f"{at}/f0") == pattern(1000, seed=0)
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=read_in_child, args=(theirs, client, f"{at}/f1"))
    child.start()
    theirs.close()
    try:
        assert ours.poll(30), "the child had no answer within 30 s"
        assert ours.recv() == pattern(1001, seed=1)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    assert client.get(f"{at}/f1") == pattern(1001, seed=1)
