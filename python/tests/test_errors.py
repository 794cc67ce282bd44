"""Every tierpool error kind arrives as the Python exception a user expects,
with errno where it has one, a message naming the path, and the
TierpoolError hierarchy on top."""

from __future__ import annotations

import errno
import pickle
import socket

import pytest
from conftest import pattern

import tierpool


def test_missing_paths_are_file_not_found_naming_the_path(client: tierpool.Client, base: str) -> None:
    missing = f"{base}/nope"
    calls = [
        lambda: client.stat(missing),
        lambda: client.ls(missing),
        lambda: client.get(missing),
        lambda: client.open(missing, "rb"),
        lambda: client.rm(missing),
        lambda: client.mv(missing, f"{base}/other"),
        lambda: client.pin(missing),
        lambda: client.open(f"{missing}/f", "wb"),
        lambda: client.put(b"x", f"{missing}/f"),
        lambda: client.mkdir(f"{missing}/a/b"),
    ]
    for call in calls:
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert type(e.value) is tierpool.NotFound
        assert e.value.errno == errno.ENOENT
        assert missing in str(e.value)
        assert e.value.kind == "not_found"


def test_existing_paths_are_file_exists(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/d")
    with pytest.raises(FileExistsError, match=f"{base}/d") as e:
        client.mkdir(f"{base}/d")
    assert isinstance(e.value, tierpool.AlreadyExists) and e.value.errno == errno.EEXIST


def test_a_file_used_as_a_directory_is_not_a_directory(client: tierpool.Client, base: str) -> None:
    client.put(b"f", f"{base}/f")
    for call in [
        lambda: client.put(b"x", f"{base}/f/x"),
        lambda: client.open(f"{base}/f/x", "wb"),
        lambda: client.mkdir(f"{base}/f/x"),
        lambda: client.stat(f"{base}/f/x"),
    ]:
        with pytest.raises(NotADirectoryError) as e:
            call()
        assert isinstance(e.value, tierpool.NotADirectory) and e.value.errno == errno.ENOTDIR
        assert f"{base}/f" in str(e.value)


def test_a_directory_used_as_a_file_is_a_directory(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/d")
    for call in [
        lambda: client.get(f"{base}/d"),
        lambda: client.open(f"{base}/d", "rb"),
        lambda: client.open(f"{base}/d", "wb"),
        lambda: client.put(b"x", f"{base}/d"),
    ]:
        with pytest.raises(IsADirectoryError, match=f"{base}/d") as e:
            call()
        assert isinstance(e.value, tierpool.IsADirectory) and e.value.errno == errno.EISDIR


def test_non_empty_directories_are_enotempty(client: tierpool.Client, base: str) -> None:
    client.mkdir(f"{base}/d")
    client.put(b"x", f"{base}/d/x")
    client.mkdir(f"{base}/e")
    client.put(b"y", f"{base}/e/y")
    for call in [lambda: client.rm(f"{base}/d"), lambda: client.mv(f"{base}/e", f"{base}/d")]:
        with pytest.raises(OSError) as e:
            call()
        assert type(e.value) is tierpool.DirectoryNotEmpty
        assert e.value.errno == errno.ENOTEMPTY
        assert f"{base}/d" in str(e.value)


def test_bad_arguments_are_value_errors(client: tierpool.Client, base: str) -> None:
    for call, text in [
        (lambda: client.stat(f"{base}/../x"), ".."),
        (lambda: client.put(b"x", f"{base}/p", priority=0), "priority"),
        (lambda: client.put(b"x", f"{base}/p", chunk_size=12345), "chunk size"),
        (lambda: client.put(b"x", f"{base}/p", chunk_size="lots"), "invalid size"),
        (lambda: client.set_priority(base, 6), "priority"),
        (lambda: client.mv(base, f"{base}/inside"), "into itself"),
    ]:
        with pytest.raises(ValueError, match=text) as e:
            call()
        assert isinstance(e.value, tierpool.InvalidArgument)
        # A plain message: no errno in a ValueError (the mount says EINVAL).
        assert not isinstance(e.value, OSError) and e.value.args == (str(e.value),)


def test_an_unreachable_coordinator_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}") as e:
        tierpool.connect(f"127.0.0.1:{port}", timeout=1)
    assert isinstance(e.value, tierpool.Unavailable) and e.value.kind == "unavailable"
    # The errno the mount returns for the same kind.
    assert e.value.errno == errno.EHOSTUNREACH


def test_a_pool_that_went_away_is_a_connection_error() -> None:
    with tierpool.local(workers=1, mem="16MiB", disk="64MiB", set_env=False) as c:
        c.put(b"x", "/x")
        survivor = tierpool.connect(c.address)
    with pytest.raises(ConnectionError) as e:
        survivor.stat("/x")
    assert type(e.value) is tierpool.Unavailable and e.value.errno == errno.EHOSTUNREACH


def test_a_full_pool_is_enospc_and_keeps_what_it_had() -> None:
    with tierpool.local(workers=1, mem="4MiB", disk="8MiB", set_env=False) as c:
        kept = pattern(6 << 20, seed=9)
        c.put(kept, "/kept", chunk_size="1MiB")
        with pytest.raises(OSError) as e:
            c.put(pattern(8 << 20, seed=10), "/too-big", chunk_size="1MiB")
        assert type(e.value) is tierpool.PoolFull
        assert e.value.errno == errno.ENOSPC
        assert "/too-big" in str(e.value)
        assert not c.exists("/too-big")
        with pytest.raises(OSError) as e:
            with c.open("/too-big", "wb", chunk_size="1MiB") as f:
                f.write(pattern(8 << 20, seed=11))
        assert e.value.errno == errno.ENOSPC
        assert not c.exists("/too-big")
        assert c.get("/kept") == kept


def test_the_hierarchy_mirrors_the_error_kinds() -> None:
    pairs = {
        tierpool.NotFound: FileNotFoundError,
        tierpool.AlreadyExists: FileExistsError,
        tierpool.NotADirectory: NotADirectoryError,
        tierpool.IsADirectory: IsADirectoryError,
        tierpool.DirectoryNotEmpty: OSError,
        tierpool.PoolFull: OSError,
        tierpool.Unavailable: ConnectionError,
        tierpool.InvalidArgument: ValueError,
        tierpool.Corrupt: OSError,
        tierpool.Lost: OSError,
        tierpool.Stale: OSError,
        tierpool.Protocol: OSError,
        tierpool.Io: OSError,
        tierpool.Internal: OSError,
        tierpool.Unauthenticated: PermissionError,
    }
    for cls, builtin in pairs.items():
        assert issubclass(cls, tierpool.TierpoolError) and issubclass(cls, builtin), cls
        assert cls.__module__ == "tierpool" and cls.__doc__
    assert tierpool.TierpoolError.kind is None


def test_exceptions_survive_pickling(client: tierpool.Client, base: str) -> None:
    with pytest.raises(FileNotFoundError) as e:
        client.stat(f"{base}/gone")
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is tierpool.NotFound and back.errno == errno.ENOENT and str(back) == str(e.value)
