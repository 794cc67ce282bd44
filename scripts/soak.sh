#!/usr/bin/env bash
# The long run of the replication test: ROUNDS rounds (default 200) of a
# worker killed -9 (and the coordinator every third round) under verified
# readers and writers, on a pool of 4 workers keeping 2 copies. Prints the
# counts (acknowledged writes, reads, wrong bytes, failed reads, files lost)
# and fails if any byte was lost or wrong. About 10 s a round.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-200}"
cargo build --release -p tierpool --quiet
TIERPOOL_KILL_ROUNDS="$ROUNDS" cargo test --release -p tierpool --test replication \
    workers_killed_round_after_round_lose_no_acknowledged_write -- --nocapture 2>&1 |
    grep -E "^(round|phase|[0-9]+ rounds|test |WRONG|read .* failed)|panicked|assert"
