#!/usr/bin/env bash
# The whole test suite, read-only: format check, lints as errors, the
# dependency rule of the crate graph, every Rust test (one starts a pool in
# network namespaces with scripts/netns-pool.sh: run as root), pjdfstest on a
# FUSE mount, and the Python package's pytest suite. Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
# No incremental caches: a whole-suite build does not reuse them, and they
# would add half again to its disk use.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add rustfmt clippy
fi

if ! command -v fusermount3 >/dev/null 2>&1; then
    echo "== installing fuse3 (for the FUSE mount tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi

if ! command -v iperf3 >/dev/null 2>&1; then
    echo "== installing iperf3 (the pool in network namespaces measures its links)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null
fi

echo "== format"
cargo fmt --all --check

echo "== lints"
cargo clippy --workspace --all-targets -- -D warnings

echo "== crate graph: pure crates stay free of the async runtime"
for crate in tierpool-types tierpool-placement tierpool-meta tierpool-proto tierpool-tier tierpool-cache tierpool-region; do
    if cargo tree -p "$crate" -e normal --prefix none | grep -q '^tokio '; then
        echo "$crate depends on tokio; pure logic must not do I/O through the runtime" >&2
        exit 1
    fi
done

echo "== S3 server and HDFS minicluster for the under-store tests, history checker for transactions"
TIERPOOL_S3S_FS="$(./scripts/s3-server.sh)"
TIERPOOL_HDFS_LIB="$(./scripts/hdfs-server.sh)"
TIERPOOL_ADYA="$(./scripts/adya.sh)"
export TIERPOOL_S3S_FS TIERPOOL_HDFS_LIB TIERPOOL_ADYA

echo "== tests"
cargo test --workspace

echo "== POSIX conformance of the FUSE mount (pjdfstest)"
./scripts/test-fuse.sh

echo "== python package"
./scripts/test-python.sh
