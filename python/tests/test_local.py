"""tierpool.local(): a pool started, served and cleaned up by the tierpool
binary (`tierpool up` / `tierpool down`), shipped inside the package."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Callable, Dict, List

import pytest

import tierpool
from tierpool import _bin


def running(pid: int) -> bool:
    """Whether ``pid`` runs (an exited, unreaped process does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids: List[int], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_the_package_ships_the_binary_that_starts_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIERPOOL_BIN", raising=False)
    assert _bin.find_binary() == _bin.PACKAGED
    assert os.path.dirname(_bin.PACKAGED) == os.path.join(os.path.dirname(tierpool.__file__), "bin")
    out = subprocess.run([_bin.PACKAGED, "up", "--help"], capture_output=True, text=True, timeout=30)
    assert "--stop-with <PID>" in out.stdout


def test_local_pool_lifecycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERPOOL_COORDINATOR", "192.0.2.1:1")
    monkeypatch.setenv("TIERPOOL_SECRET_FILE", "/nowhere/secret")
    pool = tierpool.local(workers=3, mem="32MiB", disk="64MiB", partitions=128)
    with pool as client:
        assert isinstance(client, tierpool.Client)
        host, port = client.address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert pool.address == client.address
        assert os.environ["TIERPOOL_COORDINATOR"] == client.address
        # The pool's secret: private, in its directory, named for clients started meanwhile.
        secret = pool.secret_file
        assert secret == os.path.join(pool.dir or "", "coordinator", "secret") == client.secret_file
        assert os.environ["TIERPOOL_SECRET_FILE"] == secret
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        registered = os.path.join(os.path.expanduser("~"), ".tierpool", "pools", client.address)
        with open(registered) as f:
            assert f.read() == secret + "\n"
        assert tierpool.connect().address == client.address
        s = client.status()
        assert s["partitions"] == 128
        assert len(s["workers"]) == 3 and all(w["alive"] for w in s["workers"])
        assert {w["mem"]["capacity"] for w in s["workers"]} == {32 << 20}
        assert {w["disk"]["capacity"] for w in s["workers"]} == {64 << 20}
        client.put(b"hello", "/hello")
        assert client.get("/hello") == b"hello"
        directory = pool.dir
        pids = list(pool.pids)
        assert directory is not None and os.path.isdir(os.path.join(directory, "logs"))
        assert len(pids) == 4 and all(running(p) for p in pids)
    assert not os.path.exists(directory)
    assert wait_gone(pids, 10)
    assert os.environ["TIERPOOL_COORDINATOR"] == "192.0.2.1:1"
    assert os.environ["TIERPOOL_SECRET_FILE"] == "/nowhere/secret"
    assert not os.path.exists(registered), "down forgets the pool"
    with pytest.raises(RuntimeError):
        pool.address


def test_bad_arguments_are_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    made: List[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(**kwargs: str) -> str:
        made.append(real_mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    for kwargs, says in [
        (dict(mem="lots"), "invalid size 'lots'"),
        (dict(disk=-1), "disk must not be negative"),
        (dict(workers=0), "at least one worker"),
        (dict(timeout=0), "timeout"),
    ]:
        with pytest.raises(tierpool.InvalidArgument, match=says):
            tierpool.local(**kwargs)  # type: ignore[arg-type]
    for kwargs, says in [
        (dict(workers=1000), "'--workers <WORKERS>': 1000 is not in 1..=256"),
        (dict(partitions=0), "'--partitions <PARTITIONS>': 0 is not in"),
        (dict(log_sync="never"), "'never' is neither 'always' nor a duration"),
    ]:
        with pytest.raises(tierpool.InvalidArgument, match=says):
            with tierpool.local(**kwargs):  # type: ignore[arg-type]
                pass
    assert made and not any(os.path.exists(d) for d in made), "directories of pools that did not start are removed"


def test_a_pool_whose_log_is_fsynced_within_a_period_says_so() -> None:
    with tierpool.local(workers=1, mem="16MiB", disk="64MiB", log_sync="25ms") as c:
        for i in range(20):
            c.put(b"x" * i, f"/f{i}")
        log = c.status()["metadata_log"]
        assert log["sync_every_ms"] == 25
        assert log["synced_lsn"] <= log["lsn"]
        assert [c.get(f"/f{i}") for i in range(20)] == [b"x" * i for i in range(20)]
    with tierpool.local(workers=1, mem="16MiB", disk="64MiB") as c:
        assert c.status()["metadata_log"]["sync_every_ms"] == 0


def test_a_prefaulted_pool_has_its_chunk_buffers_ready_and_writes_into_them() -> None:
    chunk = 4 << 20
    with tierpool.local(workers=1, mem="32MiB", disk="64MiB", prefault=True) as c:
        deadline = time.monotonic() + 30
        while (b := c.status()["workers"][0]["buffers"])["spare"] < 16:
            assert time.monotonic() < deadline, f"the buffers were never ready: {b}"
            time.sleep(0.2)
        assert (b["size"], b["keep"], b["limit"], b["lent"]) == (chunk, 16, 24, 0)
        data = bytes(range(256)) * (3 * chunk // 256)
        c.put(data, "/three-chunks")
        deadline = time.monotonic() + 30
        while (b := c.status()["workers"][0]["buffers"])["reused"] < 3:
            assert time.monotonic() < deadline, f"the chunks never took spare buffers: {b}"
            time.sleep(0.2)
        assert (b["spare"], b["lent"], b["fresh"]) == (13, 3, 0)
        assert c.get("/three-chunks") == data
    with tierpool.local(workers=1, mem="16MiB", disk="64MiB") as c:
        deadline = time.monotonic() + 30
        while (b := c.status()["workers"][0]["buffers"])["size"] != chunk:
            assert time.monotonic() < deadline, f"the worker never reported its buffers: {b}"
            time.sleep(0.2)
        assert (b["keep"], b["limit"], b["spare"]) == (16, None, 0)


def _buffers_when(c: "tierpool.Client", what: str, want: Callable[[Dict[str, Any]], bool]) -> Dict[str, Any]:
    deadline = time.monotonic() + 30
    while not want(b := c.status()["workers"][0]["buffers"]):
        assert time.monotonic() < deadline, f"{what}: {b}"
        time.sleep(0.2)
    return b


def test_small_files_put_many_at_once_reuse_the_buffers_of_deleted_ones() -> None:
    with tierpool.local(workers=1, mem="32MiB", disk="64MiB") as c:
        b = _buffers_when(c, "the worker's figures", lambda b: b["size"] == 4 << 20)
        assert (b["small_room"], b["small_spare"], b["small_lent"]) == (64 << 20, 0, 0)
        # 10,000 bytes each: past the inline limit, 16 chunks in one
        # request, each copied into a buffer of 10 KiB.
        first = {f"/a{i}": os.urandom(10_000) for i in range(16)}
        assert all(isinstance(r, tierpool.FileInfo) for r in c.put_many(first))
        b = _buffers_when(c, "16 small chunks held", lambda b: b["small_lent"] == 16 * 10_240)
        assert b["small_fresh"] >= 16 and (b["lent"], b["fresh"]) == (0, 0)
        for path in first:
            c.rm(path)
        b = _buffers_when(c, "their buffers spare", lambda b: b["small_lent"] == 0)
        assert b["small_spare"] >= 16 * 10_240
        # Shorter ones of the same class take those pages and read back
        # exactly their own bytes.
        second = {f"/b{i}": os.urandom(9_500) for i in range(16)}
        assert all(isinstance(r, tierpool.FileInfo) for r in c.put_many(second))
        after = _buffers_when(c, "16 more held", lambda x: x["small_lent"] == 16 * 10_240)
        assert after["small_reused"] >= b["small_reused"] + 16, after
        assert c.get_many(list(second)) == list(second.values())


def test_a_local_pool_is_reached_through_its_local_sockets() -> None:
    with tierpool.local(workers=1, mem="32MiB", disk="64MiB") as c:
        data = bytes(range(256)) * (5 << 12)
        c.put(data, "/near")
        assert c.get("/near") == data
        deadline = time.monotonic() + 30
        while (n := c.status()["workers"][0]["connections"])["local"] == 0:
            assert time.monotonic() < deadline, f"no local connection: {n}"
            time.sleep(0.2)
        # Every process of the pool, and this one, is on this machine.
        assert n["accepted"] == n["local"], n


def test_local_pool_reports_a_pool_that_cannot_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"port {port} is in use"):
            with tierpool.local(workers=1, mem="16MiB", disk="64MiB", port=port, timeout=10):
                pass


def test_the_binary_is_found_in_the_documented_order(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("TIERPOOL_BIN", "/nonexistent/tierpool")
    with pytest.raises(FileNotFoundError, match="TIERPOOL_BIN is '/nonexistent/tierpool'"):
        _bin.find_binary()
    copy = os.path.join(str(tmp_path), "tierpool-copy")
    shutil.copy2(_bin.PACKAGED, copy)
    monkeypatch.setenv("TIERPOOL_BIN", copy)
    assert _bin.find_binary() == copy
    with tierpool.local(workers=1, mem="16MiB", disk="64MiB", set_env=False) as c:
        c.put(b"via $TIERPOOL_BIN", "/x")
        assert c.get("/x") == b"via $TIERPOOL_BIN"

    monkeypatch.delenv("TIERPOOL_BIN")
    monkeypatch.setattr(_bin, "PACKAGED", "/nonexistent/package/bin/tierpool")
    on_path = os.path.join(str(tmp_path), "path")
    os.mkdir(on_path)
    monkeypatch.setenv("PATH", on_path)
    with pytest.raises(FileNotFoundError) as e:
        tierpool.local(workers=1).start()
    for named in ["$TIERPOOL_BIN", "/nonexistent/package/bin/tierpool", "PATH"]:
        assert named in str(e.value)
    os.symlink(copy, os.path.join(on_path, "tierpool"))
    assert _bin.find_binary() == os.path.join(on_path, "tierpool")


def test_the_servers_stop_when_the_python_that_started_them_is_killed(tmp_path: object) -> None:
    script = textwrap.dedent(
        """
        import json, sys, time, tierpool
        pool = tierpool.local(workers=2, mem="16MiB", disk="64MiB")
        c = pool.start()
        c.put(b"x", "/x")
        print(json.dumps({"pids": pool.pids, "dir": pool.dir, "address": c.address}), flush=True)
        time.sleep(300)
        """
    )
    notebook = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    started = {"dir": ""}
    try:
        assert notebook.stdout is not None
        started = json.loads(notebook.stdout.readline())
        assert all(running(p) for p in started["pids"])
        assert tierpool.connect(started["address"]).get("/x") == b"x"
        notebook.send_signal(signal.SIGKILL)
        notebook.wait(30)
        assert wait_gone(started["pids"], 10), "servers outlived the process that started them"
        with pytest.raises(ConnectionError):
            tierpool.connect(started["address"], timeout=1)
    finally:
        if notebook.poll() is None:
            notebook.kill()
            notebook.wait()
        # Nobody was left to remove it.
        shutil.rmtree(started["dir"], ignore_errors=True)


def test_a_worker_is_drained_and_removed_and_nothing_is_lost() -> None:
    # One copy of each chunk: the partition figures below are one replica's.
    with tierpool.local(workers=3, mem="32MiB", disk="128MiB", partitions=128, replicas=1) as client:
        client.mkdir("/d")
        files = {f"/d/f{i}": os.urandom(50_000 + i * 7_000) for i in range(24)}
        for path, data in files.items():
            client.put(data, path)
        with pytest.raises(ValueError, match="'x2' is not a worker id"):
            client.drain("x2")
        client.drain("w3", wait=True, timeout=60)
        s = client.status()
        w3 = next(w for w in s["workers"] if w["id"] == 3)
        assert (w3["partitions"], w3["draining"]) == (0, True)
        assert sum(w["partitions"] for w in s["workers"]) == 128
        assert s["migration"]["partitions_done"] > 0 and not s["migration"]["active"]
        assert client.remove_worker(3) == {"partitions": [], "lost": []}
        assert [w["id"] for w in client.status()["workers"]] == [1, 2]
        for path, data in files.items():
            assert client.get(path) == data
        client.rebalance(wait=True, timeout=30)
        assert [w["partitions"] for w in client.status()["workers"]] == [64, 64]
        with pytest.raises(tierpool.TierpoolError, match="worker w1 is alive and owns 64 partitions"):
            client.remove_worker(1)
