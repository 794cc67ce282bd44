"""The :class:`Region`: pooled memory with a name, used as bytes or as numpy."""

import ctypes
import weakref
from typing import Any, Dict, Optional, Sequence, Union

from tierpool import _native
from tierpool._native import InvalidArgument


class Region:
    """An open memory region: ``size`` bytes of pooled memory at a path.

    Made by :meth:`tierpool.Client.alloc` (a new, zero-filled region whose
    space is reserved at once) or :meth:`tierpool.Client.region` (an existing
    one). A local cache of ``cache`` bytes holds recently used chunks; a miss
    fetches only the 4 KiB pages it needs (with read-ahead when access is
    sequential), and only pages that were written are sent back — when their
    chunk leaves the cache, on :meth:`flush` and on :meth:`close`.

    :meth:`as_array` gives a numpy array over the whole region that pages
    itself in on first touch, with resident memory bounded by the cache, so
    numpy code runs unchanged on arrays larger than this machine's memory.

    After :meth:`flush` or :meth:`close`, a reader that opens the region sees
    every write made before. Use it as a context manager to close it.
    """

    def __init__(self, native: "_native.Region") -> None:
        self._native = native
        self._exported: "list[weakref.ref[Any]]" = []
        self._closed = False

    @property
    def path(self) -> str:
        return self._native.path

    @property
    def size(self) -> int:
        return self._native.size

    @property
    def readonly(self) -> bool:
        """Opened with ``readonly=True`` (pages shared with other readers)."""
        return self._native.readonly

    @property
    def chunk_size(self) -> int:
        return self._native.chunk_size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<tierpool.Region {self.path!r} size={self.size} {state}>"

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``."""
        return self._native.read(offset, length)

    def readinto(self, offset: int, buffer: Any) -> int:
        """Fills ``buffer`` (any writable buffer, e.g. a numpy array) from ``offset``."""
        return self._native.readinto(offset, buffer)

    def write(self, offset: int, data: Any) -> None:
        """Writes ``data`` (bytes or any buffer) at ``offset``."""
        self._native.write(offset, data)

    def flush(self) -> None:
        """Sends every dirty page to the pool."""
        self._native.flush()

    def checkpoint(self, name: str) -> Dict[str, Any]:
        """Flushes this handle's writes and takes checkpoint ``name`` of the
        region: only the chunks changed since its previous checkpoint are
        copied (on the workers that hold them); the others are shared with
        it. Read it back with ``Client.region(path, checkpoint=name)``, roll
        back with ``Client.restore_region(path, name)``. Returns ``{"path",
        "name", "chunks", "copied", "bytes_copied", "since"}`` (``since``:
        the earlier checkpoint it shares unchanged chunks with, or None)."""
        return self._native.checkpoint(name)

    def restore(self, name: str) -> Dict[str, Any]:
        """Rolls the region back to its checkpoint ``name``: the chunks that
        differ are copied back on the workers, this handle's writes not
        flushed yet are dropped, and its pages (arrays over it included)
        read the checkpoint's bytes from now on. ``tierpool.Busy`` while
        another handle of the region is open, here or in another client.
        Returns what :meth:`checkpoint` does (``since`` is None)."""
        return self._native.restore(name)

    def stats(self) -> Dict[str, int]:
        """``bytes_fetched``, ``bytes_written_back``, ``cache_hits``, ``cache_misses``,
        and ``chunks_written_back`` (times a chunk with dirty pages went back:
        what whole-chunk write-back would have sent, in chunks)."""
        return self._native.stats()

    def as_array(self, dtype: Any = "uint8", shape: Optional[Union[int, Sequence[int]]] = None, offset: int = 0) -> Any:
        """A writable :class:`numpy.ndarray` over the region's memory (from
        ``offset`` bytes; ``shape`` defaults to as many items as fit).

        No bytes are fetched until an element is touched. The array keeps the
        region's memory mapped for as long as it lives, even after
        :meth:`close`; writes made through it reach the pool on :meth:`flush`,
        on :meth:`close`, or when the region is released.
        """
        import numpy as np

        addr, length = self._native.memory()
        dt = np.dtype(dtype)
        if shape is None:
            shape = ((length - offset) // dt.itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        if offset < 0 or any(d < 0 for d in shape):
            raise InvalidArgument(f"{self.path}: offset {offset} and shape {tuple(shape)} must not be negative")
        count = int(np.prod(shape, dtype=object)) if len(shape) else 1
        need = count * dt.itemsize
        if offset + need > length:
            raise InvalidArgument(f"{self.path}: {need} bytes at offset {offset} do not fit in {length} bytes")
        raw = (ctypes.c_char * need).from_address(addr + offset)
        # The array's base is `raw`, which keeps the native region (and so
        # the mapping) alive for as long as any array over it exists.
        raw._tierpool_region = self._native
        self._exported = [r for r in self._exported if r() is not None] + [weakref.ref(raw)]
        arr = np.frombuffer(raw, dtype=dt, count=count).reshape(shape)
        if self.readonly:
            arr.flags.writeable = False
        return arr

    def close(self) -> None:
        """Writes back what is dirty and releases the local cache (arrays made by
        :meth:`as_array` keep their memory until they are gone)."""
        if self._closed:
            return
        self._native.flush()
        self._closed = True
        if not self._arrays_alive():
            self._native.close()

    def free(self) -> None:
        """Deletes the region from the pool (unsaved writes are dropped).

        Raises :class:`BufferError` while arrays made by :meth:`as_array` are
        still alive: their memory would vanish under them."""
        if self._arrays_alive():
            raise BufferError(f"{self.path}: arrays over the region are still alive; delete them before free()")
        self._closed = True
        self._native.free()

    def _arrays_alive(self) -> bool:
        return any(r() is not None for r in self._exported)

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
