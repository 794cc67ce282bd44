"""Client.open: standard io objects for reading, writing, appending and
exclusive creation, in binary and text."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import pattern

import tierpool


def test_read_mode_gives_a_seekable_buffered_reader(client: tierpool.Client, base: str) -> None:
    data = pattern(3 << 20, seed=1)
    client.put(data, f"{base}/f", chunk_size="1MiB")
    with client.open(f"{base}/f", "rb") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.readable() and f.seekable() and not f.writable()
        assert f.name == f"{base}/f"
        assert f.read(10) == data[:10]
        assert f.tell() == 10
        assert f.seek(-5, io.SEEK_END) == len(data) - 5
        assert f.read() == data[-5:]
        assert f.read() == b""
        f.seek(1_048_570)  # across a chunk boundary
        assert f.read(20) == data[1_048_570:1_048_590]
        f.seek(0)
        assert f.read() == data
    assert f.closed
    with pytest.raises(ValueError):
        f.read()


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "numpy", "numpy-float64"])
def test_readinto_fills_any_writable_buffer(client: tierpool.Client, base: str, kind: str) -> None:
    data = pattern((9 << 20) + 5, seed=2)
    client.put(data, f"{base}/f", chunk_size="1MiB")
    n = len(data)
    if kind == "bytearray":
        buf = bytearray(n)
        view = memoryview(buf)
    elif kind == "memoryview":
        backing = bytearray(n + 10)
        buf = memoryview(backing)[10:]
        view = buf
    elif kind == "numpy":
        buf = np.zeros(n, dtype=np.uint8)
        view = memoryview(buf)
    else:
        arr = np.zeros((n + 7) // 8, dtype=np.float64)
        buf = arr
        view = memoryview(arr).cast("B")
    with client.open(f"{base}/f", "rb") as f:
        assert f.readinto(buf) == n
        assert f.readinto(buf) == 0
    assert bytes(view[:n]) == data


def test_readinto_refuses_read_only_buffers(client: tierpool.Client, base: str) -> None:
    client.put(b"abc", f"{base}/f")
    with client.open(f"{base}/f", "rb", buffering=0) as f:
        with pytest.raises((TypeError, BufferError)):
            f.readinto(b"xyz")


def test_small_sequential_reads_return_every_byte(client: tierpool.Client, base: str) -> None:
    data = pattern(2 << 20, seed=6)
    client.put(data, f"{base}/f", chunk_size="256KiB")
    out = bytearray()
    with client.open(f"{base}/f", "rb", buffering=4096) as f:
        while True:
            block = f.read(1000)
            if not block:
                break
            out += block
    assert out == data


def test_a_reader_keeps_the_version_it_opened(client: tierpool.Client, base: str) -> None:
    client.put(b"old" * 1000, f"{base}/f")
    with client.open(f"{base}/f", "rb") as f:
        client.put(b"new", f"{base}/f")
        assert f.read() == b"old" * 1000
    assert client.get(f"{base}/f") == b"new"


def test_write_mode_publishes_on_close_only(client: tierpool.Client, base: str) -> None:
    data = pattern((5 << 20) + 3, seed=7)
    with client.open(f"{base}/w", "wb", chunk_size="1MiB", priority=4, pin=True) as f:
        assert isinstance(f, io.BufferedWriter) and f.writable() and not f.readable()
        f.write(data[:100])
        f.write(memoryview(data)[100:])
        assert f.tell() == len(data)
        assert not client.exists(f"{base}/w")
    assert f.info is not None and f.info.size == len(data)
    st = client.stat(f"{base}/w")
    assert (st.size, st.chunk_size, st.priority, st.pinned) == (len(data), 1 << 20, 4, True)
    assert client.get(f"{base}/w") == data


def test_an_exception_in_the_with_block_publishes_nothing(client: tierpool.Client, base: str) -> None:
    client.put(b"keep", f"{base}/f")
    with pytest.raises(RuntimeError):
        with client.open(f"{base}/f", "wb") as f:
            f.write(b"partial" * 100_000)
            raise RuntimeError("boom")
    assert f.closed
    assert client.get(f"{base}/f") == b"keep"


def test_append_mode_extends_the_file_and_keeps_its_attributes(client: tierpool.Client, base: str) -> None:
    first = pattern((1 << 20) + 17, seed=8)
    client.put(first, f"{base}/a", chunk_size="256KiB", priority=2)
    with client.open(f"{base}/a", "ab") as f:
        assert f.tell() == len(first)
        f.write(b"tail")
    st = client.stat(f"{base}/a")
    assert (st.size, st.chunk_size, st.priority) == (len(first) + 4, 256 << 10, 2)
    assert client.get(f"{base}/a") == first + b"tail"
    with client.open(f"{base}/new", "ab") as f:
        f.write(b"fresh")
    assert client.get(f"{base}/new") == b"fresh"


def test_exclusive_mode_refuses_an_existing_path_at_open(client: tierpool.Client, base: str) -> None:
    with client.open(f"{base}/x", "xb") as f:
        f.write(b"1")
    with pytest.raises(FileExistsError, match=f"{base}/x"):
        client.open(f"{base}/x", "xb")
    assert client.get(f"{base}/x") == b"1"


def test_text_modes(client: tierpool.Client, base: str) -> None:
    with client.open(f"{base}/t.txt", "w", encoding="utf-8") as f:
        assert isinstance(f, io.TextIOWrapper)
        f.write("héllo\nwörld\n")
    with client.open(f"{base}/t.txt", "a") as f:
        f.write("more\n")
    with client.open(f"{base}/t.txt", "r") as f:
        assert f.readlines() == ["héllo\n", "wörld\n", "more\n"]
    with client.open(f"{base}/t.txt", "rt") as f:
        assert f.read(5) == "héllo"


def test_unbuffered_objects_are_raw(client: tierpool.Client, base: str) -> None:
    with client.open(f"{base}/u", "wb", buffering=0) as f:
        assert isinstance(f, io.RawIOBase)
        assert f.write(b"abc") == 3
    with client.open(f"{base}/u", "rb", buffering=0) as f:
        assert isinstance(f, io.RawIOBase)
        assert f.read() == b"abc"


@pytest.mark.parametrize("mode", ["", "rw", "r+", "wx", "rbt", "bb", "q"])
def test_invalid_modes_are_value_errors(client: tierpool.Client, base: str, mode: str) -> None:
    with pytest.raises(ValueError):
        client.open(f"{base}/f", mode)


def test_write_options_are_validated(client: tierpool.Client, base: str) -> None:
    with pytest.raises(ValueError, match="priority"):
        client.open(f"{base}/f", "wb", priority=9)
    with pytest.raises(ValueError, match="chunk size"):
        client.open(f"{base}/f", "wb", chunk_size=1000)
    with pytest.raises(ValueError):
        client.open(f"{base}/f", "rb", priority=2)
