"""Memory regions from Python: allocation, bytes at any offset, dirty-page
write-back, numpy arrays over regions larger than the process may hold."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tierpool

MIB = 1 << 20
PAGE = 4096


def test_alloc_read_write_flush_and_reopen(client: tierpool.Client, base: str) -> None:
    path = f"{base}/r"
    size = 10 * MIB + 123
    rng = np.random.default_rng(5)
    model = bytearray(size)
    with client.alloc(path, size, cache="2MiB", chunk_size="1MiB") as r:
        assert (r.path, r.size, r.chunk_size, len(r)) == (path, size, MIB, size)
        assert r.read(size - 10, 10) == bytes(10), "a new region is zero-filled"
        for _ in range(300):
            off = int(rng.integers(0, size))
            n = int(rng.integers(0, min(3 * PAGE + 5, size - off) + 1))
            if rng.random() < 0.5:
                data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                r.write(off, data)
                model[off : off + n] = data
            else:
                assert r.read(off, n) == bytes(model[off : off + n])
    info = client.stat(path)
    assert (info.kind, info.size, info.chunks) == ("region", size, 11)
    with client.region(path, cache="4MiB") as r:
        back = bytearray(size)
        assert r.readinto(0, back) == size
        assert back == model
        assert set(r.stats()) == {"bytes_fetched", "bytes_written_back", "cache_hits", "cache_misses", "chunks_written_back"}
    assert [e.name for e in client.ls(base, detail=True) if e.kind == "region"] == ["r"]


def test_only_dirty_pages_are_written_back(client: tierpool.Client, base: str) -> None:
    r = client.alloc(f"{base}/w", 64 * MIB, cache="64MiB")
    rng = np.random.default_rng(1)
    offsets = sorted({int(x) for x in rng.integers(0, 64 * MIB, 500)})
    for off in offsets:
        r.write(off, b"\x01")
    r.flush()
    pages = {off // PAGE for off in offsets}
    st = r.stats()
    assert st["bytes_written_back"] == len(pages) * PAGE
    assert st["bytes_fetched"] < 64 * MIB // 20, "pages are fetched, not chunks"
    r.close()
    with client.open(f"{base}/w", "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    assert np.flatnonzero(data).tolist() == offsets


def test_as_array_writes_reach_the_pool(client: tierpool.Client, base: str) -> None:
    path = f"{base}/a"
    r = client.alloc(path, 48 * MIB, cache="8MiB", chunk_size="1MiB")
    a = r.as_array("float64", (6 * MIB // 8, 8))
    assert a.shape == (786432, 8) and a.flags.writeable and float(a.sum()) == 0.0
    a[:, 3] = np.arange(a.shape[0])
    a[-1, -1] = 7.5
    r.close()  # flushes; `a` keeps its memory
    assert a[100, 3] == 100.0
    del a
    r2 = client.region(path, cache="4MiB")
    b = r2.as_array("float64", (6 * MIB // 8, 8))
    assert np.array_equal(b[:, 3], np.arange(b.shape[0]))
    assert b[-1, -1] == 7.5 and float(b[:, :3].sum()) == 0.0
    with pytest.raises(BufferError):
        r2.free()
    del b
    r2.free()
    with pytest.raises(FileNotFoundError):
        client.stat(path)


def test_pool_full_at_allocation_is_enospc_and_leaves_nothing() -> None:
    with tierpool.local(workers=1, mem="8MiB", disk="8MiB") as c:
        with pytest.raises(OSError) as ei:
            c.alloc("/big", "64MiB", chunk_size="1MiB")
        assert ei.value.errno == errno.ENOSPC
        msg = str(ei.value)
        assert msg.startswith("[Errno 28] /big: pool full: cannot reserve 64MiB: worker memory (8MiB of 8MiB used)"), msg
        w = c.status()["workers"][0]
        assert (w["mem"]["used"], w["disk"]["used"]) == (0, 0)
        with pytest.raises(FileNotFoundError):
            c.stat("/big")
        with pytest.raises(FileExistsError):
            c.alloc("/x", "1MiB")
            c.alloc("/x", "1MiB")


def _memory_cgroup(limit: int) -> str | None:
    root = "/sys/fs/cgroup/memory"
    if not os.access(root, os.W_OK):
        return None
    path = os.path.join(root, f"tierpool-pytest-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))
    return path


def test_numpy_on_a_region_four_times_the_memory_limit(client: tierpool.Client, base: str) -> None:
    limit = 160 * MIB
    cg = _memory_cgroup(limit)
    if cg is None:
        pytest.skip("needs a writable cgroup v1 memory controller (root)")
    path = f"{base}/big"
    size = 640 * MIB
    script = textwrap.dedent(
        f"""
        import numpy as np, tierpool
        c = tierpool.connect()
        r = c.alloc({path!r}, {size}, cache="32MiB")
        a = r.as_array("int64")
        step = 1 << 20
        for i in range(0, a.size, step):         # fill, one MiB of items at a time
            a[i:i + step] = np.arange(i, min(i + step, a.size))
        total = 0
        for i in range(0, a.size, step):         # read back
            total += int(a[i:i + step].sum())
        n = a.size
        assert total == n * (n - 1) // 2, total
        r.close()
        print("ok", n, r.stats()["bytes_written_back"])
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=lambda: open(os.path.join(cg, "cgroup.procs"), "w").write(str(os.getpid())),
        )
        with open(os.path.join(cg, "memory.max_usage_in_bytes")) as f:
            peak = int(f.read())
    finally:
        os.rmdir(cg)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok {size // 8} "), proc.stdout
    assert peak <= limit < size // 4 + 1
    # The pool holds what the process computed.
    with client.region(path, cache="16MiB") as r:
        tail = np.frombuffer(r.read(size - 16, 16), dtype=np.int64)
        assert tail.tolist() == [size // 8 - 2, size // 8 - 1]


def test_read_only_openers_on_one_machine_share_pages(client: tierpool.Client, base: str, tmp_path) -> None:
    path = f"{base}/shared"
    size = 24 * MIB
    with client.alloc(path, size, cache="32MiB") as r:
        r.as_array("uint32")[:] = np.arange(size // 4, dtype=np.uint32)
    reader = textwrap.dedent(
        """
        import os, sys, time, numpy as np, tierpool
        path, role, sync = sys.argv[1], sys.argv[2], sys.argv[3]
        r = tierpool.connect().region(path, cache="32MiB", readonly=True)
        a = r.as_array("uint32")
        assert not a.flags.writeable and r.readonly
        assert int(a[::1024].astype(np.int64).sum()) == int(np.arange(0, a.size, 1024, dtype=np.int64).sum())
        try:
            r.write(0, b"x")
            raise SystemExit("a read-only region accepted a write")
        except ValueError:
            pass
        print("fetched", r.stats()["bytes_fetched"], flush=True)
        if role == "first":
            open(os.path.join(sync, "ready"), "w").close()
            while not os.path.exists(os.path.join(sync, "done")):
                time.sleep(0.01)
        else:
            open(os.path.join(sync, "done"), "w").close()
        """
    )
    first = subprocess.Popen([sys.executable, "-c", reader, path, "first", str(tmp_path)], stdout=subprocess.PIPE, text=True)
    for _ in range(3000):
        if (tmp_path / "ready").exists() or first.poll() is not None:
            break
        import time

        time.sleep(0.01)
    second = subprocess.run([sys.executable, "-c", reader, path, "second", str(tmp_path)], capture_output=True, text=True, timeout=120)
    out_first = first.communicate(timeout=120)[0]
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    fetched = [int(o.split()[1]) for o in (out_first, second.stdout)]
    assert fetched[0] >= size // 2, fetched
    assert fetched[1] == 0, f"the second reader fetched {fetched[1]} bytes the first had already"
