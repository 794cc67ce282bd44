""":func:`local`: a throw-away pool on this machine, for notebooks and tests.

The pool is started and stopped by the ``tierpool`` binary, with ``tierpool
up`` and ``tierpool down``: the launcher of the command line, so there is one
way to spawn servers, wait until they are ready and stop them. ``up
--stop-with PID`` makes the servers exit by themselves when this Python
process is gone, however it ends (even ``kill -9``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Union

from tierpool import _native
from tierpool._bin import find_binary
from tierpool._client import ADDRESS_ENV, SECRET_FILE_ENV, Client
from tierpool._native import InvalidArgument


def _size_arg(value: Union[int, str], name: str) -> str:
    """A byte size for ``up``, checked now: bytes (an int) or ``"512MiB"``."""
    if isinstance(value, str):
        return str(_native.parse_size(value))
    if not isinstance(value, int):
        raise TypeError(f"{name} must be a number of bytes or a size such as '256MiB', not {value!r}")
    if value < 0:
        raise InvalidArgument(f"{name} must not be negative, not {value}")
    return str(value)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


class LocalPool:
    """A coordinator and ``workers`` workers running as background processes,
    with their state in a temporary directory. Use it as a context manager::

        with tierpool.local(workers=2, mem="256MiB", disk="1GiB") as client:
            client.put(b"x", "/x")

    Entering starts the pool and returns a connected :class:`Client`;
    leaving stops the processes and deletes the directory. While the pool runs,
    ``$TIERPOOL_COORDINATOR`` points at it and ``$TIERPOOL_SECRET_FILE`` at its
    secret (unless ``set_env=False``; both are restored on exit), so
    :func:`tierpool.connect`, ``fsspec.open("tierpool://...")`` and Dask
    workers started meanwhile find it. ``tierpool up`` also records the secret
    for the pool's address in ``~/.tierpool/pools/`` until the pool stops, so
    ``tierpool.connect(address)`` finds it on this machine even with
    ``set_env=False``.
    """

    def __init__(
        self,
        workers: int = 2,
        mem: Union[int, str] = "256MiB",
        disk: Union[int, str] = "1GiB",
        *,
        port: int = 0,
        partitions: int = 4096,
        replicas: Optional[int] = None,
        set_env: bool = True,
        timeout: float = 30.0,
        log_sync: str = "always",
        prefault: bool = False,
    ) -> None:
        if workers < 1:
            raise InvalidArgument("a pool needs at least one worker")
        if not (isinstance(timeout, (int, float)) and 0 < timeout < math.inf):
            raise InvalidArgument(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.workers = workers
        self.mem = _size_arg(mem, "mem")
        self.disk = _size_arg(disk, "disk")
        self.port = port
        self.partitions = partitions
        self.replicas = replicas
        self.set_env = set_env
        self.timeout = timeout
        self.log_sync = log_sync
        self.prefault = prefault
        self.dir: Optional[str] = None
        """State and log directory of the running pool."""
        self.pids: List[int] = []
        """Process ids of the running pool's coordinator, then its workers."""
        self.client: Optional[Client] = None
        self._binary: Optional[str] = None
        self.secret_file: Optional[str] = None
        """The running pool's secret file (in its directory)."""
        self._old_env: Dict[str, Optional[str]] = {}
        self._owner = os.getpid()

    @property
    def address(self) -> str:
        """Where the coordinator listens, ``host:port``."""
        if self.client is None:
            raise RuntimeError("the pool is not running")
        return self.client.address

    def start(self) -> Client:
        """Starts the pool and returns a connected client."""
        if self.client is not None:
            return self.client
        self._binary = find_binary()
        self._owner = os.getpid()
        self.dir = tempfile.mkdtemp(prefix="tierpool-local-")
        try:
            return self._start(self._binary, self.dir)
        except BaseException:
            self.stop()
            raise

    def _start(self, binary: str, directory: str) -> Client:
        wait = max(1, math.ceil(self.timeout))
        cmd = [
            binary, "up", "--json", "--dir", directory,
            "--port", str(self.port), "--workers", str(self.workers), "--partitions", str(self.partitions),
            "--mem", self.mem, "--disk", self.disk,
            "--stop-with", str(os.getpid()), "--timeout", str(wait), "--log-sync", self.log_sync,
        ]  # fmt: skip
        if self.replicas is not None:
            cmd += ["--replicas", str(self.replicas)]
        if self.prefault:
            cmd.append("--prefault")
        try:
            # `up` waits for the coordinator, then for the workers: twice `wait` at most.
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2 * wait + 10)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"`tierpool up` did not finish within {2 * wait + 10} s") from e
        if done.returncode == 2:
            raise InvalidArgument(_one_line(done.stderr))
        if done.returncode != 0:
            raise RuntimeError(f"the local pool did not start: {_one_line(done.stderr)}")
        up = json.loads(done.stdout)
        self.pids = [up["coordinator_pid"], *up["worker_pids"]]
        secret: str = up["secret_file"]
        self.secret_file = secret
        self.client = Client(up["coordinator"], secret_file=secret)
        if self.set_env:
            self._set_env({ADDRESS_ENV: self.client.address, SECRET_FILE_ENV: secret})
        return self.client

    def _set_env(self, values: Dict[str, str]) -> None:
        self._old_env = {name: os.environ.get(name) for name in values}
        os.environ.update(values)

    def _restore_env(self) -> None:
        """Puts back what :meth:`_set_env` changed, where no one changed it since."""
        assert self.client is not None
        ours = {ADDRESS_ENV: self.client.address, SECRET_FILE_ENV: self.secret_file}
        for name, old in self._old_env.items():
            if os.environ.get(name) != ours[name]:
                continue
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        self._old_env = {}

    def stop(self) -> None:
        """Stops every process of the pool (``tierpool down``) and deletes its
        directory.

        Only the process that started the pool stops it: in a child forked
        from it (which inherits this object), this does nothing."""
        if os.getpid() != self._owner:
            return
        if self.set_env and self.client is not None:
            self._restore_env()
        self.client = None
        self.secret_file = None
        directory, self.dir = self.dir, None
        if directory is None:
            return
        if self._binary is not None and os.path.exists(os.path.join(directory, "pool.json")):
            down = subprocess.run(
                [self._binary, "down", "--dir", directory],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if down.returncode != 0:
                # The servers still stop when this process exits (--stop-with).
                warnings.warn(f"tierpool down: {_one_line(down.stderr)}", RuntimeWarning, stacklevel=2)
        self.pids = []
        shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> Client:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "dir", None) is not None:
            self.stop()


def local(
    workers: int = 2,
    mem: Union[int, str] = "256MiB",
    disk: Union[int, str] = "1GiB",
    *,
    port: int = 0,
    partitions: int = 4096,
    replicas: Optional[int] = None,
    set_env: bool = True,
    timeout: float = 30.0,
    log_sync: str = "always",
    prefault: bool = False,
) -> LocalPool:
    """An embedded pool in a temporary directory, as a context manager that
    yields a connected :class:`Client` (``client.address`` says where it
    listens) and stops the pool on exit::

        with tierpool.local(workers=2, mem="256MiB", disk="1GiB") as client:
            ...

    ``mem`` and ``disk`` are each worker's budgets (bytes or sizes such as
    ``"512MiB"``). ``replicas`` is the copies of each chunk the pool keeps,
    on distinct workers (``tierpool up --replicas``; default 2, or 1 with
    one worker). ``port=0`` picks a free port. The servers are started by
    the ``tierpool`` binary (``tierpool up``): ``$TIERPOOL_BIN`` if set, else
    the one shipped in the package, else ``tierpool`` on PATH. They stop by
    themselves if this process dies. ``timeout`` bounds the wait for the coordinator, and
    then for the workers, to be ready. ``log_sync`` is when the metadata log
    is fsynced (``tierpool up --log-sync``): ``"always"``, before each change
    is acknowledged, or a period such as ``"10ms"``, after which changes are
    acknowledged once written (safe from the coordinator's process dying,
    not from a crash of the machine). With ``prefault``, each worker fills
    its chunk buffers ahead, its whole ``mem`` (at least 16 buffers of 4 MiB;
    ``tierpool up --prefault``):
    the first large writes go several times faster, and the workers hold
    that memory from the start.
    """
    return LocalPool(
        workers,
        mem,
        disk,
        port=port,
        partitions=partitions,
        replicas=replicas,
        set_env=set_env,
        timeout=timeout,
        log_sync=log_sync,
        prefault=prefault,
    )
