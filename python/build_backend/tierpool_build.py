"""PEP 517 build backend of the ``tierpool`` package: maturin, after building
the ``tierpool`` binary into the package.

``tierpool.local()`` starts and stops pools with the ``tierpool`` binary
(``tierpool up`` / ``tierpool down``). So that ``pip install ./`` from a
checkout gives a package that needs nothing else installed, building a wheel
first runs ``cargo build --release -p tierpool`` and copies the binary to
``python/tierpool/bin/tierpool`` (ignored by git; ``[tool.maturin] include``
packs it), then hands over to maturin for the extension and the package.
Every other hook is maturin's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import maturin
from maturin import (  # noqa: F401  (re-exported hooks)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = ROOT / "python" / "tierpool" / "bin" / "tierpool"


def build_binary() -> Optional[Path]:
    """Builds the ``tierpool`` binary and copies it into the package; returns
    where it went, or None when this tree has no source for it."""
    if not (ROOT / "crates" / "tierpool" / "Cargo.toml").exists():
        print("tierpool build: no crates/tierpool here; the package ships no tierpool binary", file=sys.stderr)
        return None
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "--release", "-p", "tierpool", "--bin", "tierpool", "--message-format=json-render-diagnostics"]
    print(f"tierpool build: {' '.join(cmd)}", file=sys.stderr)
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit status {done.returncode}); its errors are above")
    built = None
    for line in done.stdout.splitlines():
        msg: Dict[str, Any] = json.loads(line)
        target = msg.get("target", {})
        if msg.get("reason") == "compiler-artifact" and target.get("name") == "tierpool" and "bin" in target.get("kind", []):
            built = msg.get("executable")
    if not built:
        raise RuntimeError(f"`{' '.join(cmd)}` reported no tierpool executable")
    PACKAGED.parent.mkdir(exist_ok=True)
    tmp = PACKAGED.with_name("tierpool.tmp")
    shutil.copyfile(built, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, PACKAGED)
    return PACKAGED


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    build_binary()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    build_binary()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
