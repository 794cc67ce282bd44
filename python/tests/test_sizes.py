"""Sizes, offsets and counts are checked before anything is allocated or
sent: reads are clamped to what the file holds, negative or absurd values are
tierpool.InvalidArgument (a ValueError) naming the argument, never a
MemoryError, an OverflowError or a crash."""

from __future__ import annotations

import io
import math

import pytest
from conftest import pattern

import tierpool

HUGE = 2**62
BEYOND_64_BITS = 2**70


@pytest.fixture
def small(client: tierpool.Client, base: str) -> bytes:
    data = pattern(1000, seed=21)
    client.put(data, f"{base}/small")
    return data


def test_a_huge_read_returns_what_the_file_holds(client: tierpool.Client, base: str, small: bytes) -> None:
    path = f"{base}/small"
    with client.open(path, "rb") as f:
        assert f.read(HUGE) == small
        assert f.read(HUGE) == b""
    with client.open(path, "rb") as f:
        assert f.read(10) == small[:10]
        assert f.read1(HUGE) == small[10:]
        f.seek(990)
        assert f.read(BEYOND_64_BITS) == small[990:]
    with client.open(path, "rb", buffering=0) as f:
        assert f.read(HUGE) == small
        f.seek(BEYOND_64_BITS)
        assert f.read(HUGE) == b"" and f.readinto(bytearray(10)) == 0
    with client.open(path, "rb", buffering=0) as f:
        assert f.read(HUGE) == small
    text = small.hex()
    client.put(text.encode(), f"{base}/text")
    with client.open(f"{base}/text", "r") as t:
        assert t.read(HUGE) == text


def test_a_huge_range_is_clamped_to_the_file(client: tierpool.Client, base: str, small: bytes) -> None:
    path = f"{base}/small"
    assert client.read_range(path, 0, HUGE) == small
    assert client.read_range(path, 500, BEYOND_64_BITS) == small[500:]
    assert client.read_range(path, BEYOND_64_BITS) == b""
    assert client.read_range(path, 600, 500) == b""


def assert_invalid(call: object, *words: str) -> None:
    with pytest.raises(ValueError) as e:
        call()  # type: ignore[operator]
    assert type(e.value) is tierpool.InvalidArgument, repr(e.value)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_negative_offsets_and_sizes_are_invalid_arguments(client: tierpool.Client, base: str, small: bytes) -> None:
    path = f"{base}/small"
    assert_invalid(lambda: client.read_range(path, -1), "start must not be negative", "-1")
    assert_invalid(lambda: client.read_range(path, 0, -5), "end must not be negative")
    with client.open(path, "rb", buffering=0) as f:
        reader = f._r  # the native reader under the io object
        assert_invalid(lambda: reader.read(-1), "offset must not be negative")
        assert_invalid(lambda: reader.read(0, -1), "size must not be negative")
        assert_invalid(lambda: reader.readinto(bytearray(4), -4096), "offset must not be negative")
        assert reader.read(0, HUGE) == small


def test_bad_put_options_are_invalid_arguments(client: tierpool.Client, base: str) -> None:
    p = f"{base}/p"
    for chunk_size in [-4096, 0, 12345, 128 << 20, 2**64, BEYOND_64_BITS]:
        assert_invalid(lambda: client.put(b"x", p, chunk_size=chunk_size), "chunk size")
        assert_invalid(lambda: client.open(p, "wb", chunk_size=chunk_size), "chunk size")
    for priority in [-1, 0, 6, 300, BEYOND_64_BITS]:
        assert_invalid(lambda: client.put(b"x", p, priority=priority), "priority")
        assert_invalid(lambda: client.open(p, "wb", priority=priority), "priority")
        assert_invalid(lambda: client.set_priority(base, priority), "priority")
    assert not client.exists(p)
    with pytest.raises(TypeError):
        client.put(b"x", p, chunk_size=4096.0)  # type: ignore[arg-type]


def test_bad_region_sizes_are_invalid_arguments(client: tierpool.Client, base: str) -> None:
    r = f"{base}/r"
    assert_invalid(lambda: client.alloc(r, -1), "region size must not be negative")
    assert_invalid(lambda: client.alloc(r, 0), "at least one byte")
    assert_invalid(lambda: client.alloc(r, HUGE), "larger than the 64TiB one process can map")
    assert_invalid(lambda: client.alloc(r, BEYOND_64_BITS), "region size", "too large")
    assert_invalid(lambda: client.alloc(r, "1MiB", cache=-1), "cache must not be negative")
    assert_invalid(lambda: client.alloc(r, "1MiB", chunk_size=BEYOND_64_BITS), "chunk size")
    assert_invalid(lambda: client.alloc(r, "1MiB", priority=-3), "priority")
    assert not client.exists(r)


def test_region_reads_and_writes_outside_it_are_invalid_arguments(client: tierpool.Client, base: str) -> None:
    size = 1 << 20
    with client.alloc(f"{base}/r", size, cache=HUGE, chunk_size="256KiB") as r:
        r.write(size - 4, b"tail")
        assert r.read(size - 4, 4) == b"tail"
        assert_invalid(lambda: r.read(0, HUGE), "outside the region")
        assert_invalid(lambda: r.read(size - 4, 5), "outside the region")
        assert_invalid(lambda: r.read(BEYOND_64_BITS, 1), "outside the region")
        assert_invalid(lambda: r.read(-1, 1), "offset must not be negative")
        assert_invalid(lambda: r.read(0, -1), "length must not be negative")
        assert_invalid(lambda: r.write(-5, b"x"), "offset must not be negative")
        assert_invalid(lambda: r.write(size, b"x"), "outside the region")
        assert_invalid(lambda: r.readinto(size - 1, bytearray(2)), "outside the region")
        try:
            r.as_array("uint8")
        except ValueError:
            pass  # no userfaultfd here: no arrays to check
        else:
            assert_invalid(lambda: r.as_array("uint8", (-1,)), "must not be negative")
            assert_invalid(lambda: r.as_array("uint8", (HUGE, HUGE)), "do not fit")
            assert_invalid(lambda: r.as_array("uint8", offset=-1), "must not be negative")
        assert r.read(size - 4, 4) == b"tail"
    with client.region(f"{base}/r", cache=BEYOND_64_BITS) as again:
        assert again.read(size - 4, 4) == b"tail"
    assert_invalid(lambda: client.region(f"{base}/r", cache=-1), "cache must not be negative")


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 1e300])
def test_bad_timeouts_are_invalid_arguments(client: tierpool.Client, timeout: float) -> None:
    assert_invalid(lambda: tierpool.connect(client.address, timeout=timeout), "timeout")


def test_text_and_binary_reads_of_a_spilled_file_stay_exact(client: tierpool.Client, base: str) -> None:
    # Clamping must not cut reads short in the middle of a file.
    data = pattern((9 << 20) + 7, seed=22)
    client.put(data, f"{base}/big", chunk_size="1MiB")
    with client.open(f"{base}/big", "rb") as f:
        parts = [f.read(3 << 20), f.read1(HUGE), f.read(HUGE)]
    assert b"".join(parts) == data and all(parts[:2])
    buf = io.BytesIO()
    assert client.get(f"{base}/big", buf) == len(data) and buf.getvalue() == data
