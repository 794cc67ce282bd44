"""The :class:`Client`: a connection to a pool and the file operations on it."""

import os
import shutil
import time
from typing import IO, Any, BinaryIO, Callable, Dict, Iterable, List, Literal, Mapping, Optional, Tuple, Union, overload

from tierpool import _native
from tierpool._io import DEFAULT_BUFFER_SIZE, RawWriter, TierpoolWriter, open_file
from tierpool._native import FileInfo
from tierpool._region import Region
from tierpool._transaction import Transaction

#: Local cache of a region unless given.
DEFAULT_REGION_CACHE = 64 << 20

#: Where :func:`connect` looks when no address is given.
DEFAULT_ADDRESS = "127.0.0.1:7700"
ADDRESS_ENV = "TIERPOOL_COORDINATOR"
#: Names the file holding the pool's secret when no ``secret_file`` is given
#: and ``tierpool up`` recorded none for the address.
SECRET_FILE_ENV = "TIERPOOL_SECRET_FILE"

Size = Union[int, str]
PathLike = Union[str, "os.PathLike[str]"]


def resolve_address(address: Optional[str] = None) -> str:
    """``address``, else ``$TIERPOOL_COORDINATOR``, else ``127.0.0.1:7700``."""
    return address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


def _worker_id(worker: Union[int, str]) -> int:
    """A worker id from ``2`` or ``"w2"``."""
    if isinstance(worker, int) and not isinstance(worker, bool) and worker >= 0:
        return worker
    if isinstance(worker, str):
        digits = worker[1:] if worker.startswith("w") else worker
        if digits.isdigit():
            return int(digits)
    raise ValueError(f"{worker!r} is not a worker id (e.g. 2 or 'w2')")


def _size(value: Optional[Size]) -> Optional[int]:
    if value is None or isinstance(value, int):
        return value
    return _native.parse_size(value)


class Client:
    """A connection to a tierpool pool.

    Paths are absolute pool paths such as ``"/data/x.csv"`` (a missing leading
    ``/`` is added). Files are written whole: a file opened for writing, or
    given to :meth:`put`, appears at its path only once complete, atomically
    replacing what was there. Readers see one version from open to close.

    A client is safe to share between threads, and every call releases the GIL
    while it waits for the pool, so threads read and write in parallel.

    Errors are built-in exceptions that are also :class:`tierpool.TierpoolError`
    subclasses: ``FileNotFoundError``, ``FileExistsError``,
    ``NotADirectoryError``, ``IsADirectoryError``, ``OSError`` with
    ``errno.ENOTEMPTY`` or ``errno.ENOSPC`` (pool full), ``ConnectionError``
    (pool unreachable), ``PermissionError`` (the pool refused this client's
    secret), ``ValueError`` (bad argument); the message names the path.
    """

    def __init__(
        self, address: Optional[str] = None, *, timeout: float = 3.0, secret_file: Optional[PathLike] = None
    ) -> None:
        """Connects to the coordinator at ``address`` (``host:port``; default:
        ``$TIERPOOL_COORDINATOR``, then ``127.0.0.1:7700``), waiting at most
        ``timeout`` seconds. Raises ``ConnectionError`` if it does not answer.

        Every connection proves the pool's secret, read from ``secret_file``;
        by default from the file ``tierpool up`` recorded for ``address``
        (``~/.tierpool/pools/``), else the one ``$TIERPOOL_SECRET_FILE`` names.
        Raises :class:`tierpool.Unauthenticated` (a ``PermissionError``) if the
        pool refuses it, or if there is none."""
        path = None if secret_file is None else os.fspath(secret_file)
        self._native = _native.Client(resolve_address(address), timeout, path)

    @property
    def address(self) -> str:
        """The coordinator's address, ``host:port``."""
        return self._native.address

    def __repr__(self) -> str:
        return f"tierpool.Client({self.address!r})"

    @property
    def secret_file(self) -> Optional[str]:
        """The secret file this client was given, or ``None`` if it found its own."""
        return self._native.secret_file

    def __reduce__(self) -> Any:
        # Pickles as its address and the secret file it was given (a path,
        # never the key), so tasks shipped to other processes reconnect.
        return (_reconnect, (self.address, self.secret_file))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    # ---- namespace -------------------------------------------------------

    def stat(self, path: str) -> FileInfo:
        """Metadata of the file or directory at ``path``."""
        return self._native.stat(path)

    def exists(self, path: str) -> bool:
        """Whether anything exists at ``path``."""
        try:
            self._native.stat(path)
            return True
        except FileNotFoundError:
            return False

    @overload
    def ls(self, path: str = "/", detail: Literal[False] = False) -> List[str]: ...

    @overload
    def ls(self, path: str = "/", detail: Literal[True] = ...) -> List[FileInfo]: ...

    def ls(self, path: str = "/", detail: bool = False) -> Union[List[str], List[FileInfo]]:
        """Entries of the directory at ``path``, sorted by name: their names, or
        with ``detail=True`` their :class:`FileInfo`. A file lists as itself."""
        entries = self._native.ls(path)
        if detail:
            return entries
        return [e.name for e in entries]

    def mkdir(self, path: str, parents: bool = False, exist_ok: bool = False) -> None:
        """Creates a directory; with ``parents=True`` also missing parents (and an
        existing directory is then fine, as with ``mkdir -p``)."""
        try:
            self._native.mkdir(path, parents)
        except FileExistsError:
            if not (exist_ok and self._native.stat(path).is_dir()):
                raise

    def rm(self, path: str, recursive: bool = False) -> int:
        """Removes a file, or a directory (which must be empty unless
        ``recursive``); returns how many files and directories went away."""
        return self._native.rm(path, recursive)

    def mv(self, src: str, dst: str) -> None:
        """Renames ``src`` to ``dst`` atomically. An existing file at ``dst`` (or
        an empty directory, for a directory) is replaced."""
        self._native.mv(src, dst)

    def pin(self, path: str) -> int:
        """Keeps the chunks of a file (or of every file under a directory) in
        memory as long as possible; returns how many files changed."""
        return self._native.set_attrs(path, None, True)

    def unpin(self, path: str) -> int:
        """Undoes :meth:`pin`; returns how many files changed."""
        return self._native.set_attrs(path, None, False)

    def set_priority(self, path: str, priority: int) -> int:
        """Sets the eviction priority (1 = evicted first .. 5 = last, default 3)
        of a file or of every file under a directory; returns how many changed."""
        return self._native.set_attrs(path, priority, None)

    def status(self) -> Dict[str, Any]:
        """The pool's state: partitions, inode count and each worker's address,
        liveness, capacities and usage, as plain dicts and lists: the same
        fields as ``tierpool status --json`` (e.g. ``s["workers"][0]["mem"]["used"]``).
        ``s["replication"]`` has the copies the pool keeps (``replicas``, and
        ``possible`` with the workers there are), ``workers_down``, and what
        is short of copies: ``chunks_under``, ``bytes_under``, ``chunks_lost``,
        ``replicas_missing``, ``degraded``."""
        return self._native.status()

    # ---- copies ------------------------------------------------------------

    def set_replicas(self, path: str, replicas: int, recursive: bool = False) -> Dict[str, int]:
        """Makes the file or region at ``path`` keep ``replicas`` copies of
        each chunk, on distinct workers (a directory: what new entries in it
        keep; with ``recursive``, everything beneath it too). Raising it
        copies the existing chunks now, lowering it drops the extra copies.
        Returns ``{"files": n, "chunks": n, "bytes": n}``: the files whose
        copies changed, and their chunks and bytes copied or dropped.
        More copies than the pool keeps (its ``--replicas``) raises
        :class:`tierpool.InvalidArgument` (a ``ValueError``)."""
        return self._native.set_replicas(path, replicas, recursive)

    def set_placement(self, path: str, placement: str, recursive: bool = False) -> int:
        """Sets where new chunks of ``path`` are written (a directory: what
        new entries in it take; with ``recursive``, everything beneath it
        too); returns how many paths took it. ``placement`` is ``"hash"``
        (spread over the pool, the default), ``"local"`` (the first copy
        of each chunk on the writer's own worker: the one whose ``--host``
        is ``$TIERPOOL_HOST``, by default this machine's hostname),
        ``"round-robin"`` (a file's chunks dealt over the workers in turn)
        or ``"local-only"`` (one copy, on the writer's own worker; writing
        raises :class:`tierpool.Unavailable` where there is none). Chunks
        already written stay where they are. An unknown policy raises
        :class:`tierpool.InvalidArgument` (a ``ValueError``)."""
        return self._native.set_placement(path, placement, recursive)

    def fsck(self, path: str = "/") -> List[Dict[str, Any]]:
        """The files and regions at or under ``path`` whose chunks are short
        of copies (a worker is down, or its replicas are still being copied
        again) or have none left: ``[{"path", "replicas", "chunks", "under",
        "lost"}]``, the same as ``tierpool fsck --json``. Empty when every
        chunk has its copies."""
        return self._native.fsck(path)

    # ---- snapshots ---------------------------------------------------------

    def snapshot_create(self, path: str, name: str) -> Dict[str, Any]:
        """Takes snapshot ``name`` of the file or directory tree at ``path``,
        atomically and without copying data: every unchanged chunk stays
        shared with the live files. It is read at
        ``path/.snapshots/name/...`` like any path (read-only). Returns
        ``{"path", "name", "created", "entries", "bytes", "kept_bytes"}``
        (``kept_bytes``: stored bytes only snapshots still name).
        ``FileExistsError`` if ``path`` has a snapshot of that name.
        Beneath an attached under-store, the chunks still below are loaded
        into the pool first: a snapshot keeps the pool's bytes, whatever the
        store does next."""
        return self._native.snapshot_create(path, name)

    def snapshots(self, path: Optional[str] = None) -> List[Dict[str, Any]]:
        """The snapshots of ``path`` (of every path: ``None``), sorted by
        path and name, each as :meth:`snapshot_create` returns it."""
        return self._native.snapshots(path)

    def snapshot_remove(self, path: str, name: str) -> None:
        """Removes snapshot ``name`` of ``path``: the chunks only it kept
        are freed. ``FileNotFoundError`` if there is none."""
        self._native.snapshot_remove(path, name)

    def snapshot_restore(self, path: str, name: str) -> None:
        """Puts snapshot ``name`` back at ``path``, replacing what is there,
        in one step (readers see the old tree or the restored one).
        Beneath an attached under-store, the restored files are then
        written below as their write modes say, and what the restore
        dropped is removed below where the attachment mirrors names."""
        self._native.snapshot_restore(path, name)

    # ---- under-stores -----------------------------------------------------

    def attach(
        self,
        uri: str,
        path: str,
        *,
        mode: str = "through",
        readonly: bool = False,
        options: Optional[Dict[str, str]] = None,
    ) -> Dict[str, int]:
        """Attaches the under-store at ``uri`` (``file:///dir``,
        ``s3://bucket/prefix``, ``hdfs://namenode:8020/dir``) at pool directory ``path`` (made if missing;
        must be empty): its tree appears there, names, sizes and times, and
        a file's bytes are loaded into the pool on first read. ``mode`` is
        ``"through"`` (writes, removals and renames reach the store before
        they return), ``"back"`` (a written file is acknowledged once on the
        workers' disks and reaches the store in the background; ``sync``
        waits for it; removals and renames reach it before they return) or
        ``"pool-only"`` (nothing is written below).
        ``options``: ``endpoint``, ``region``, ``profile``,
        ``access_key_id``, ``secret_access_key``, ``session_token`` (else
        from the environment and ``~/.aws``). Returns ``{"files", "dirs",
        "bytes"}``. An unreachable store, a missing bucket or refused
        credentials raise an error naming it; nothing is attached then."""
        return self._native.attach(uri, path, mode, readonly, options)

    def detach(self, path: str, *, force: bool = False) -> int:
        """Detaches the under-store at ``path``: the pool forgets the tree
        (the store keeps its data). Files changed in the pool and not yet
        written below raise :class:`tierpool.Stale` unless ``force``.
        Returns how many entries went."""
        return self._native.detach(path, force)

    def attachments(self) -> List[Dict[str, Any]]:
        """The attached under-stores: ``[{"path", "uri", "mode",
        "readonly", "options"}]`` (secrets shown as ``***``)."""
        return self._native.attachments()

    def load(self, path: str) -> Dict[str, int]:
        """Loads the files at or beneath ``path`` from their under-store
        into the pool ahead of reads: ``{"files", "bytes"}``."""
        return self._native.load(path)

    def free(self, path: str) -> Dict[str, Any]:
        """Lets go of the pool's copies of the files at or beneath ``path``
        that their under-store holds as they are; reads load them again.
        ``{"files", "bytes", "skipped"}``: skipped files have changes not
        yet below."""
        return self._native.free(path)

    def sync(self, path: str) -> Dict[str, int]:
        """Writes the files at or beneath ``path`` with changes not yet in
        their under-store to it (of a back or pool-only attachment too),
        waiting for it:
        ``{"files", "bytes"}``."""
        return self._native.sync(path)

    def set_write_mode(self, path: str, mode: Optional[str], recursive: bool = False) -> Dict[str, int]:
        """Gives the file at ``path``, beneath an attachment, a write mode
        of its own (``"through"``, ``"back"`` or ``"pool-only"``), whatever
        its attachment's; ``None`` (or ``"attachment"``) gives it its
        attachment's again. With ``recursive``, every file beneath the
        directory at ``path``. The mode holds when the file is written
        again; a file with changes not yet below meets it at once (written
        below now if it writes through). Renames, removals and new
        directories follow the attachment's mode. ``{"files", "written"}``."""
        return self._native.set_write_mode(path, mode, recursive)

    def write_mode(self, path: str) -> Dict[str, Any]:
        """The write mode the file at ``path`` follows: ``{"mode", "own"}``
        (``own``: its own rather than its attachment's)."""
        return self._native.write_mode(path)

    def sync_meta(self, path: str) -> Dict[str, Any]:
        """Brings the attached tree at or beneath ``path`` up to date with
        its under-store: ``{"added", "changed", "removed", "conflicts"}``.
        A file changed below since it was attached is refused on open
        (:class:`tierpool.Stale`) until this picks the change up."""
        return self._native.sync_meta(path)

    # ---- membership --------------------------------------------------------

    def drain(self, worker: Union[int, str], *, wait: bool = False, timeout: Optional[float] = None) -> None:
        """Starts emptying a worker (``2`` or ``"w2"``, as ``status()`` shows
        it): its partitions move to the others while it serves them, and it
        takes none. With ``wait``, returns once it holds no partition
        (``TimeoutError`` after ``timeout`` seconds, if given); then it can
        be stopped and removed. Raises ``tierpool.PoolFull`` if the other
        workers have no room for what it holds."""
        wid = _worker_id(worker)
        self._native.drain(wid)
        if wait:
            self._wait(lambda s: all(w["partitions"] == 0 for w in s["workers"] if w["id"] == wid), timeout)

    def remove_worker(self, worker: Union[int, str]) -> Dict[str, Any]:
        """Removes a worker that is dead or drained: the partitions it owned
        go to the others at once. Returns ``{"partitions": [...], "lost":
        [paths]}``: what it owned, and the files and regions that had chunks
        only on it (reading them raises an error saying they are lost)."""
        partitions, lost = self._native.remove_worker(_worker_id(worker))
        return {"partitions": partitions, "lost": lost}

    def rebalance(self, *, wait: bool = False, timeout: Optional[float] = None) -> None:
        """Sets partitions moving toward the share each worker's weight asks
        for: its capacity, times its measured bandwidth for a slow worker
        (``status()["migration"]`` follows them). With ``wait``,
        returns once none is left to move."""
        self._native.rebalance()
        if wait:
            self._wait(lambda s: not s["migration"]["active"], timeout)

    def _wait(self, done: Callable[[Dict[str, Any]], bool], timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done(self.status()):
            if deadline is not None and time.monotonic() > deadline:
                m = self.status()["migration"]
                raise TimeoutError(
                    f"partitions still moving after {timeout} s: {m['partitions_left']} left, "
                    f"{m['partitions_moving']} moving"
                )
            time.sleep(0.2)

    # ---- data ------------------------------------------------------------

    def put(
        self,
        src: Union[bytes, bytearray, memoryview, Any, PathLike, BinaryIO],
        path: str,
        *,
        chunk_size: Optional[Size] = None,
        priority: int = 3,
        pin: bool = False,
        overwrite: bool = True,
    ) -> FileInfo:
        """Stores a file at ``path`` and returns its metadata.

        ``src`` is the content: a bytes-like object (``bytes``, ``bytearray``,
        ``memoryview``, a numpy array, ...), the name of a local file (``str``
        or ``os.PathLike``), or a binary file object to read to its end.
        ``chunk_size`` (bytes or a size such as ``"8MiB"``, default 4 MiB),
        ``priority`` (1..5) and ``pin`` steer how the pool stores it. With
        ``overwrite=False`` an existing file is ``FileExistsError``.
        """
        cs = _size(chunk_size)
        if isinstance(src, (str, os.PathLike)):
            return self._native.put_file(os.fspath(src), path, cs, priority, pin, overwrite)
        if hasattr(src, "read"):
            mode = "wb" if overwrite else "xb"
            raw = RawWriter(self._native.open_writer(path, mode[0], cs, priority, pin))
            with TierpoolWriter(raw, DEFAULT_BUFFER_SIZE) as f:
                shutil.copyfileobj(src, f, 4 << 20)
            assert raw.info is not None
            return raw.info
        return self._native.put_bytes(path, src, cs, priority, pin, overwrite)

    @overload
    def get(self, path: str, dst: None = None) -> bytes: ...

    @overload
    def get(self, path: str, dst: Union[PathLike, BinaryIO]) -> int: ...

    def get(self, path: str, dst: Union[None, PathLike, BinaryIO] = None) -> Union[bytes, int]:
        """The content of the file at ``path``: as ``bytes`` when ``dst`` is
        None; else written to ``dst`` (a local file name, or a binary file
        object) and the number of bytes returned."""
        if dst is None:
            return self._native.get_bytes(path)
        if isinstance(dst, (str, os.PathLike)):
            return self._native.get_file(path, os.fspath(dst))
        n = 0
        with self.open(path, "rb") as f:
            while True:
                block = f.read(4 << 20)
                if not block:
                    return n
                dst.write(block)
                n += len(block)

    # ---- many small files at once ------------------------------------------

    def put_many(
        self,
        items: Union[Mapping[str, Any], Iterable[Tuple[str, Any]]],
        *,
        chunk_size: Optional[Size] = None,
        priority: int = 3,
        pin: bool = False,
        overwrite: bool = True,
    ) -> List[Union[FileInfo, Exception]]:
        """Stores many files at once: ``items`` maps paths to bytes-like
        contents (a dict, or ``(path, data)`` pairs). Up to 64 files move at
        a time, so small files cost round trips in parallel. Returns, per
        item and in order, its :class:`FileInfo` or the exception it failed
        with (returned, not raised: a failure in the middle stops and undoes
        nothing)."""
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        return self._native.put_many(pairs, _size(chunk_size), priority, pin, overwrite)

    def get_many(self, paths: Iterable[str]) -> List[Union[bytes, Exception]]:
        """The content of each of ``paths``, read at once (up to 64 files at
        a time): per path and in order, its bytes or the exception reading
        it failed with (returned, not raised)."""
        return self._native.get_many(list(paths))

    def alloc(
        self,
        path: str,
        size: Size,
        *,
        cache: Size = DEFAULT_REGION_CACHE,
        chunk_size: Optional[Size] = None,
        priority: int = 3,
        pin: bool = False,
    ) -> Region:
        """Allocates a zero-filled memory region of ``size`` bytes at ``path``
        and opens it (see :class:`tierpool.Region`).

        The region's space is reserved in the pool now: if the pool cannot hold
        it, this raises ``OSError`` with ``errno.ENOSPC`` at once, leaving
        nothing behind. ``cache`` (bytes or a size such as ``"256MiB"``) bounds
        the local memory the region uses; ``chunk_size`` (default 4 MiB),
        ``priority`` (1..5) and ``pin`` steer how the pool keeps it.
        """
        native = self._native.alloc_region(
            path, _size(size), _size(cache), _size(chunk_size), priority, pin
        )
        return Region(native)

    def region(
        self,
        path: str,
        *,
        cache: Size = DEFAULT_REGION_CACHE,
        readonly: bool = False,
        checkpoint: Optional[str] = None,
    ) -> Region:
        """Opens the existing region at ``path`` with a local cache of ``cache`` bytes.

        With ``readonly=True`` the processes of this machine that open the
        region read-only share one copy of its cached pages (in ``/dev/shm``):
        each fetches only pages none of them has yet. Writes raise, arrays are
        read-only, and the region should not be written by anyone meanwhile.

        With ``checkpoint=name``, opens that checkpoint of the region
        (see :meth:`Region.checkpoint`), read-only. While a handle that may
        write is open, :meth:`restore_region` elsewhere raises
        ``tierpool.Busy``; a region whose restore stopped half way raises
        ``tierpool.Busy`` here until the restore is run again.
        """
        return Region(self._native.open_region(path, _size(cache), readonly, checkpoint))

    def restore_region(self, path: str, name: str) -> Dict[str, Any]:
        """Rolls the region at ``path`` back to its checkpoint ``name``: the
        chunks that differ are copied back on the workers. ``tierpool.Busy``
        if any client, this one included, has a handle of it open that may
        write (close them first: they would keep serving the old pages).
        Returns what :meth:`Region.checkpoint` does (``since`` is None)."""
        return self._native.restore_region(path, name)

    def transaction(self, task_id: Optional[str] = None) -> Transaction:
        """Begins a :class:`tierpool.Transaction` over files, reading the pool
        as it is now; used as a context manager it commits at the end of the
        block (with ``task_id``: of the transactions carrying it, exactly one
        ever commits) and aborts if the block raises."""
        return Transaction(self._native.transaction(), task_id)

    def read_range(self, path: str, start: int = 0, end: Optional[int] = None) -> bytes:
        """Bytes ``start:end`` of the file at ``path`` (``end=None``: to its end)."""
        return self._native.get_bytes(path, start, end)

    def open(
        self,
        path: str,
        mode: str = "rb",
        *,
        buffering: int = -1,
        encoding: Optional[str] = None,
        errors: Optional[str] = None,
        newline: Optional[str] = None,
        chunk_size: Optional[Size] = None,
        priority: Optional[int] = None,
        pin: Optional[bool] = None,
    ) -> IO[Any]:
        """Opens a pool file as a standard :mod:`io` object.

        Modes: ``"rb"`` (an :class:`io.BufferedReader`: seekable, ``readinto``
        any writable buffer), ``"wb"`` (replace), ``"ab"`` (append), ``"xb"``
        (create; ``FileExistsError`` if the path exists); without ``b`` (or with
        ``t``) the same in text, wrapped in :class:`io.TextIOWrapper`.
        ``buffering=0`` gives the raw binary object.

        A file opened for writing is published atomically on ``close`` (a
        :class:`tierpool._io.TierpoolWriter`); if the ``with`` block raises, it
        is discarded instead. ``chunk_size``, ``priority`` (1..5) and ``pin``
        apply to writing; unset, a new file gets 4 MiB, 3 and unpinned, and an
        appended file keeps its own.
        """
        return open_file(
            self._native,
            path,
            mode,
            buffering=buffering,
            encoding=encoding,
            errors=errors,
            newline=newline,
            chunk_size=_size(chunk_size),
            priority=priority,
            pin=pin,
        )


def connect(
    address: Optional[str] = None, *, timeout: float = 3.0, secret_file: Optional[PathLike] = None
) -> Client:
    """Connects to a pool: ``address`` (``host:port``), else
    ``$TIERPOOL_COORDINATOR``, else ``127.0.0.1:7700``. Raises
    ``ConnectionError`` if the coordinator does not answer within ``timeout`` s.
    The pool's secret comes from ``secret_file``, else the file ``tierpool up``
    recorded for the address, else ``$TIERPOOL_SECRET_FILE``; a pool that
    refuses it raises :class:`tierpool.Unauthenticated` (a ``PermissionError``)."""
    return Client(address, timeout=timeout, secret_file=secret_file)


def _reconnect(address: str, secret_file: Optional[str]) -> Client:
    return Client(address, secret_file=secret_file)
