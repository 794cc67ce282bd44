#!/usr/bin/env bash
# The Python package's test suite: installs what it needs, builds the package
# from this checkout (maturin, via pip) into the current Python, and runs
# pytest on python/tests against real local pools (and a real S3 server and
# HDFS minicluster, installed once by scripts/). Works from a fresh clone.
#
#   PYTHON=python3.12 ./scripts/test-python.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! command -v cargo >/dev/null 2>&1; then
    echo "test-python: cargo is needed to build the extension (install Rust: https://rustup.rs)" >&2
    exit 1
fi
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    "$PYTHON" -m ensurepip --upgrade
fi

echo "== python test dependencies"
"$PYTHON" -m pip install --quiet --upgrade "maturin>=1.9.4,<2" pytest pytest-timeout fsspec numpy pandas pyarrow "dask[distributed,dataframe]"

echo "== S3 server and HDFS minicluster for the under-store tests"
# Installed once into ~/.cache/tierpool; the tests start and stop them.
TIERPOOL_S3S_FS="${TIERPOOL_S3S_FS:-$(./scripts/s3-server.sh)}"
TIERPOOL_HDFS_LIB="${TIERPOOL_HDFS_LIB:-$(./scripts/hdfs-server.sh)}"
export TIERPOOL_S3S_FS TIERPOOL_HDFS_LIB

echo "== build and install the tierpool package"
# A plain `pip install ./` (what users run); --force-reinstall rebuilds even
# when the version number did not change.
"$PYTHON" -m pip install --quiet --force-reinstall --no-deps ./
(cd /tmp && "$PYTHON" -c "import tierpool, tierpool.fsspec, tierpool.dask; print('tierpool', tierpool.__version__, 'from', tierpool.__file__)")

echo "== pytest"
# From the repository root, where `import tierpool` can only mean the installed
# package (the sources live in python/tierpool, which is not on the path).
exec "$PYTHON" -m pytest python/tests -q -p no:cacheprovider "$@"
