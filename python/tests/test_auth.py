"""The pool's secret from Python: found with no arguments (the environment
``tierpool.local()`` sets, or the record ``tierpool up`` keeps for the
address), given as ``secret_file``, and refused with a clear
``tierpool.Unauthenticated`` (a ``PermissionError``) when it is wrong,
missing or readable by others."""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pytest

import tierpool


def _secret(path: Path, text: str = "5eb3c1e7" * 8, mode: int = 0o600) -> Path:
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_connect_finds_the_secret_with_no_arguments(
    client: tierpool.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # local() named it in $TIERPOOL_SECRET_FILE, and `tierpool up` recorded it for the address.
    assert os.environ["TIERPOOL_SECRET_FILE"] == client.secret_file
    assert tierpool.connect().status()["coordinator"] == client.address
    # The record alone, even with the variable naming another pool's secret...
    monkeypatch.setenv("TIERPOOL_SECRET_FILE", str(_secret(tmp_path / "other")))
    found = tierpool.connect(client.address)
    assert found.secret_file is None and found.status()["coordinator"] == client.address
    # ...and the variable alone, with no record (another home).
    monkeypatch.setenv("TIERPOOL_SECRET_FILE", client.secret_file or "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tierpool.connect(client.address).status()["coordinator"] == client.address


def test_a_wrong_secret_is_unauthenticated(client: tierpool.Client, tmp_path: Path) -> None:
    wrong = _secret(tmp_path / "wrong")
    with pytest.raises(PermissionError) as e:
        tierpool.connect(client.address, secret_file=wrong)
    assert type(e.value) is tierpool.Unauthenticated and e.value.kind == "unauthenticated"
    assert e.value.errno == errno.EACCES
    assert e.value.strerror == (
        f"the pool at {client.address} refused this client's secret (from {wrong}): it is not that pool's"
    )


def test_no_secret_is_unauthenticated(
    client: tierpool.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIERPOOL_SECRET_FILE")
    monkeypatch.setenv("HOME", str(tmp_path))  # no record of any pool
    with pytest.raises(tierpool.Unauthenticated, match="which has no secret: name the pool's secret file"):
        tierpool.connect(client.address)


def test_a_secret_file_others_may_read_is_refused(client: tierpool.Client, tmp_path: Path) -> None:
    assert client.secret_file is not None
    shared = _secret(tmp_path / "shared", Path(client.secret_file).read_text(), mode=0o644)
    with pytest.raises(tierpool.Unauthenticated, match=r"others may read or change it \(mode 644\)"):
        tierpool.connect(client.address, secret_file=shared)
    os.chmod(shared, 0o600)
    assert tierpool.connect(client.address, secret_file=shared).status()["coordinator"] == client.address


def test_a_client_pickles_with_its_secret_file_never_its_key(client: tierpool.Client, base: str) -> None:
    client.put(b"s", f"{base}/s")
    data = pickle.dumps(client)
    assert client.secret_file is not None and client.secret_file.encode() in data
    key = Path(client.secret_file).read_text().strip()
    assert key.encode() not in data
    again = pickle.loads(data)
    assert again.secret_file == client.secret_file and again.get(f"{base}/s") == b"s"
