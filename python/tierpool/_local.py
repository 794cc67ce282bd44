""":func:`local`: a throw-away pool on this machine, for notebooks and tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import IO, Any, List, Optional, Union

from tierpool._client import ADDRESS_ENV, Client

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LocalPool:
    """A coordinator and ``workers`` workers running as child processes, with
    their state in a temporary directory. Use it as a context manager::

        with tierpool.local(workers=2, mem="256MiB", disk="1GiB") as client:
            client.put(b"x", "/x")

    Entering starts the pool and returns a connected :class:`Client`;
    leaving stops the processes and deletes the directory. While the pool runs,
    ``$TIERPOOL_COORDINATOR`` points at it (unless ``set_env=False``), so
    :func:`tierpool.connect`, ``fsspec.open("tierpool://...")`` and Dask
    workers started meanwhile find it.
    """

    def __init__(
        self,
        workers: int = 2,
        mem: Union[int, str] = "256MiB",
        disk: Union[int, str] = "1GiB",
        *,
        port: int = 0,
        partitions: int = 4096,
        set_env: bool = True,
        timeout: float = 30.0,
    ) -> None:
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self.workers = workers
        self.mem = str(mem)
        self.disk = str(disk)
        self.port = port
        self.partitions = partitions
        self.set_env = set_env
        self.timeout = timeout
        self.dir: Optional[str] = None
        """State and log directory of the running pool."""
        self.client: Optional[Client] = None
        self._procs: List[subprocess.Popen[bytes]] = []
        self._logs: List[IO[bytes]] = []
        self._old_env: Optional[str] = None
        self._owner = os.getpid()

    @property
    def address(self) -> str:
        """Where the coordinator listens, ``host:port``."""
        if self.client is None:
            raise RuntimeError("the pool is not running")
        return self.client.address

    def _spawn(self, name: str, args: List[str]) -> "subprocess.Popen[bytes]":
        assert self.dir is not None
        log = open(os.path.join(self.dir, "logs", f"{name}.log"), "wb")
        self._logs.append(log)
        cmd = [sys.executable, "-m", "tierpool._serve", *args, "--watch-parent"]
        # The servers import this very package, whatever the caller's cwd holds.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        p = subprocess.Popen(
            cmd,
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._procs.append(p)
        return p

    def _log_tail(self, name: str) -> str:
        assert self.dir is not None
        try:
            with open(os.path.join(self.dir, "logs", f"{name}.log"), "rb") as f:
                lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
            return lines[-1] if lines else "(no output)"
        except OSError:
            return "(no log)"

    def _wait(self, what: str, name: str, proc: "subprocess.Popen[bytes]", ready: Any) -> Any:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            value = ready()
            if value:
                return value
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with status {proc.returncode}: {self._log_tail(name)}")
            time.sleep(0.02)
        raise RuntimeError(f"{what} did not start within {self.timeout} s: {self._log_tail(name)}")

    def start(self) -> Client:
        """Starts the pool and returns a connected client."""
        if self.client is not None:
            return self.client
        self._owner = os.getpid()
        self.dir = tempfile.mkdtemp(prefix="tierpool-local-")
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Client:
        assert self.dir is not None
        os.makedirs(os.path.join(self.dir, "logs"))
        cdir = os.path.join(self.dir, "coordinator")
        addr_file = os.path.join(cdir, "coordinator.addr")
        coord = self._spawn(
            "coordinator",
            ["coordinator", "--dir", cdir, "--listen", f"127.0.0.1:{self.port}", "--partitions", str(self.partitions)],
        )

        def read_addr() -> Optional[str]:
            try:
                with open(addr_file) as f:
                    return f.read().strip() or None
            except FileNotFoundError:
                return None

        address = self._wait("the coordinator", "coordinator", coord, read_addr)
        for i in range(self.workers):
            wdir = os.path.join(self.dir, f"worker-{i}")
            args = ["worker", "--dir", wdir, "--coordinator", address, "--mem", self.mem, "--disk", self.disk]
            self._spawn(f"worker-{i}", args)
        client = Client(address)
        for i, p in enumerate(self._procs[1:]):
            # Worker i is up once it wrote its address; all are up once alive.
            wfile = os.path.join(self.dir, f"worker-{i}", "worker.addr")
            self._wait(f"worker {i}", f"worker-{i}", p, lambda: os.path.exists(wfile))

        def all_alive() -> bool:
            return sum(w["alive"] for w in client.status()["workers"]) >= self.workers

        self._wait("the workers", "worker-0", coord, all_alive)
        self.client = client
        if self.set_env:
            self._old_env = os.environ.get(ADDRESS_ENV)
            os.environ[ADDRESS_ENV] = address
        return client

    def stop(self) -> None:
        """Stops every process of the pool and deletes its directory.

        Only the process that started the pool stops it: in a child forked
        from it (which inherits this object), this does nothing."""
        if os.getpid() != self._owner:
            return
        if self.set_env and self.client is not None:
            if os.environ.get(ADDRESS_ENV) == self.client.address:
                if self._old_env is None:
                    os.environ.pop(ADDRESS_ENV, None)
                else:
                    os.environ[ADDRESS_ENV] = self._old_env
        self.client = None
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self._procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> Client:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "_procs", None):
            self.stop()


def local(
    workers: int = 2,
    mem: Union[int, str] = "256MiB",
    disk: Union[int, str] = "1GiB",
    *,
    port: int = 0,
    partitions: int = 4096,
    set_env: bool = True,
    timeout: float = 30.0,
) -> LocalPool:
    """An embedded pool in a temporary directory, as a context manager that
    yields a connected :class:`Client` (``client.address`` says where it
    listens) and stops the pool on exit::

        with tierpool.local(workers=2, mem="256MiB", disk="1GiB") as client:
            ...

    ``mem`` and ``disk`` are each worker's budgets (bytes or sizes such as
    ``"512MiB"``). ``port=0`` picks a free port. The servers run as child
    processes of this Python (``python -m tierpool._serve``) and stop by
    themselves if it dies.
    """
    return LocalPool(workers, mem, disk, port=port, partitions=partitions, set_env=set_env, timeout=timeout)
