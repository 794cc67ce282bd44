"""The :class:`Transaction`: files and directories under snapshot isolation."""

import errno
import io
from types import TracebackType
from typing import Any, Optional, Type

from tierpool import _native


class Transaction:
    """A transaction over files, from :meth:`tierpool.Client.transaction`.

    Reads see the pool as it was when the transaction began (files changed,
    renamed or removed since read as they were); writes, new files and
    directories (:meth:`mkdir`), removals (:meth:`rm`) and moves
    (:meth:`mv`) are seen by this transaction at once and by others only
    once it commits, all together. The first committer wins:
    :meth:`commit` raises :class:`tierpool.Conflict` (an ``OSError``) if a
    transaction that committed after this one began changed a chunk this
    one wrote, the size of a file it wrote, an entry it made, removed or
    moved (or its directory), or anything it removed or replaced; a
    transaction that already lost a write learns of it at its next write.
    Read-only transactions never conflict.

    As a context manager it commits when the block ends normally (with the
    ``task_id`` given to :meth:`~tierpool.Client.transaction`) and aborts
    when it raises::

        with c.transaction() as tx:
            n = int(tx.read("/counter") or b"0")
            tx.write("/counter", str(n + 1).encode().ljust(8))

    Memory regions take part too: :meth:`region` gives a region's bytes in
    the transaction, read and written by 4 KiB page (a conflict is a page
    another transaction committed since this one began), committed with the
    files in the same step.

    Writing to a free path makes a new file there (its directory must
    exist). A transaction writes, makes, removes or moves at most 1024
    files and entries, and writes at most 4096 region pages (both set by
    the coordinator). Files beneath an attached under-store are read and
    written like any other, and reach the store after the commit as their
    write mode says (an error then says that the transaction committed); a
    chunk still below is read from the object that was there when the
    transaction began, and raises ``tierpool.Stale`` once that object was
    replaced. Directories are not made, nor entries removed or moved, where
    the store has them made first (``through`` and ``back`` attachments).
    One left open and unused for the coordinator's hold period (10 s by
    default) after its client died is aborted.
    """

    def __init__(self, native: Any, task_id: Optional[str] = None) -> None:
        self._native = native
        self._task_id = task_id
        #: After the end: ``True`` if it committed, ``False`` if another
        #: transaction of its task id had, ``None`` if it did not commit.
        self.committed: Optional[bool] = None

    @property
    def id(self) -> int:
        """The transaction's id at the coordinator."""
        return self._native.id

    @property
    def ended(self) -> bool:
        """Whether it has ended (committed, aborted, or lost a conflict)."""
        return self._native.ended

    def read(self, path: str, offset: int = 0, size: int = -1) -> bytes:
        """``size`` bytes (all if negative) of the file at ``path`` from
        ``offset``, as this transaction sees them."""
        return self._native.read(path, offset, size)

    def size(self, path: str) -> int:
        """The size of the file at ``path``, as this transaction sees it."""
        return self._native.size(path)

    def write(self, path: str, data: Any, offset: int = 0) -> int:
        """Writes ``data`` (any bytes-like object) at ``offset`` of the file
        at ``path``, growing it if needed; returns the bytes written."""
        return self._native.write(path, data, offset)

    def append(self, path: str, data: Any) -> int:
        """Appends ``data`` to the file at ``path``; returns the bytes written."""
        return self._native.append(path, data)

    def truncate(self, path: str, size: int) -> None:
        """Cuts or extends the file at ``path`` to ``size`` bytes."""
        self._native.truncate(path, size)

    def exists(self, path: str) -> bool:
        """Whether ``path`` names a file or directory in this transaction."""
        return self._native.exists(path)

    def mkdir(self, path: str) -> None:
        """Makes the directory ``path`` (its parent must exist):
        ``FileExistsError`` if the path is taken."""
        self._native.mkdir(path)

    def rm(self, path: str, recursive: bool = False) -> None:
        """Removes the file or directory at ``path``: a directory must be
        empty unless ``recursive`` (one this transaction emptied is checked
        at commit)."""
        self._native.rm(path, recursive)

    def mv(self, src: str, dst: str) -> None:
        """Moves the entry at ``src`` to ``dst``, replacing a file there (or
        an empty directory, by a directory)."""
        self._native.mv(src, dst)

    def open(self, path: str, mode: str = "rb") -> "TransactionFile":
        """A binary file object over the file at ``path`` in this
        transaction: ``"rb"`` reads, ``"r+b"`` reads and writes from the
        start, ``"ab"`` appends, ``"wb"`` empties it first, ``"xb"`` makes
        it (``FileExistsError`` if the path is taken); ``"wb"`` and ``"ab"``
        make a file at a free path too. Reads and writes go through the
        transaction (its snapshot, its private writes)."""
        if mode not in ("rb", "r+b", "rb+", "ab", "wb", "xb"):
            raise ValueError(f"mode {mode!r}: a transaction opens files 'rb', 'r+b', 'ab', 'wb' or 'xb'")
        if mode in ("rb", "r+b", "rb+"):
            self.size(path)  # FileNotFoundError, IsADirectoryError
        if mode == "xb" and self.exists(path):
            raise FileExistsError(errno.EEXIST, f"{path}: file exists")
        if mode in ("wb", "ab", "xb"):
            self.write(path, b"")
        if mode == "wb":
            self.truncate(path, 0)
        return TransactionFile(self, path, "wb" if mode == "xb" else mode)

    def region(self, path: str) -> "TransactionRegion":
        """The memory region at ``path`` in this transaction (its bytes as
        the transaction sees them: ``read``, ``write``, ``size``).
        ``FileNotFoundError`` if there is none,
        :class:`tierpool.InvalidArgument` (a ``ValueError``) if ``path`` is
        not a region."""
        return TransactionRegion(self, path, self._native.region_size(path))

    def commit(self, task_id: Optional[str] = None) -> bool:
        """Publishes every write at once. Returns ``True``, or ``False`` if a
        transaction with the same ``task_id`` (1 to 256 bytes) committed
        before (then nothing of this one is visible: of the attempts at one
        task, exactly one commits). Raises :class:`tierpool.Conflict` if it
        lost to an earlier committer. If the coordinator cannot be reached
        while it commits, ``tierpool.Unavailable`` leaves the outcome
        unknown: run the task again with the same ``task_id`` to find out.
        Files written beneath an attached under-store are then written
        below as their write modes say; an error there (its message starts
        ``transaction N committed, but``; :attr:`committed` is then ``True``)
        leaves the commit done and the files owed to ``sync``."""
        try:
            self.committed = self._native.commit(task_id if task_id is not None else self._task_id)
        except OSError as e:
            if f"transaction {self.id} committed, but " in str(e):
                self.committed = True  # done; only the under-store lags
            raise
        return self.committed

    def abort(self) -> None:
        """Ends it without committing (nothing of it was ever visible)."""
        self._native.abort()

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._native.ended:
            self.commit()

    def __repr__(self) -> str:
        return f"<tierpool.Transaction {self.id}{' ended' if self.ended else ''}>"


class TransactionFile(io.RawIOBase):
    """A file of a :class:`Transaction`, from :meth:`Transaction.open`."""

    def __init__(self, tx: Transaction, path: str, mode: str) -> None:
        super().__init__()
        self._tx = tx
        self.name = path
        self.mode = mode
        self._pos = tx.size(path) if mode == "ab" else 0

    def readable(self) -> bool:
        return self.mode != "ab" and self.mode != "wb"

    def writable(self) -> bool:
        return self.mode != "rb"

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._tx.size(self.name) + offset
        else:
            raise ValueError(f"whence {whence!r}: SEEK_SET, SEEK_CUR or SEEK_END")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def read(self, size: int = -1) -> bytes:
        if not self.readable():
            raise io.UnsupportedOperation(f"{self.name}: not open for reading")
        data = self._tx.read(self.name, self._pos, size if size is not None else -1)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: Any) -> int:
        data = self.read(len(memoryview(b)))
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)

    def write(self, b: Any) -> int:
        if not self.writable():
            raise io.UnsupportedOperation(f"{self.name}: not open for writing")
        if self.mode == "ab":
            self._pos = self._tx.size(self.name)
        n = self._tx.write(self.name, b, self._pos)
        self._pos += n
        return n

    def truncate(self, size: Optional[int] = None) -> int:
        if not self.writable():
            raise io.UnsupportedOperation(f"{self.name}: not open for writing")
        size = self._pos if size is None else size
        self._tx.truncate(self.name, size)
        return size


class TransactionRegion:
    """A memory region's bytes in a transaction, from :meth:`Transaction.region`.

    Reads see the region as it was when the transaction began, with this
    transaction's own writes; writes are seen by others once it commits,
    together with its files. Its size is fixed: a write past the end raises
    :class:`tierpool.InvalidArgument` (a ``ValueError``). Writes of the region outside transactions (its
    mapped memory, flushed in place) are not ordered with transactions.
    """

    def __init__(self, tx: Transaction, path: str, size: int) -> None:
        self._tx = tx
        self.path = path
        #: The region's size in bytes.
        self.size = size

    def read(self, offset: int = 0, size: int = -1) -> bytes:
        """``size`` bytes (to the end if negative) from ``offset``."""
        return self._tx._native.region_read(self.path, offset, size)

    def write(self, offset: int, data: Any) -> int:
        """Writes ``data`` (any bytes-like object) at ``offset``; returns the
        bytes written."""
        return self._tx._native.region_write(self.path, data, offset)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"<tierpool.TransactionRegion {self.path} of {self.size} bytes in transaction {self._tx.id}>"
