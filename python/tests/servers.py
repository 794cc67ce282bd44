"""Real under-store servers for the Python tests, started by the tests
themselves: an S3 server (s3s-fs, a real S3 implementation over a directory)
and an HDFS NameNode with a DataNode (Hadoop's minicluster, in a JVM).

The binaries come from ``TIERPOOL_S3S_FS`` and ``TIERPOOL_HDFS_LIB``
(scripts/test-python.sh sets both), else from the scripts that install them
once into ``~/.cache/tierpool``. Each server runs beside a shell that kills
it once the process that started it is gone, however that process ends, and
its files are removed when it is stopped.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Runs "$@" and kills it once $OWNER (the test process) is gone.
WATCH = """"$@" & child=$!
while kill -0 "$OWNER" 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done
kill -9 $child 2>/dev/null"""


def _installed(env: str, script: str) -> str:
    path = os.environ.get(env)
    if path:
        return path
    out = subprocess.run(["bash", str(ROOT / "scripts" / script)], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A process in a scratch directory, killed and cleaned up by ``stop``."""

    proc: Optional[subprocess.Popen] = None

    def __init__(self) -> None:
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="tierpool-store-"))
        self.log_path = self.root / "server.log"

    def _spawn(self, argv: list, ready, within: float) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(["sh", "-c", WATCH, "sh", *argv], cwd=self.root, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, "OWNER": str(os.getpid())})
        deadline = time.monotonic() + within
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log_path.read_text(errors="replace")[-4000:]
                self.stop()
                raise RuntimeError(f"{argv[0]} did not start; the end of its log:\n{log}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)


class S3(Server):
    """s3s-fs on a loopback port; a bucket is a directory under ``data``."""

    ACCESS_KEY = "tierpool-test-key"
    SECRET_KEY = "tierpool-test-secret"

    def __init__(self) -> None:
        super().__init__()
        (self.root / "data").mkdir()
        self.port = free_port()
        argv = [_installed("TIERPOOL_S3S_FS", "s3-server.sh"), "--host", "127.0.0.1", "--port", str(self.port),
                "--access-key", self.ACCESS_KEY, "--secret-key", self.SECRET_KEY, str(self.root / "data")]
        self._spawn(argv, self._listening, 20)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def bucket(self, name: str) -> pathlib.Path:
        """A new, empty bucket: the directory that holds its objects."""
        path = self.root / "data" / name
        path.mkdir()
        return path

    def options(self) -> Dict[str, str]:
        return {"endpoint": f"http://127.0.0.1:{self.port}", "region": "us-east-1",
                "access_key_id": self.ACCESS_KEY, "secret_access_key": self.SECRET_KEY}


class Hdfs(Server):
    """A minicluster of one NameNode and one DataNode."""

    READY = "Started MiniDFSCluster -- namenode on port"

    def __init__(self) -> None:
        super().__init__()
        (self.root / "tmp").mkdir()
        self.port = free_port()
        lib = _installed("TIERPOOL_HDFS_LIB", "hdfs-server.sh")
        argv = ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:-UsePerfData", f"-Djava.io.tmpdir={self.root / 'tmp'}",
                "-cp", f"{lib}/*", "org.apache.hadoop.test.MiniDFSClusterManager", "-format",
                "-nnport", str(self.port), "-httpport", str(free_port()), "-datanodes", "1"]
        self._spawn(argv, lambda: self.READY in self.log_path.read_text(errors="replace"), 180)

    def uri(self, path: str = "") -> str:
        return f"hdfs://127.0.0.1:{self.port}/{path}"
