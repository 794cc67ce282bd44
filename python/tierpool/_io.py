"""Standard :mod:`io` objects over the native reader and writer.

``Client.open`` returns a :class:`TierpoolReader` (an
:class:`io.BufferedReader`: seekable, ``readinto`` straight into the caller's
buffer for large reads, and reads that allocate no more than the file holds) or a
:class:`TierpoolWriter` (an :class:`io.BufferedWriter` that publishes the
file atomically on ``close`` and publishes nothing if the ``with`` block
raises), wrapped in :class:`io.TextIOWrapper` for text modes.
"""

from __future__ import annotations

import io
from typing import Any, Optional

from tierpool import _native
from tierpool._native import FileInfo

#: Buffer size of file objects: small reads are served from it, reads at
#: least this large go straight into the caller's buffer.
DEFAULT_BUFFER_SIZE = 1 << 20


class RawReader(io.RawIOBase):
    """Unbuffered, seekable reads of one version of a pool file."""

    def __init__(self, native: _native.Reader) -> None:
        super().__init__()
        self._r = native
        self._pos = 0

    @property
    def name(self) -> str:
        return self._r.path

    @property
    def size(self) -> int:
        """Size of the file version being read."""
        return self._r.size

    @property
    def info(self) -> FileInfo:
        """Metadata of the file version being read."""
        return self._r.info

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        n = self._r.readinto(buffer, self._pos)
        self._pos += n
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (all that is left if ``size`` is negative or
        None); only what the file holds is allocated, however large ``size``."""
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if size is None or size < 0:
            return self.readall()
        data = self._r.read(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        data = self._r.read(self._pos)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._r.size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos


class TierpoolReader(io.BufferedReader):
    """A buffered pool file being read: an :class:`io.BufferedReader` whose
    ``read(n)`` and ``read1(n)`` allocate at most what is left of the file
    (the standard one allocates ``n`` bytes first, so ``read(2**62)`` on a
    small file would raise ``MemoryError``)."""

    raw: RawReader

    def _clamp(self, size: Optional[int]) -> Optional[int]:
        if size is None or size <= 0:
            return size
        return min(size, max(0, self.raw.size - self.tell()))

    def read(self, size: Optional[int] = -1) -> bytes:
        return super().read(self._clamp(size))

    def read1(self, size: int = -1) -> bytes:
        return super().read1(self._clamp(size))  # type: ignore[arg-type]


class RawWriter(io.RawIOBase):
    """Unbuffered writes of a new version of a pool file, published on close."""

    def __init__(self, native: _native.Writer) -> None:
        super().__init__()
        self._w = native
        self._aborted = False
        self.info: Optional[FileInfo] = None
        """Metadata of the published file, once closed."""

    @property
    def name(self) -> str:
        return self._w.path

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._aborted:
            # An aborted file swallows what its buffer still flushes.
            return memoryview(data).nbytes
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return self._w.write(data)

    def tell(self) -> int:
        return self._w.size

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._aborted:
                self.info = self._w.close()
        finally:
            super().close()

    def abort(self) -> None:
        """Discards the file: nothing is published, stored chunks are freed."""
        if self.closed:
            return
        self._aborted = True
        try:
            self._w.abort()
        finally:
            super().close()


class TierpoolWriter(io.BufferedWriter):
    """A buffered pool file being written.

    Nothing is visible at the path until :meth:`close`, which publishes the
    whole file in one atomic step. Leaving a ``with`` block by an exception
    calls :meth:`abort` instead: the file is not published.
    """

    raw: RawWriter

    @property
    def info(self) -> Optional[FileInfo]:
        """Metadata of the published file, once closed."""
        return self.raw.info

    def abort(self) -> None:
        """Discards the file: nothing is published, stored chunks are freed."""
        if self.closed:
            return
        self.raw.abort()
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()


def parse_mode(mode: str) -> tuple[str, bool]:
    """``("r" | "w" | "a" | "x", binary)`` of an ``open`` mode, or ``ValueError``."""
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or len(mode) != len(set(mode)) or any(c not in "rwaxbt" for c in mode):
        raise ValueError(f"invalid mode {mode!r}: use one of r, w, a, x, optionally with b or t")
    if "b" in mode and "t" in mode:
        raise ValueError(f"invalid mode {mode!r}: binary and text at once")
    return kinds[0], "b" in mode


def open_file(
    native: _native.Client,
    path: str,
    mode: str,
    *,
    buffering: int,
    encoding: Optional[str],
    errors: Optional[str],
    newline: Optional[str],
    chunk_size: Optional[int],
    priority: Optional[int],
    pin: Optional[bool],
) -> Any:
    kind, binary = parse_mode(mode)
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode takes no encoding, errors or newline argument")
    if buffering == 0 and not binary:
        raise ValueError("can't have unbuffered text I/O")
    size = DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
    f: Any
    if kind == "r":
        if chunk_size is not None or priority is not None or pin is not None:
            raise ValueError("chunk_size, priority and pin apply to files opened for writing")
        raw: Any = RawReader(native.open_reader(path))
        f = raw if buffering == 0 else TierpoolReader(raw, size)
    else:
        raw = RawWriter(native.open_writer(path, kind, chunk_size, priority, pin))
        f = raw if buffering == 0 else TierpoolWriter(raw, size)
    if binary:
        return f
    text = io.TextIOWrapper(f, encoding=encoding or "utf-8", errors=errors, newline=newline)
    text.mode = mode  # type: ignore[misc]
    return text
