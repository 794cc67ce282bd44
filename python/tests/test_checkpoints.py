"""Checkpoints of memory regions from Python: a checkpoint copies only the
chunks changed since the previous one, opens read-only as a region (and
reads through fsspec), a restore rolls the region back, refused while
the region is open, and a checkpoint copied beneath an attachment is
persisted in its under-store."""

from __future__ import annotations

import errno
import pathlib

import fsspec
import numpy as np
import pytest

import tierpool

MIB = 1 << 20


def test_checkpoints_are_incremental_read_only_and_restore(client: tierpool.Client, base: str) -> None:
    path = f"{base}/grid"
    with client.alloc(path, 16 * MIB, cache="4MiB", chunk_size="1MiB") as r:
        a = r.as_array("float64")
        a[:] = np.arange(a.size, dtype="float64")
        first = bytes(a)
        rep = r.checkpoint("step1")
        copies = client.stat(path).replicas  # every replica's worker copies its own
        assert (rep["name"], rep["chunks"], rep["copied"], rep["since"]) == ("step1", 16, 16, None)
        assert rep["bytes_copied"] == 16 * MIB * copies

        # One element of chunk 3 and one of chunk 9 change: two chunks are copied.
        a[3 * MIB // 8] = -1.0
        a[9 * MIB // 8 + 5] = -2.0
        second = bytes(a)
        rep = r.checkpoint("step2")
        assert (rep["copied"], rep["bytes_copied"], rep["since"]) == (2, 2 * MIB * copies, "step1")
        with pytest.raises(FileExistsError, match="a snapshot of that name exists"):
            r.checkpoint("step2")

        a[:] = 0.0
        r.flush()
        # Checkpoints open read-only, as regions, and read as files.
        with client.region(path, checkpoint="step1", cache="2MiB") as c:
            assert c.readonly
            assert c.read(0, c.size) == first
            with pytest.raises(tierpool.TierpoolError):
                c.write(0, b"x")
        assert client.get(f"{path}/.snapshots/step2") == second
        assert fsspec.filesystem("tierpool").cat(f"{path}/.snapshots/step1") == first
        sums = {s["name"]: s for s in client.snapshots(path)}
        assert sorted(sums) == ["step1", "step2"]

        # Refused by path while this handle is open; the handle itself
        # rolls back, its arrays included, dropping unflushed writes.
        with pytest.raises(tierpool.Busy) as e:
            client.restore_region(path, "step2")
        assert e.value.errno == errno.EBUSY
        a[7] = 99.0
        rep = r.restore("step1")
        assert (rep["name"], rep["copied"], rep["since"]) == ("step1", 16, None)
        assert bytes(a) == first and a[7] == 7.0
        with client.region(path, cache="2MiB") as other:
            with pytest.raises(tierpool.Busy, match="open in this client"):
                r.restore("step2")
        del a

    rep = client.restore_region(path, "step2")
    assert (rep["chunks"], rep["copied"]) == (16, 2), "step1 and step2 differ in two chunks"
    with client.region(path, cache="2MiB") as r:
        assert r.read(0, r.size) == second
    # The snapshot API takes checkpoints too.
    client.snapshot_restore(path, "step1")
    assert client.get(path) == first
    with pytest.raises(FileNotFoundError, match="no such snapshot"):
        client.restore_region(path, "nope")
    client.snapshot_remove(path, "step1")
    client.snapshot_remove(path, "step2")
    assert client.snapshots(path) == []


def test_a_checkpoint_copied_beneath_an_attachment_is_persisted(
    client: tierpool.Client, base: str, tmp_path: pathlib.Path
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    lake = f"{base}/lake"
    client.attach(f"file://{store}", lake)  # written through
    path = f"{base}/grid"
    with client.alloc(path, 3 * MIB, cache="2MiB", chunk_size="1MiB") as r:
        first = bytes(range(256)) * (3 * MIB // 256)
        r.write(0, first)
        r.checkpoint("step1")
        r.write(MIB, b"later" * 1000)
        r.checkpoint("step2")
    fs = fsspec.filesystem("tierpool")
    fs.cp_file(f"{path}/.snapshots/step1", f"{lake}/grid-step1.bin")
    # In the under-store, byte for byte: it outlives the pool.
    assert (store / "grid-step1.bin").read_bytes() == first
    assert client.get(f"{lake}/grid-step1.bin") == first
    # And back into a region: a new one holds the checkpoint again.
    with client.alloc(f"{base}/again", 3 * MIB, cache="2MiB", chunk_size="1MiB") as again:
        again.write(0, (store / "grid-step1.bin").read_bytes())
        again.flush()
    assert client.get(f"{base}/again") == first
