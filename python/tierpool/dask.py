"""Dask integration: workers that spill to a tierpool pool instead of local disk.

A Dask worker keeps task results in a ``MutableMapping``; by default a
``SpillBuffer`` that moves the least recently used results to files on local
disk once managed memory passes the ``target`` fraction of the memory limit
(and, via the memory monitor, when process memory passes ``spill``).
:class:`TierpoolSpillBuffer` is that same buffer with its slow side stored in
the pool, so intermediate data larger than the workers' memory goes to the
pool's memory and disks and nothing is written to the worker's local disk::

    from dask.distributed import Client, LocalCluster
    from tierpool.dask import spill_to_tierpool

    cluster = LocalCluster(
        n_workers=4,
        memory_limit="2GiB",
        data=spill_to_tierpool("2GiB", address="10.0.0.1:7700"),
    )
    client = Client(cluster)

:class:`TierpoolMapping` is the plain ``MutableMapping`` underneath, usable
on its own (e.g. as ``zict`` storage).
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import uuid
import weakref
from collections import defaultdict
from collections.abc import Hashable, Iterator, MutableMapping
from typing import Any, Dict, Literal, Optional, Sequence, Tuple, Union

import zict
from distributed.protocol import deserialize_bytes, serialize_bytelist
from distributed.protocol.compression import get_compression_settings
from distributed.spill import Slow, SpillBuffer, SpilledSize, _in_memory_weight

from tierpool._client import Client, resolve_address

Buffer = Any  # bytes-like


def _remove_tree(client: Client, prefix: str, owner: int) -> None:
    if os.getpid() != owner:
        # A child forked from the owner: the directory is still the owner's.
        return
    try:
        client.rm(prefix, recursive=True)
    except Exception:  # the pool may already be gone at interpreter exit
        pass


class TierpoolMapping(MutableMapping):  # type: ignore[type-arg]
    """A ``MutableMapping`` from any hashable key to bytes, stored as files
    under a directory of a pool.

    Values may be bytes-like or a list of bytes-like frames (as Dask's
    serialisation produces); they are written without joining and read back
    as one writable ``bytearray`` (as zict's own ``File`` returns them: Dask
    copies a read-only buffer whole before it makes a writeable array of it). Each mapping uses a directory of its own
    (``prefix/<random>``), deleted by :meth:`close` or when the mapping is
    garbage-collected or the process exits, only ever by the process that
    made the mapping (a forked child that inherits it leaves it alone).
    Files are written with low priority (1), so the pool demotes them to
    disk before hotter data, and keep ``replicas`` copies of each chunk
    (default 1: a spilled value is no safer in the pool than in the worker
    process whose memory it left, and one copy writes half the bytes of
    two; ``None`` keeps what ``prefix`` says).
    Safe for use from several threads.
    """

    def __init__(
        self,
        prefix: str = "/dask-spill",
        *,
        address: Optional[str] = None,
        client: Optional[Client] = None,
        priority: int = 1,
        replicas: Optional[int] = 1,
    ) -> None:
        self.client = client if client is not None else Client(address)
        self.directory = f"{prefix.rstrip('/')}/{uuid.uuid4().hex}"
        self.priority = priority
        self.client.mkdir(self.directory, parents=True)
        if replicas is not None:
            self.client.set_replicas(self.directory, replicas)
        self._paths: Dict[Hashable, str] = {}
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _remove_tree, self.client, self.directory, os.getpid())

    def __setitem__(self, key: Hashable, value: Union[Buffer, Sequence[Buffer]]) -> None:
        with self._lock:
            path = f"{self.directory}/{next(self._names)}"
        frames = value if isinstance(value, (list, tuple)) else [value]
        with self.client.open(path, "wb", buffering=0, priority=self.priority) as f:
            for frame in frames:
                f.write(frame)
        with self._lock:
            old = self._paths.get(key)
            self._paths[key] = path
        if old is not None:
            self.client.rm(old)

    def __getitem__(self, key: Hashable) -> bytearray:
        with self._lock:
            path = self._paths[key]
        with self.client.open(path, "rb", buffering=0) as f:
            buf = bytearray(f.size)
            n = f.readinto(buf)
        if n != len(buf):
            raise OSError(f"{path}: read {n} of its {len(buf)} bytes")
        return buf

    def __delitem__(self, key: Hashable) -> None:
        with self._lock:
            path = self._paths.pop(key)
        self.client.rm(path)

    def __contains__(self, key: object) -> bool:
        return key in self._paths

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._paths))

    def __len__(self) -> int:
        return len(self._paths)

    def close(self) -> None:
        """Deletes every stored value and the mapping's directory."""
        self._paths.clear()
        self._finalizer()


class TierpoolSlow(Slow):  # type: ignore[misc]
    """Dask's ``Slow`` (serialise, account, refuse past ``max_spill``) over a
    :class:`TierpoolMapping` instead of a local directory."""

    def __init__(self, store: TierpoolMapping, max_weight: Union[int, Literal[False]] = False) -> None:
        compression = get_compression_settings("distributed.worker.memory.spill-compression")

        def dump(value: Any) -> Any:
            return serialize_bytelist(value, compression=compression, on_error="raise")

        zict.Func.__init__(self, dump, deserialize_bytes, store)
        self.max_weight = max_weight
        self.weight_by_key = {}
        self.total_weight = SpilledSize(0, 0)


class TierpoolSpillBuffer(SpillBuffer):  # type: ignore[misc]
    """Dask's ``SpillBuffer`` whose spilled values live in a tierpool pool.

    ``target``: managed memory in bytes at which to start spilling;
    ``max_spill``: most bytes to spill (``False``: no limit); ``address`` and
    ``prefix``: where in which pool; ``replicas``: copies of each spilled
    chunk (see :class:`TierpoolMapping`). When the pool is full, values stay
    in memory, as they do when a local disk is full.
    """

    def __init__(
        self,
        target: int,
        max_spill: Union[int, Literal[False]] = False,
        *,
        address: Optional[str] = None,
        prefix: str = "/dask-spill",
        replicas: Optional[int] = 1,
    ) -> None:
        self.store = TierpoolMapping(prefix, address=address, replicas=replicas)
        slow = TierpoolSlow(self.store, max_spill)
        zict.Buffer.__init__(
            self, fast={}, slow=zict.Cache(slow, zict.WeakValueMapping()), n=target, weight=_in_memory_weight
        )
        self.logged_pickle_errors = set()
        self.cumulative_metrics = defaultdict(float)


def spill_to_tierpool(
    memory_limit: Union[int, str],
    *,
    address: Optional[str] = None,
    prefix: str = "/dask-spill",
    target: Optional[float] = None,
    max_spill: Union[int, str, Literal[False]] = False,
    replicas: Optional[int] = 1,
) -> Tuple[Any, Dict[str, Any]]:
    """The ``data=`` argument that makes Dask workers spill to a pool.

    Pass it to ``LocalCluster(..., data=...)`` or ``Worker(..., data=...)``
    together with the same ``memory_limit``. Spilling starts when managed
    memory exceeds ``target`` (a fraction of ``memory_limit``; default Dask's
    ``distributed.worker.memory.target``); the memory monitor's ``spill``
    threshold still applies. ``address`` is resolved now (default
    ``$TIERPOOL_COORDINATOR``, then ``127.0.0.1:7700``), so worker processes
    need no environment of their own. ``replicas``: copies of each spilled
    chunk (default 1, as a local disk keeps; ``None``: what ``prefix`` keeps).
    """
    import dask.config
    from dask.utils import parse_bytes

    limit = parse_bytes(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    fraction = target if target is not None else dask.config.get("distributed.worker.memory.target")
    spill_at = int(limit * fraction) if fraction else sys.maxsize
    cap: Union[int, Literal[False]] = parse_bytes(max_spill) if isinstance(max_spill, str) else max_spill
    return TierpoolSpillBuffer, {
        "target": spill_at,
        "max_spill": cap,
        "address": resolve_address(address),
        "prefix": prefix,
        "replicas": replicas,
    }


__all__ = ["TierpoolMapping", "TierpoolSlow", "TierpoolSpillBuffer", "spill_to_tierpool"]
