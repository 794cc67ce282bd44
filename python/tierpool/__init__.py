"""tierpool: a distributed tiered storage pool, from Python.

Data lives in the memory of the pool's workers while it fits and spills to
their disks when it does not. This package talks to a pool through the Rust
client (a native extension), so Python and the CLI share one implementation.

Start here::

    import tierpool

    client = tierpool.connect()              # TIERPOOL_COORDINATOR or 127.0.0.1:7700
    client.put(b"hello", "/data/greeting")
    with client.open("/data/greeting", "rb") as f:
        print(f.read())

    with tierpool.local(workers=2, mem="256MiB", disk="1GiB") as client:
        ...                                   # a throw-away pool for notebooks and tests

Also: ``fsspec.open("tierpool://data/x.csv")`` (and so pandas, pyarrow, Dask)
through :mod:`tierpool.fsspec`, and Dask workers that spill to the pool through
:mod:`tierpool.dask`.

Errors are Python's own exceptions (``FileNotFoundError``, ``OSError`` with
``errno.ENOSPC`` when the pool is full, ``ConnectionError``, ...); each is also
a :class:`TierpoolError` subclass named after the tierpool error kind.
"""

from tierpool._client import Client, connect
from tierpool._local import local
from tierpool._region import Region
from tierpool._transaction import Transaction, TransactionFile, TransactionRegion
from tierpool._native import (
    AlreadyExists,
    Corrupt,
    DirectoryNotEmpty,
    FileInfo,
    Internal,
    InvalidArgument,
    Io,
    IsADirectory,
    Lost,
    NotADirectory,
    NotFound,
    PoolFull,
    Protocol,
    Stale,
    TierpoolError,
    Unauthenticated,
    ReadOnly,
    Busy,
    Conflict,
    Unavailable,
    __version__,
    parse_size,
)

Client.__module__ = __name__
Region.__module__ = __name__
Transaction.__module__ = __name__
TransactionFile.__module__ = __name__
TransactionRegion.__module__ = __name__

__all__ = [
    "AlreadyExists",
    "Client",
    "Corrupt",
    "DirectoryNotEmpty",
    "FileInfo",
    "Region",
    "Internal",
    "InvalidArgument",
    "Io",
    "IsADirectory",
    "Lost",
    "NotADirectory",
    "NotFound",
    "PoolFull",
    "Protocol",
    "Stale",
    "TierpoolError",
    "Unauthenticated",
    "ReadOnly",
    "Busy",
    "Conflict",
    "Transaction",
    "TransactionFile",
    "TransactionRegion",
    "Unavailable",
    "__version__",
    "connect",
    "local",
    "parse_size",
]
