"""Where the ``tierpool`` binary is: the one program that starts and stops
local pools (``tierpool up`` / ``tierpool down``), for :func:`tierpool.local`."""

from __future__ import annotations

import os
import shutil

#: Names a binary to use instead of the packaged one.
BIN_ENV = "TIERPOOL_BIN"

#: The binary the wheel ships (built with the package, see python/build_backend).
PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tierpool")


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary() -> str:
    """``$TIERPOOL_BIN``, else the binary shipped in this package, else
    ``tierpool`` on ``PATH``. Raises ``FileNotFoundError`` naming all three
    when none is there (or when ``$TIERPOOL_BIN`` names no runnable file)."""
    chosen = os.environ.get(BIN_ENV)
    if chosen:
        if _runnable(chosen):
            return chosen
        raise FileNotFoundError(f"${BIN_ENV} is {chosen!r}, which is not a runnable file")
    if _runnable(PACKAGED):
        return PACKAGED
    on_path = shutil.which("tierpool")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "cannot find the tierpool binary that starts local pools: "
        f"${BIN_ENV} is not set, the package has none at {PACKAGED} "
        "(reinstall it with `pip install` from a checkout, which builds it), "
        "and there is no `tierpool` on PATH (`cargo install --path crates/tierpool`)"
    )
