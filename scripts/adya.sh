#!/usr/bin/env bash
# Prints the path of an adya binary: a checker of transaction histories
# (list-append and read-write registers) against isolation levels, used by
# the transaction tests. Installs it once, without its database drivers,
# into ${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/adya. Prints only the path
# on success; on failure says why on stderr and exits non-zero.
set -euo pipefail

version=0.1.0
root="${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/adya"
bin="$root/bin/adya"
stamp="$root/version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    echo "$bin"
    exit 0
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "adya.sh: cargo is needed to install adya $version into $root" >&2
    exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! cargo install --locked "adya@$version" --no-default-features --root "$root" >"$log" 2>&1 \
    && ! cargo install "adya@$version" --no-default-features --root "$root" >"$log" 2>&1; then
    echo "adya.sh: installing adya $version into $root failed; the end of cargo's output:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
if [ ! -x "$bin" ]; then
    echo "adya.sh: cargo install succeeded but $bin is missing" >&2
    exit 1
fi
echo "$version" >"$stamp"
echo "$bin"
