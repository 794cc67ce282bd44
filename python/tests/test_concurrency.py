"""Threads share a client and do I/O in parallel: the GIL is released while
a call waits for the pool."""

from __future__ import annotations

import os
import threading
from array import array
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from conftest import pattern

import tierpool


def test_threads_write_and_read_their_own_files_in_parallel(client: tierpool.Client, base: str) -> None:
    def work(i: int) -> bool:
        data = pattern((1 << 20) + i * 4099, seed=100 + i)
        path = f"{base}/f{i}"
        if i % 2:
            with client.open(path, "wb", chunk_size="256KiB") as f:
                for k in range(0, len(data), 100_000):
                    f.write(data[k : k + 100_000])
        else:
            client.put(data, path, chunk_size="256KiB")
        buf = bytearray(len(data))
        with client.open(path, "rb") as f:
            assert f.readinto(buf) == len(data)
        return bytes(buf) == data and client.get(path) == data

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(work, range(16)))
    assert len(client.ls(base)) == 16


def test_threads_read_one_file_through_their_own_readers(client: tierpool.Client, base: str) -> None:
    data = pattern(8 << 20, seed=200)
    client.put(data, f"{base}/shared", chunk_size="1MiB")

    def read_slice(i: int) -> bool:
        start = i * 500_000
        with client.open(f"{base}/shared", "rb") as f:
            f.seek(start)
            return f.read(700_000) == data[start : start + 700_000]

    with ThreadPoolExecutor(6) as ex:
        assert all(ex.map(read_slice, range(16)))


def test_the_gil_is_released_while_reading(client: tierpool.Client, base: str) -> None:
    # While one thread sits in a long native readinto, Python code in another
    # thread keeps running. Were the GIL held, the other thread could not
    # execute a single bytecode during the call, so no tick of its loop could
    # fall in the middle half of the call.
    data = np.random.default_rng(7).integers(0, 256, size=192 << 20, dtype=np.uint8)
    client.put(data, f"{base}/big")
    buf = np.empty_like(data)
    span: list = []
    started = threading.Event()
    done = threading.Event()

    def reader() -> None:
        with client.open(f"{base}/big", "rb") as f:
            started.set()
            t0 = time.perf_counter()
            f.readinto(buf)
            span.extend([t0, time.perf_counter()])
        done.set()

    ticks = array("d")
    t = threading.Thread(target=reader)
    t.start()
    started.wait()
    while not done.is_set():
        ticks.append(time.perf_counter())
    t.join()
    assert np.array_equal(buf, data)
    t0, t1 = span
    assert t1 - t0 > 0.01, "the read was too quick to tell"
    lo, hi = t0 + (t1 - t0) / 4, t1 - (t1 - t0) / 4
    during = sum(1 for x in ticks if lo < x < hi)
    assert during > 100, (during, t1 - t0)


def test_a_file_a_thread_began_writing_before_it_ended_is_finished_by_another(
    client: tierpool.Client, base: str
) -> None:
    # Each thread waits on a runtime of its own, which ends with the thread:
    # chunks still being sent when it ends must not end with it.
    data = pattern((3 << 20) + 11, seed=300)
    opened = {}

    def begin() -> None:
        f = client.open(f"{base}/handed", "wb", chunk_size="256KiB", buffering=0)
        f.write(data[: 1 << 20])
        opened["f"] = f

    t = threading.Thread(target=begin)
    t.start()
    t.join()
    f = opened["f"]
    f.write(data[1 << 20 :])
    f.close()
    assert client.get(f"{base}/handed") == data


def open_sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return n


def test_threads_that_come_and_go_leave_no_connections_behind(client: tierpool.Client, base: str) -> None:
    # Each thread's runtime opens connections of its own; when the thread
    # ends, the next call to each server closes them.
    counts = []
    for r in range(5):
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(lambda i: client.put(pattern(5000 + i, seed=i), f"{base}/r{r}-{i}"), range(8)))
        client.put(pattern(9000, seed=r), f"{base}/main{r}")
        assert client.get(f"{base}/main{r}") == pattern(9000, seed=r)
        counts.append(open_sockets())
    # The count is the whole process's: another client's background work (a
    # renewal, a change feed) may hold a connection more at one moment. Left
    # open, each round's four threads would add a dozen (20, 32, 44, 56, 68).
    assert max(counts[1:]) <= counts[0] + 2, f"sockets open after each round: {counts}"
    assert sorted(client.ls(base)) == sorted([f"r{r}-{i}" for r in range(5) for i in range(8)] + [f"main{r}" for r in range(5)])
    assert all(client.get(f"{base}/r4-{i}") == pattern(5000 + i, seed=i) for i in range(8))
