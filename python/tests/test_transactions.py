"""Transactions from Python: reads see the pool as it was when the
transaction began, writes and changes of the namespace become visible
together at commit, the first committer wins (``tierpool.Conflict``), a
task id commits once, counters incremented from many threads under
retries lose no update, and pages of memory regions commit with files."""

from __future__ import annotations

import errno
import pathlib
import threading

import pytest

import tierpool


def test_a_transaction_commits_all_its_files_at_once(client: tierpool.Client, base: str) -> None:
    a, b = f"{base}/a", f"{base}/b"
    client.put(b"alpha", a)
    client.put(b"beta", b)
    reader = client.transaction()
    with client.transaction() as tx:
        tx.write(a, b"A", 0)
        tx.append(b, b"!")
        assert tx.read(a) == b"Alpha"
        assert tx.read(b, 2, 10) == b"ta!"
        assert client.get(a) == b"alpha", "invisible to others until it commits"
    assert tx.committed is True
    assert (client.get(a), client.get(b)) == (b"Alpha", b"beta!")
    # Begun before the commit: still the old bytes, however often it reads.
    assert (reader.read(a), reader.read(b), reader.size(b)) == (b"alpha", b"beta", 4)
    assert reader.commit() is True, "read-only transactions never conflict"


def test_an_exception_aborts_and_nothing_is_visible(client: tierpool.Client, base: str) -> None:
    a = f"{base}/a"
    client.put(b"kept", a)
    with pytest.raises(RuntimeError):
        with client.transaction() as tx:
            tx.write(a, b"gone")
            raise RuntimeError("changed my mind")
    assert tx.committed is None and tx.ended
    assert client.get(a) == b"kept"
    with pytest.raises(IsADirectoryError, match="transactions read and write files and regions only"):
        client.transaction().read(base)
    with pytest.raises(FileNotFoundError):
        client.transaction().write(f"{base}/no/such/dir/x", b"x")


def test_the_first_committer_wins(client: tierpool.Client, base: str) -> None:
    a = f"{base}/a"
    client.put(b"0", a)
    t1, t2 = client.transaction(), client.transaction()
    t1.write(a, b"1")
    t2.read(a)
    assert t1.commit() is True
    with pytest.raises(tierpool.Conflict) as e:
        t2.write(a, b"2")
    assert isinstance(e.value, OSError) and e.value.errno == errno.ECANCELED
    assert "first committer wins" in str(e.value)
    assert t2.ended
    with pytest.raises(tierpool.Conflict, match="has ended"):
        t2.commit()
    assert client.get(a) == b"1"


def test_of_the_attempts_at_one_task_exactly_one_commits(client: tierpool.Client, base: str) -> None:
    out = f"{base}/part-0"
    client.put(b"", out)
    attempts = [client.transaction(task_id=f"{base}/map-0") for _ in range(3)]
    for i, tx in enumerate(attempts):
        tx.write(out, f"attempt {i}".encode())
    results = []
    for tx in attempts:
        with tx:
            pass
        results.append(tx.committed)
    assert results == [True, False, False]
    assert client.get(out) == b"attempt 0"
    with pytest.raises(ValueError, match="a task id is 1 to 256 bytes"):
        client.transaction().commit(task_id="x" * 257)


def test_counters_incremented_from_threads_lose_no_update(client: tierpool.Client, base: str) -> None:
    counters = [f"{base}/c{i}" for i in range(2)]
    for c in counters:
        client.put(b"0", c)
    per_thread, threads = 15, 4
    conflicts = []

    def work(seed: int) -> None:
        for n in range(per_thread):
            c = counters[(seed + n) % 2]
            while True:
                try:
                    with client.transaction() as tx:
                        v = int(tx.read(c))
                        tx.truncate(c, 0)
                        tx.write(c, str(v + 1).encode())
                    break
                except tierpool.Conflict:
                    conflicts.append(1)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sum(int(client.get(c)) for c in counters) == per_thread * threads
    assert conflicts, "the threads contended (else this proves nothing)"


def test_files_opened_in_a_transaction(client: tierpool.Client, base: str) -> None:
    a = f"{base}/a"
    client.put(b"0123456789", a)
    with client.transaction() as tx:
        with tx.open(a, "r+b") as f:
            assert f.read(4) == b"0123"
            f.seek(-2, 2)
            f.write(b"XYZ")
            f.seek(0)
            assert f.read() == b"01234567XYZ"
        with tx.open(a, "ab") as f:
            f.write(b"!")
        with tx.open(a) as f:
            assert f.read() == b"01234567XYZ!"
            with pytest.raises(OSError, match="not open for writing"):
                f.write(b"x")
        with tx.open(a, "wb") as f:
            f.write(b"fresh")
        assert client.get(a) == b"0123456789"
    assert client.get(a) == b"fresh"
    with pytest.raises(ValueError, match="a transaction opens files"):
        client.transaction().open(a, "w")


def test_new_files_directories_removals_and_moves_commit_together(client: tierpool.Client, base: str) -> None:
    client.put(b"input", f"{base}/in.csv")
    client.put(b"stale", f"{base}/stale")
    with client.transaction() as tx:
        tx.mkdir(f"{base}/out")
        with tx.open(f"{base}/out/part-0", "wb") as f:
            f.write(b"rows 0-9\n")
        with tx.open(f"{base}/out/part-0", "ab") as f:
            f.write(b"rows 10-19\n")
        tx.mv(f"{base}/in.csv", f"{base}/out/in.csv")
        tx.rm(f"{base}/stale")
        assert tx.exists(f"{base}/out/part-0") and not tx.exists(f"{base}/in.csv")
        assert tx.read(f"{base}/out/in.csv") == b"input"
        with pytest.raises(FileExistsError):
            tx.mkdir(f"{base}/out")
        with pytest.raises(FileExistsError):
            tx.open(f"{base}/out/part-0", "xb")
        with pytest.raises(FileNotFoundError):
            tx.open(f"{base}/stale", "rb")
        assert not client.exists(f"{base}/out"), "invisible to others until it commits"
    assert tx.committed is True
    assert client.get(f"{base}/out/part-0") == b"rows 0-9\nrows 10-19\n"
    assert client.get(f"{base}/out/in.csv") == b"input"
    assert not client.exists(f"{base}/in.csv") and not client.exists(f"{base}/stale")
    # Two jobs writing the same marker: the first committer wins.
    t1, t2 = client.transaction(), client.transaction()
    t1.write(f"{base}/out/_SUCCESS", b"1")
    t2.write(f"{base}/out/_SUCCESS", b"2")
    assert t1.commit() is True
    with pytest.raises(tierpool.Conflict, match="was made, removed or replaced"):
        t2.commit()
    assert client.get(f"{base}/out/_SUCCESS") == b"1"
    # A removal of a directory left with an entry fails the whole commit.
    with pytest.raises(OSError) as e:
        with client.transaction() as tx:
            tx.write(f"{base}/out/part-0", b"ROWS")
            tx.mkdir(f"{base}/out/sub")
            tx.rm(f"{base}/out/sub")
            tx.write(f"{base}/out/sub2", b"x")
            tx.rm(f"{base}/out/_SUCCESS")
            tx.rm(f"{base}/out/in.csv")
            tx.rm(f"{base}/out/sub2")
            tx.mkdir(f"{base}/out/keep")
            tx.rm(f"{base}/out")
    assert e.value.errno == errno.ENOTEMPTY
    assert client.get(f"{base}/out/part-0") == b"rows 0-9\nrows 10-19\n"
    assert not client.exists(f"{base}/out/keep")


PAGE = 4096


def test_region_pages_commit_with_files_and_readers_keep_their_snapshot(client: tierpool.Client, base: str) -> None:
    m, f = f"{base}/m", f"{base}/f"
    size = 3 * PAGE + 10
    client.alloc(m, size, cache="1MiB", chunk_size="1MiB").close()
    client.put(b"v0", f)
    reader = client.transaction()
    assert reader.region(m).read(PAGE - 6, 10) == bytes(10)
    with client.transaction() as tx:
        g = tx.region(m)
        assert (len(g), g.size) == (size, size)
        assert g.write(PAGE - 6, b"0123456789") == 10
        tx.write(f, b"v1")
        assert g.read(PAGE - 8, 14) == b"\0\0" + b"0123456789" + b"\0\0"
        assert client.get(m)[PAGE - 6 : PAGE + 4] == bytes(10), "invisible to others until it commits"
    assert tx.committed is True
    assert (client.get(m)[PAGE - 6 : PAGE + 4], client.get(f)) == (b"0123456789", b"v1")
    with client.region(m, cache="1MiB") as r:
        assert r.read(PAGE - 6, 10) == b"0123456789", "a region opened after the commit holds its pages"
    # Begun before: its snapshot, and a conflict if it writes a page the commit wrote.
    assert reader.region(m).read(PAGE - 6, 10) == bytes(10)
    assert reader.region(m).read() == bytes(size)
    with pytest.raises(tierpool.Conflict, match="page 1 was rewritten"):
        reader.region(m).write(PAGE + 100, b"x")
    t = client.transaction()
    with pytest.raises(tierpool.InvalidArgument, match="ends past the region"):
        t.region(m).write(size - 5, b"123456")
    with pytest.raises(tierpool.InvalidArgument, match="is not a region"):
        t.region(f)
    with pytest.raises(tierpool.InvalidArgument, match="is a region"):
        t.read(m)
    with pytest.raises(FileNotFoundError):
        t.region(f"{base}/nothing")
    t.abort()


def test_region_counters_incremented_from_threads_lose_no_update(client: tierpool.Client, base: str) -> None:
    m = f"{base}/counters"
    client.alloc(m, 2 * PAGE, cache="1MiB", chunk_size="1MiB").close()
    per_thread, threads = 10, 4
    conflicts = []

    def work(seed: int) -> None:
        for n in range(per_thread):
            at = ((seed + n) % 2) * PAGE
            while True:
                try:
                    with client.transaction() as tx:
                        r = tx.region(m)
                        v = int.from_bytes(r.read(at, 8), "little")
                        r.write(at, (v + 1).to_bytes(8, "little"))
                    break
                except tierpool.Conflict:
                    conflicts.append(1)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    got = client.get(m)
    assert int.from_bytes(got[:8], "little") + int.from_bytes(got[PAGE : PAGE + 8], "little") == per_thread * threads
    assert conflicts, "the threads contended (else this proves nothing)"


def test_files_of_an_under_store_commit_to_it_and_snapshots_keep_their_bytes(
    client: tierpool.Client, base: str, tmp_path: pathlib.Path
) -> None:
    store = tmp_path / "store"
    (store / "d").mkdir(parents=True)
    (store / "d" / "n.txt").write_bytes(b"1".ljust(8))
    lake = f"{base}/lake"
    client.attach(f"file://{store}", lake)  # written through
    reader = client.transaction()
    with client.transaction() as tx:
        n = int(tx.read(f"{lake}/d/n.txt"))
        tx.write(f"{lake}/d/n.txt", str(n + 1).encode().ljust(8))
        tx.write(f"{lake}/d/made.txt", b"made")
        assert (store / "d" / "n.txt").read_bytes() == b"1".ljust(8)
    # Committed: in the store once the block is left.
    assert (store / "d" / "n.txt").read_bytes() == b"2".ljust(8)
    assert (store / "d" / "made.txt").read_bytes() == b"made"
    # The reader began before: its object below is gone, which it says.
    with pytest.raises(tierpool.Stale, match="as this transaction sees it"):
        reader.read(f"{lake}/d/n.txt")
    reader.abort()
    tx = client.transaction()
    tx.mkdir(f"{lake}/d/sub")
    with pytest.raises(tierpool.InvalidArgument, match="whose store makes, removes and moves names first"):
        tx.commit()

    # A snapshot of the store's tree keeps the pool's bytes; restoring it
    # puts the store back too.
    client.snapshot_create(f"{lake}/d", "s")
    client.put(b"changed", f"{lake}/d/n.txt")
    client.free(f"{lake}/d")
    assert client.get(f"{lake}/d/.snapshots/s/n.txt") == b"2".ljust(8)
    client.snapshot_restore(f"{lake}/d", "s")
    assert (store / "d" / "n.txt").read_bytes() == b"2".ljust(8)
    assert client.get(f"{lake}/d/n.txt") == b"2".ljust(8)
