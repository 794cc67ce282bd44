#!/usr/bin/env bash
# Prints the path of an s3s-fs binary: a small real S3 server that keeps a
# directory's subdirectories as buckets, used by the under-store tests.
# Installs it once, with the versions of its own lock file, into
# ${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/s3s-fs. Prints only the path on
# success; on failure says why on stderr and exits non-zero.
set -euo pipefail

version=0.14.1
root="${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/s3s-fs"
bin="$root/bin/s3s-fs"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "s3s-fs $version" ]; then
    echo "$bin"
    exit 0
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "s3-server.sh: cargo is needed to install s3s-fs $version into $root" >&2
    exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! cargo install --locked "s3s-fs@$version" --features binary --root "$root" >"$log" 2>&1; then
    echo "s3-server.sh: installing s3s-fs $version into $root failed; the end of cargo's output:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
if [ ! -x "$bin" ]; then
    echo "s3-server.sh: cargo install succeeded but $bin is missing" >&2
    exit 1
fi
echo "$bin"
