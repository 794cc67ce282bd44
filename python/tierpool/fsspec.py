"""An fsspec filesystem for ``tierpool://`` URLs.

Registered through the ``fsspec.specs`` entry point, so with the package
installed ``fsspec.open("tierpool://data/x.csv")``, ``pandas.read_parquet``,
``DataFrame.to_parquet``, ``pyarrow.dataset`` (pass ``filesystem=``) and
``dask.dataframe.read_csv("tierpool://logs/*.csv")`` work directly.

``tierpool://data/x.csv`` names the pool path ``/data/x.csv``: everything after
``tierpool://`` is the path. The pool is found through the ``address`` storage
option, else ``$TIERPOOL_COORDINATOR``, else ``127.0.0.1:7700``.

Files are the standard io objects of :meth:`tierpool.Client.open`. Writing
creates missing parent directories (as object stores do), and a file appears
only when closed, atomically. ``mv`` of one path is an atomic rename.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Union

from fsspec.spec import AbstractFileSystem
from fsspec.utils import stringify_path

from tierpool._client import Client, resolve_address
from tierpool._native import FileInfo

PROTOCOL = "tierpool"


class _ResolveAddress(type(AbstractFileSystem)):  # type: ignore[misc]
    """Resolves the default address before fsspec looks up its instance
    cache, so a cached instance never points at a pool that has gone."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not args and kwargs.get("address") is None and kwargs.get("client") is None:
            kwargs["address"] = resolve_address(None)
        return super().__call__(*args, **kwargs)


class TierpoolFileSystem(AbstractFileSystem, metaclass=_ResolveAddress):
    """fsspec filesystem over a tierpool pool.

    Parameters
    ----------
    address:
        Coordinator ``host:port``; default ``$TIERPOOL_COORDINATOR``, then
        ``127.0.0.1:7700``.
    client:
        An existing :class:`tierpool.Client` to use instead of connecting.
    timeout:
        Seconds to wait for the coordinator when connecting.
    secret_file:
        The file holding the pool's secret; default: the one ``tierpool up``
        recorded for the address, else ``$TIERPOOL_SECRET_FILE``.
    """

    protocol = (PROTOCOL,)
    root_marker = "/"

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        client: Optional[Client] = None,
        timeout: float = 3.0,
        secret_file: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.client = client if client is not None else Client(address, timeout=timeout, secret_file=secret_file)
        self.address = self.client.address

    # ---- paths -----------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = stringify_path(path)
        for prefix in (f"{PROTOCOL}://", f"{PROTOCOL}::", f"{PROTOCOL}:"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        return "/" + path.strip("/")

    def unstrip_protocol(self, name: str) -> str:
        if name.startswith(f"{PROTOCOL}://"):
            return name
        return f"{PROTOCOL}://{name.lstrip('/')}"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> Dict[str, Any]:
        return {}

    # ---- metadata --------------------------------------------------------

    @staticmethod
    def _entry(i: FileInfo) -> Dict[str, Any]:
        is_dir = i.is_dir()
        return {
            "name": i.path,
            "size": 0 if is_dir else i.size,
            # Symlinks and special files (made through a mount) are not files to read.
            "type": "directory" if is_dir else {"link": "link", "other": "other"}.get(i.kind, "file"),
            "mtime": i.mtime,
            "created": i.ctime,
            "mode": i.mode,
            "priority": i.priority,
            "pinned": i.pinned,
            "chunk_size": i.chunk_size,
            "inode": i.inode,
            "replicas": i.replicas,
            "placement": i.placement,
            "inline": i.inline,
        }

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Union[List[Dict[str, Any]], List[str]]:
        entries = [self._entry(i) for i in self.client.ls(self._strip_protocol(path), detail=True)]
        if detail:
            return entries
        return [e["name"] for e in entries]

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        return self._entry(self.client.stat(self._strip_protocol(path)))

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.client.exists(self._strip_protocol(path))

    def created(self, path: str) -> datetime:
        return datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).ctime, tz=timezone.utc)

    def modified(self, path: str) -> datetime:
        return datetime.fromtimestamp(self.client.stat(self._strip_protocol(path)).mtime, tz=timezone.utc)

    def ukey(self, path: str) -> str:
        # A file version never changes and a new version gets a new inode.
        i = self.client.stat(self._strip_protocol(path))
        return f"{i.inode}-{i.size}"

    def checksum(self, path: str) -> int:
        return hash(self.ukey(path))

    # ---- directories -----------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if create_parents and self.client.exists(path):
            raise FileExistsError(f"{path}: file exists")
        self.client.mkdir(path, parents=create_parents)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        if not exist_ok and self.client.exists(path):
            raise FileExistsError(f"{path}: file exists")
        self.client.mkdir(path, parents=True)

    def rmdir(self, path: str) -> None:
        path = self._strip_protocol(path)
        if not self.client.stat(path).is_dir():
            raise NotADirectoryError(f"{path}: not a directory")
        self.client.rm(path)

    # ---- removal and renames --------------------------------------------

    def rm_file(self, path: str) -> None:
        self.client.rm(self._strip_protocol(path))

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        if maxdepth is not None:
            super().rm(path, recursive=recursive, maxdepth=maxdepth)
            return
        # Whole subtrees go in one metadata operation each.
        paths = self.expand_path(path, recursive=False)
        removed: List[str] = []
        for p in sorted(paths):
            if any(p.startswith(r.rstrip("/") + "/") for r in removed):
                continue
            self.client.rm(p, recursive=recursive)
            removed.append(p)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Optional[int] = None, **kwargs: Any) -> None:
        if isinstance(path1, str) and isinstance(path2, str) and not self._has_magic(path1) and maxdepth is None:
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            if src == dst:
                return
            if (path2.endswith("/") or self.isdir(dst)) and src != "/":
                dst = f"{dst.rstrip('/')}/{src.rsplit('/', 1)[-1]}"
            self.client.mv(src, dst)
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    @staticmethod
    def _has_magic(path: str) -> bool:
        return any(c in path for c in "*?[")

    # ---- data ------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Any:
        if not autocommit:
            raise NotImplementedError("tierpool files are published atomically on close; transactions are not supported")
        path = self._strip_protocol(path)
        buffering = block_size if block_size and block_size > 1 else -1
        options = {k: kwargs[k] for k in ("chunk_size", "priority", "pin") if k in kwargs}
        if "r" not in mode:
            self._ensure_parent(path)
        return self.client.open(path, mode, buffering=buffering, **options)

    def _ensure_parent(self, path: str) -> None:
        parent = self._parent(path)
        if parent != "/":
            self.client.mkdir(parent, parents=True)

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any) -> bytes:
        path = self._strip_protocol(path)
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self.client.stat(path).size
            start = max(0, size + start) if start is not None and start < 0 else start
            end = max(0, size + end) if end is not None and end < 0 else end
        return self.client.read_range(path, start or 0, end)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        self._ensure_parent(path)
        options = {k: kwargs[k] for k in ("chunk_size", "priority", "pin") if k in kwargs}
        self.client.put(value, path, overwrite=(mode != "create"), **options)

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        """As fsspec's ``cat``; several whole files are read at once
        (``Client.get_many``)."""
        paths = self.expand_path(path, recursive=recursive)
        one = len(paths) == 1 and not isinstance(path, list) and paths[0] == self._strip_protocol(path)
        if one or kwargs:
            return super().cat(path, recursive=recursive, on_error=on_error, **kwargs)
        out: Dict[str, Any] = {}
        for p, r in zip(paths, self.client.get_many(paths)):
            if isinstance(r, Exception):
                if on_error == "raise":
                    raise r
                if on_error == "omit":
                    continue
            out[p] = r
        return out

    def pipe(self, path: Any, value: Optional[bytes] = None, **kwargs: Any) -> None:
        """As fsspec's ``pipe``; a dict of paths to bytes is written at once
        (``Client.put_many``), its first failure raised once all were tried."""
        if not isinstance(path, dict):
            return super().pipe(path, value, **kwargs)
        items = [(self._strip_protocol(k), v) for k, v in path.items()]
        for parent in sorted({self._parent(p) for p, _ in items}):
            if parent != "/":
                self.client.mkdir(parent, parents=True)
        options = {k: kwargs[k] for k in ("chunk_size", "priority", "pin") if k in kwargs}
        overwrite = kwargs.get("mode", "overwrite") != "create"
        for r in self.client.put_many(items, overwrite=overwrite, **options):
            if isinstance(r, Exception):
                raise r
        return None

    def put_file(self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any) -> None:
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        self._ensure_parent(rpath)
        info = self.client.put(os.fspath(lpath), rpath, overwrite=(mode != "create"))
        if callback is not None:
            callback.set_size(info.size)
            callback.relative_update(info.size)

    def get_file(self, rpath: str, lpath: Any, callback: Any = None, outfile: Any = None, **kwargs: Any) -> None:
        rpath = self._strip_protocol(rpath)
        if outfile is None and hasattr(lpath, "write"):
            outfile = lpath
        if outfile is not None:
            n = self.client.get(rpath, outfile)
        elif self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        else:
            parent = os.path.dirname(os.fspath(lpath))
            if parent:
                os.makedirs(parent, exist_ok=True)
            n = self.client.get(rpath, os.fspath(lpath))
        if callback is not None:
            callback.set_size(n)
            callback.relative_update(n)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.client.stat(src).is_dir():
            self.makedirs(dst, exist_ok=True)
            return
        self._ensure_parent(dst)
        with self.client.open(src, "rb") as fin, self.client.open(dst, "wb") as fout:
            shutil.copyfileobj(fin, fout, 4 << 20)

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if truncate or not self.client.exists(path):
            self.pipe_file(path, b"")
        else:
            raise NotImplementedError("tierpool cannot update a file's times without rewriting it")
