#!/usr/bin/env bash
# Builds tierpool, starts the embedded pool with a small MEM budget, and shows
# data spilling from memory to disk and coming back byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (install Rust first)" >&2; exit 1; }
if ! command -v fusermount3 >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing fuse3 (for tierpool mount)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi
echo "== building (release)"
cargo build --release --quiet -p tierpool
BIN="$PWD/target/release/tierpool"
if [ -d "$HOME/.cargo/bin" ]; then ln -sf "$BIN" "$HOME/.cargo/bin/tierpool"; fi
echo "== installing the Python package (pip install ./)"
PYTHON="${PYTHON:-python3}"
if command -v "$PYTHON" >/dev/null; then
    "$PYTHON" -m pip --version >/dev/null 2>&1 || "$PYTHON" -m ensurepip --upgrade
    "$PYTHON" -m pip install --quiet "maturin>=1.9.4,<2" fsspec
    "$PYTHON" -m pip install --quiet --force-reinstall --no-deps ./
else
    echo "   (no $PYTHON found: skipping the Python package)"
fi

DIR="${TIERPOOL_DIR:-$HOME/.tierpool}"
"$BIN" down --dir "$DIR" >/dev/null 2>&1 || true
echo "== starting a pool: 2 workers, 64MiB of memory and 1GiB of disk each"
"$BIN" up --dir "$DIR" --workers 2 --mem 64MiB --disk 1GiB

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "== writing 4 files of 64MiB (256MiB, twice the pool's memory)"
"$BIN" mkdir -p /demo
for i in 1 2 3 4; do
    head -c 64M /dev/urandom > "$WORK/in$i"
    "$BIN" put "$WORK/in$i" /demo/file$i
done
"$BIN" ls -l /demo
echo "== the pool: memory is full, the rest spilled to disk"
"$BIN" status
echo "== reading everything back"
for i in 1 2 3 4; do
    "$BIN" get /demo/file$i "$WORK/out$i"
    cmp "$WORK/in$i" "$WORK/out$i"
done
echo "all 4 files read back byte-exact"
if command -v "$PYTHON" >/dev/null; then
    echo "== the same file from Python"
    (cd /tmp && "$PYTHON" - "$WORK/in1" <<'PY'
import hashlib, sys, tierpool
c = tierpool.connect()
with c.open("/demo/file1", "rb") as f:
    got = hashlib.sha256(f.read()).hexdigest()
want = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()
print("python: /demo/file1", c.stat("/demo/file1").size, "bytes, sha256 matches:", got == want)
assert got == want
PY
    )
fi
echo
echo "The pool keeps running (state in $DIR). Try: tierpool ls /demo, tierpool bench, tierpool down"
