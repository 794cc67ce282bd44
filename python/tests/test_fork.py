"""Processes made by fork(), forkserver and spawn use the pool like any
other; objects a fork child inherits either reconnect (clients) or refuse
with a clear error (open files, regions), and the parent is never disturbed.

Each child reports through a pipe and is joined with a deadline, so a child
that hangs fails its test instead of blocking the suite.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Tuple

import numpy as np
import pytest
from conftest import pattern

import tierpool

#: Longest a child may take before it counts as hung.
CHILD_DEADLINE = 60

pytestmark = pytest.mark.timeout(300)


def run_child(method: str, target: Callable[..., None], *args: Any) -> Tuple[int, List[Any]]:
    """Runs ``target(conn, *args)`` in a child started by ``method``; returns
    its exit code and everything it sent through ``conn``."""
    ctx = multiprocessing.get_context(method)
    ours, theirs = ctx.Pipe()
    p = ctx.Process(target=target, args=(theirs, *args))
    p.start()
    theirs.close()
    got: List[Any] = []
    deadline = time.monotonic() + CHILD_DEADLINE
    # Until the child closes its end (by exiting) or the deadline passes.
    while time.monotonic() < deadline:
        if not ours.poll(0.1):
            continue
        try:
            got.append(ours.recv())
        except EOFError:
            break
    p.join(max(0.1, deadline - time.monotonic()))
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail(f"the {method} child hung for {CHILD_DEADLINE} s; it said {got}")
    return p.exitcode, got


@contextmanager
def busy_parent(client: tierpool.Client, path: str) -> Iterator[List[int]]:
    """A thread of the parent reading ``path`` back in a loop meanwhile (so
    the fork happens with I/O in flight); checks every read on the way out."""
    data = pattern(3 << 20, seed=77)
    client.put(data, path, chunk_size="1MiB")
    stop = threading.Event()
    rounds = [0]
    errors: List[BaseException] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                with client.open(path, "rb") as f:
                    assert f.read() == data
                assert client.get(path) == data
            except BaseException as e:  # reported below
                errors.append(e)
                return
            rounds[0] += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    while rounds[0] == 0 and not errors and t.is_alive():
        time.sleep(0.01)
    try:
        yield rounds
    finally:
        stop.set()
        t.join(CHILD_DEADLINE)
    assert not t.is_alive(), "the parent's reader hung"
    assert not errors, errors
    assert rounds[0] > 0


def child_round_trip(conn: Any, inherited: tierpool.Client, base: str, seed: int) -> None:
    """Writes with the parent's client (inherited, or unpickled as its
    address), reads back with a fresh connection, and reports."""
    try:
        data = pattern((2 << 20) + seed, seed=seed)
        inherited.put(data, f"{base}/from-{seed}", chunk_size="1MiB")
        fresh = tierpool.connect()
        with fresh.open(f"{base}/from-{seed}", "rb") as f:
            back = f.read()
        fresh.put(back[::-1], f"{base}/reversed-{seed}")
        conn.send(("ok", os.getpid(), back == data, sorted(inherited.ls(base))))
    except BaseException as e:
        conn.send(("error", repr(e)))
        raise


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_children_connect_write_and_read_back_exact_bytes(client: tierpool.Client, base: str, method: str) -> None:
    with busy_parent(client, f"{base}/busy") as rounds:
        before = rounds[0]
        code, said = run_child(method, child_round_trip, client, base, 11)
        assert code == 0 and said and said[0][0] == "ok", said
        _, pid, same, names = said[0]
        assert pid != os.getpid() and same
        assert "from-11" in names
        # The parent's thread kept reading while the child worked.
        assert rounds[0] > before
    data = pattern((2 << 20) + 11, seed=11)
    assert client.get(f"{base}/from-11") == data
    assert client.get(f"{base}/reversed-11") == data[::-1]


def child_forks_again(conn: Any, inherited: tierpool.Client, base: str) -> None:
    try:
        inherited.put(b"child", f"{base}/child")
        code, said = run_child("fork", child_round_trip, inherited, base, 12)
        conn.send(("ok", code, said))
    except BaseException as e:
        conn.send(("error", repr(e)))
        raise


def test_a_fork_child_of_a_fork_child_reconnects_too(client: tierpool.Client, base: str) -> None:
    code, said = run_child("fork", child_forks_again, client, base)
    assert code == 0 and said[0][0] == "ok", said
    _, grandchild_code, grandchild_said = said[0]
    assert grandchild_code == 0 and grandchild_said[0][0] == "ok" and grandchild_said[0][2], grandchild_said
    assert client.get(f"{base}/child") == b"child"
    assert client.get(f"{base}/from-12") == pattern((2 << 20) + 12, seed=12)


def try_each(conn: Any, calls: List[Tuple[str, Callable[[], Any]]]) -> None:
    """Sends, for each named call, what it raised and how long it took."""
    for name, call in calls:
        t0 = time.monotonic()
        try:
            call()
            conn.send((name, None, None, None, time.monotonic() - t0))
        except BaseException as e:
            conn.send((name, type(e).__name__, getattr(e, "errno", None), str(e), time.monotonic() - t0))


def test_inherited_open_files_are_refused_quickly_in_a_fork_child(client: tierpool.Client, base: str) -> None:
    data = pattern(5 << 20, seed=3)
    client.put(data, f"{base}/in", chunk_size="1MiB")
    reader = client.open(f"{base}/in", "rb")
    assert reader.read(10) == data[:10]
    writer = client.open(f"{base}/out", "wb")
    writer.write(b"parent's ")
    calls = [
        ("read", lambda: reader.read()),
        ("readinto", lambda: reader.readinto(bytearray(3 << 20))),
        ("write", lambda: (writer.write(bytes(2 << 20)), writer.flush())),
        ("close", lambda: writer.close()),
        ("connect", lambda: client.put(b"child", f"{base}/child-was-here")),
    ]
    with busy_parent(client, f"{base}/busy"):
        code, said = run_child("fork", try_each, calls)
    assert code == 0, said
    results = {name: rest for name, *rest in said}
    parent = os.getpid()
    for name in ["read", "readinto", "write", "close"]:
        kind, err, message, took = results[name]
        assert kind == "Io", (name, results[name])
        assert err == errno.EIO
        assert f"was opened in process {parent} before a fork" in message and "open it again" in message
        assert took < 5, (name, took)
    assert results["connect"][0] is None, "a client reconnects; only open files are refused"
    # The parent's objects still work, and the child published nothing.
    assert reader.read() == data[10:]
    reader.close()
    assert not client.exists(f"{base}/out")
    writer.write(b"file")
    writer.close()
    assert client.get(f"{base}/out") == b"parent's file"
    assert client.get(f"{base}/child-was-here") == b"child"


def test_inherited_regions_are_refused_and_their_memory_is_not_inherited(client: tierpool.Client, base: str) -> None:
    r = client.alloc(f"{base}/r", 8 << 20, cache="4MiB", chunk_size="1MiB")
    r.write(0, b"parent")
    try:
        arr = r.as_array("uint8")
    except ValueError:
        pytest.skip("no userfaultfd here: regions are not memory")
    assert bytes(arr[:6]) == b"parent"
    calls = [
        ("read", lambda: r.read(0, 6)),
        ("write", lambda: r.write(0, b"child!")),
        ("flush", lambda: r.flush()),
        ("as_array", lambda: r.as_array("uint8")),
    ]
    code, said = run_child("fork", try_each, calls)
    assert code == 0, said
    for name, kind, err, message, _ in said:
        assert (kind, err) == ("Io", errno.EIO), (name, message)
        assert f"{base}/r was opened in process {os.getpid()} before a fork" in message

    def touch(conn: Any) -> None:
        import faulthandler

        faulthandler.disable()  # the crash is expected: no traceback dump
        conn.send("touching")
        conn.send(int(arr[4 << 20]))

    code, said = run_child("fork", touch)
    assert code == -signal.SIGSEGV and said == ["touching"], (code, said)
    # The parent's region is as it was.
    arr[6:8] = [33, 33]
    r.close()
    del arr
    with client.region(f"{base}/r") as again:
        assert again.read(0, 8) == b"parent!!"


def child_stops_the_pool(conn: Any, pool: Any) -> None:
    pool.stop()
    del pool
    conn.send("done")


def test_a_fork_child_leaves_its_parents_local_pool_running() -> None:
    pool = tierpool.local(workers=1, mem="16MiB", disk="64MiB", set_env=False)
    with pool as c:
        c.put(b"kept", "/kept")
        code, said = run_child("fork", child_stops_the_pool, pool)
        assert code == 0 and said == ["done"]
        assert c.get("/kept") == b"kept"
        assert c.status()["workers"][0]["alive"]
