#!/usr/bin/env bash
# Many hosts on one machine: a coordinator and N workers, each in its own
# network namespace with its own address, joined by veth pairs to one Linux
# bridge in the root namespace (which has an address too, so commands run
# here reach the pool). Links can be shaped with tc tbf, changed while the
# pool runs, cut and healed, to watch the pool on a network that is not
# loopback. Needs root. See docs/multi-host.md.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN_DIR=/run/tierpool-netns
COORD_PORT=7700
WORKER_PORT=7701
MAX_WORKERS=240

usage() {
    cat <<'EOF'
Usage: scripts/netns-pool.sh [--name NAME] COMMAND [ARGS]

A real multi-host pool on one machine: one network namespace per process.

Commands:
  up [--workers N] [--mem SIZE] [--disk SIZE] [--dir DIR] [--subnet A.B.C.0/24]
     [--racks K] [--rate ID=RATE]... [--partitions P] [--keep] [--stop-with PID] [--timeout S]
     [--coordinator-arg ARG]...
      Start a coordinator and N workers (default 3, MEM 256MiB and DISK 1GiB
      each), wait until every worker is alive and print the coordinator's
      address. Workers are labelled --host hostI and dealt over racks r1..rK
      (default 1 rack). --rate shapes link ID (repeatable), e.g.
      --rate 3=250mbit. State, logs and pids go to DIR (default
      /tmp/tierpool-netns-NAME); up starts a new pool there, or with --keep
      restarts the pool the last run left in DIR (its files, its workers'
      identities). --stop-with PID stops the servers when PID exits.
      --coordinator-arg passes ARG to the coordinator (repeatable), e.g.
      --coordinator-arg --bandwidth-window --coordinator-arg 5s.
  down [--purge]
      Stop the processes, delete the namespaces, veths and the bridge.
      Safe to run at any time, also after a partial up. --purge also deletes DIR.
  status
      Each namespace: address, process, link (up or cut), rate each way, and
      whether the coordinator reports the worker alive.
  shape ID RATE|off
      Set (or remove) the rate of a link while the pool runs, both directions.
  exec ID CMD [ARGS]...
      Run a command inside a namespace, with TIERPOOL_COORDINATOR set and
      the pool's binary first on PATH.
  cut ID
      Take a link down; the process keeps running.
  heal ID
      Bring a cut link back up.

ID is a worker number (1..N) or "coord" for the coordinator.
RATE is a number with a unit: bit, kbit, mbit, gbit (bits per second) or
bps, kbps, mbps, gbps (bytes per second), as tc writes them: 250mbit, 1gbit.

Options of every command:
  --name NAME   pool name, the prefix of its namespaces and links (at most
                8 letters, digits or '_'; default tp, or $TIERPOOL_NETNS_NAME)

Layout (subnet A.B.C.0/24, default 10.77.0.0/24):
  bridge NAME-br in the root namespace   A.B.C.254
  namespace NAME-coord: coordinator      A.B.C.1:7700
  namespace NAME-wI: worker I            A.B.C.(10+I):7701
Each namespace holds eth0; its peer in the root namespace is named like the
namespace (NAME-w3) and is a port of the bridge. A rate is a tbf qdisc on
both ends of the pair: NAME-wI (to the worker) and eth0 inside (from it).

The binary is $TIERPOOL_BIN, or target/release/tierpool.
EOF
}

die() {
    echo "netns-pool: $*" >&2
    exit 1
}

NAME="${TIERPOOL_NETNS_NAME:-tp}"

# ---- names and state --------------------------------------------------------

check_name() {
    [[ "$NAME" =~ ^[A-Za-z0-9_]{1,8}$ ]] || die "--name must be 1 to 8 letters, digits or '_' (it prefixes interface names): $NAME"
}

state_file() { echo "$RUN_DIR/$NAME.env"; }

# Loads the pool's settings written by `up`; fails when there is no pool.
load_state() {
    local f
    f="$(state_file)"
    [ -f "$f" ] || die "no pool named $NAME is up (no $f)"
    # shellcheck disable=SC1090
    source "$f"
}

ns_of() { # ID -> namespace name
    case "$1" in
        c | coord | coordinator) echo "$NAME-coord" ;;
        *)
            [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$WORKERS" ] ||
                die "no such worker: $1 (workers are 1..$WORKERS, or coord)"
            echo "$NAME-w$((10#$1))"
            ;;
    esac
}

ip_of() { # ID -> address
    case "$1" in
        c | coord | coordinator) echo "$NET.1" ;;
        *) echo "$NET.$((10 + 10#$1))" ;;
    esac
}

# Namespaces and root-side links of pool NAME that exist now, whatever state says.
our_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(coord|w[0-9]+)\$" || true
}
our_links() {
    ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
        grep -E "^$NAME-(coord|w[0-9]+|br)\$" || true
}

# ---- rates ------------------------------------------------------------------

# RATE -> bits per second (integer), or fails.
rate_bits() {
    local r="${1,,}"
    [[ "$r" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$ ]] ||
        die "not a rate: $1 (e.g. 250mbit, 1gbit, 50mbps)"
    local n="${BASH_REMATCH[1]}" mul
    case "${BASH_REMATCH[3]}" in
        bit) mul=1 ;; kbit) mul=1e3 ;; mbit) mul=1e6 ;; gbit) mul=1e9 ;; tbit) mul=1e12 ;;
        bps) mul=8 ;; kbps) mul=8e3 ;; mbps) mul=8e6 ;; gbps) mul=8e9 ;; tbps) mul=8e12 ;;
    esac
    awk -v n="$n" -v m="$mul" 'BEGIN { b = int(n * m); if (b < 8000) exit 1; printf "%d\n", b }' ||
        die "rate too low: $1 (at least 8kbit)"
}

# Sets (or with "off" removes) a tbf qdisc on both ends of a namespace's veth:
# the root-side end shapes what the namespace receives, eth0 inside what it sends.
apply_rate() {
    local ns="$1" rate="$2"
    if [ "$rate" = off ]; then
        tc qdisc del dev "$ns" root 2>/dev/null || true
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
        return
    fi
    local bits burst
    bits="$(rate_bits "$rate")"
    # 10 ms worth of bytes, at least 16KiB: enough for the timer's granularity
    # at high rates, small enough that a short measurement sees the rate.
    burst=$((bits / 8 / 100))
    [ "$burst" -ge 16384 ] || burst=16384
    tc qdisc replace dev "$ns" root tbf rate "${bits}bit" burst "$burst" latency 50ms
    tc -n "$ns" qdisc replace dev eth0 root tbf rate "${bits}bit" burst "$burst" latency 50ms
}

# The rate of the tbf qdisc on DEV in namespace NS (root namespace: ""), or "-".
qdisc_rate() { # DEV NS
    tc ${2:+-n "$2"} qdisc show dev "$1" root 2>/dev/null | awk '$2 == "tbf" { for (i = 1; i < NF; i++) if ($i == "rate") { print $(i + 1); f = 1 } } END { if (!f) print "-" }'
}

# ---- processes --------------------------------------------------------------

pid_alive() { # PID: running, not a zombie waiting for its parent
    local st
    st="$(cat "/proc/$1/stat" 2>/dev/null)" && [ -n "$1" ] || return 1
    st="${st##*) }"
    [[ "$st" != [ZX]* ]]
}

read_pid() { cat "$DIR/pids/$1.pid" 2>/dev/null || true; }

# Starts BIN ARGS... in namespace NS in the background; logs to DIR/logs/KEY.log
# (its first line the command), pid to DIR/pids/KEY.pid. setsid and ip netns exec both exec in place, so $!
# is the server's own pid.
start_in() {
    local ns="$1" key="$2"
    shift 2
    echo "+ ip netns exec $ns $BIN $*" >>"$DIR/logs/$key.log"
    setsid ip netns exec "$ns" "$BIN" "$@" </dev/null >>"$DIR/logs/$key.log" 2>&1 &
    echo $! >"$DIR/pids/$key.pid"
}

# Exit codes for wait_until: 0 ready, 1 timed out, 2 the process died.
wait_until() { # PID SECONDS CMD...
    local pid="$1" secs="$2" t0=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        pid_alive "$pid" || return 2
        [ $((SECONDS - t0)) -lt "$secs" ] || return 1
        sleep 0.1
    done
}

tail_log() {
    echo "--- last lines of $DIR/logs/$1.log:" >&2
    tail -n 15 "$DIR/logs/$1.log" >&2 || true
}

# The coordinator's view of worker ADDRESS: up, drain, DOWN, or ? (not
# listed / unreachable).
pool_alive_of() { # STATUS_TEXT ADDRESS
    awk -v a="$2" '$2 == a { print $5; f = 1 } END { if (!f) print "?" }' <<<"$1"
}

worker_listed() { # ADDRESS: succeeds when the coordinator reports it alive
    local st
    st="$(pool_cli status)" || return 1
    case "$(pool_alive_of "$st" "$1")" in up | drain) ;; *) return 1 ;; esac
}

workers_alive() { # N: succeeds when the coordinator reports the N workers alive
    local st n=0 i
    st="$(pool_cli status)" || return 1
    for ((i = 1; i <= $1; i++)); do
        case "$(pool_alive_of "$st" "$(ip_of "$i"):$WORKER_PORT")" in up | drain) n=$((n + 1)) ;; esac
    done
    [ "$n" -eq "$1" ]
}

# The CLI from the root namespace, against this pool.
pool_cli() {
    if [ -n "${SECRET:-}" ]; then
        TIERPOOL_COORDINATOR="$NET.1:$COORD_PORT" TIERPOOL_SECRET_FILE="$SECRET" "$BIN" "$@" 2>/dev/null
    else
        TIERPOOL_COORDINATOR="$NET.1:$COORD_PORT" "$BIN" "$@" 2>/dev/null
    fi
}

# ---- up ---------------------------------------------------------------------

make_node() { # NS IP: a namespace with eth0 at IP, its peer on the bridge
    local ns="$1" addr="$2"
    ip netns add "$ns"
    ip link add "$ns" type veth peer name eth0 netns "$ns"
    ip link set "$ns" master "$NAME-br"
    ip link set "$ns" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
}

# An up that stops half way (an error, ^C) takes down what it made.
up_exit() {
    local rc=$?
    [ "$UP_DONE" = 1 ] && return
    echo "netns-pool: up failed; tearing down what it made (logs stay in $DIR/logs)" >&2
    teardown >/dev/null 2>&1 || teardown
    exit "$((rc == 0 ? 1 : rc))"
}

cmd_up() {
    local workers=3 mem=256MiB disk=1GiB dir="" subnet=10.77.0.0/24 racks=1 partitions="" stop_with="" timeout=30 keep=0
    local -a rates=() coord_extra=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --workers) workers="${2:?}"; shift 2 ;;
            --coordinator-arg) coord_extra+=("${2:?}"); shift 2 ;;
            --mem) mem="${2:?}"; shift 2 ;;
            --disk) disk="${2:?}"; shift 2 ;;
            --dir) dir="${2:?}"; shift 2 ;;
            --subnet) subnet="${2:?}"; shift 2 ;;
            --racks) racks="${2:?}"; shift 2 ;;
            --rate) rates+=("${2:?}"); shift 2 ;;
            --partitions) partitions="${2:?}"; shift 2 ;;
            --stop-with) stop_with="${2:?}"; shift 2 ;;
            --timeout) timeout="${2:?}"; shift 2 ;;
            --keep) keep=1; shift ;;
            --name) NAME="${2:?}"; shift 2 ;;
            -h | --help) usage; exit 0 ;;
            *) die "up: unknown argument $1 (see --help)" ;;
        esac
    done
    check_name
    [[ "$workers" =~ ^[0-9]+$ ]] && [ "$workers" -ge 1 ] && [ "$workers" -le $MAX_WORKERS ] ||
        die "--workers must be 1..$MAX_WORKERS"
    [[ "$racks" =~ ^[0-9]+$ ]] && [ "$racks" -ge 1 ] || die "--racks must be a positive number"
    [[ "$timeout" =~ ^[0-9]+$ ]] && [ "$timeout" -ge 1 ] || die "--timeout must be a positive number of seconds"
    [[ "$subnet" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.0/24$ ]] &&
        [ "${BASH_REMATCH[1]}" -le 255 ] && [ "${BASH_REMATCH[2]}" -le 255 ] && [ "${BASH_REMATCH[3]}" -le 255 ] ||
        die "--subnet must be a /24 written A.B.C.0/24: $subnet"
    NET="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}"
    WORKERS="$workers"
    declare -A rate_of=()
    local r id rate
    for r in "${rates[@]}"; do
        [[ "$r" =~ ^([0-9]+|c|coord|coordinator)=(.+)$ ]] || die "--rate takes ID=RATE, e.g. 3=250mbit: $r"
        id="${BASH_REMATCH[1]}" rate="${BASH_REMATCH[2]}"
        ns_of "$id" >/dev/null
        rate_bits "$rate" >/dev/null
        [[ "$id" =~ ^[0-9]+$ ]] && id=$((10#$id)) || id=coord
        rate_of[$id]="$rate"
    done

    [ "$(id -u)" = 0 ] || die "network namespaces need root"
    BIN="${TIERPOOL_BIN:-$ROOT/target/release/tierpool}"
    [ -x "$BIN" ] || die "no tierpool binary at $BIN (cargo build --release -p tierpool, or set TIERPOOL_BIN)"
    BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
    [ -f "$(state_file)" ] || [ -n "$(our_namespaces)$(our_links)" ] &&
        die "pool $NAME is already up (or was half torn down): run down first"
    [ -z "$(ip -4 route show exact "$NET.0/24")" ] || die "$NET.0/24 is already routed here; choose another --subnet"

    DIR="${dir:-/tmp/tierpool-netns-$NAME}"
    mkdir -p "$DIR/logs" "$DIR/pids"
    DIR="$(cd "$DIR" && pwd)"
    rm -f "$DIR"/pids/*.pid
    if [ "$keep" = 0 ]; then
        # A new pool: only what this script puts in DIR goes.
        rm -rf "$DIR/coordinator" "$DIR"/w[0-9]* "$DIR"/logs/*.log
    fi
    SECRET=""
    # Written first, so that down finds the processes of an up that fails half way.
    mkdir -p "$RUN_DIR"
    {
        printf 'NET=%q\nWORKERS=%q\nDIR=%q\nBIN=%q\n' "$NET" "$WORKERS" "$DIR" "$BIN"
    } >"$(state_file)"
    UP_DONE=0
    trap up_exit EXIT
    trap 'exit 130' INT TERM

    ip link add "$NAME-br" type bridge stp_state 0 forward_delay 0
    ip addr add "$NET.254/24" dev "$NAME-br"
    ip link set "$NAME-br" up
    make_node "$NAME-coord" "$NET.1"
    [ -z "${rate_of[coord]:-}" ] || apply_rate "$NAME-coord" "${rate_of[coord]}"
    local i
    for ((i = 1; i <= workers; i++)); do
        make_node "$NAME-w$i" "$(ip_of "$i")"
        [ -z "${rate_of[$i]:-}" ] || apply_rate "$NAME-w$i" "${rate_of[$i]}"
    done

    local -a common=()
    [ -z "$stop_with" ] || common+=(--stop-with "$stop_with")
    local -a cargs=(coordinator --dir "$DIR/coordinator" --listen "$NET.1:$COORD_PORT" "${common[@]}")
    [ -z "$partitions" ] || cargs+=(--partitions "$partitions")
    cargs+=("${coord_extra[@]}")
    start_in "$NAME-coord" coordinator "${cargs[@]}"
    # A pool with a shared secret: the coordinator writes it, every other
    # process (the CLI asking for status here too) proves it knows it.
    if "$BIN" worker --help 2>/dev/null | grep -q -- --secret-file; then
        SECRET="$DIR/coordinator/secret"
        wait_until "$(read_pid coordinator)" "$timeout" test -s "$SECRET" ||
            { tail_log coordinator; die "the coordinator wrote no $SECRET"; }
        common+=(--secret-file "$SECRET")
        printf 'SECRET=%q\n' "$SECRET" >>"$(state_file)"
    fi
    local rc=0
    wait_until "$(read_pid coordinator)" "$timeout" pool_cli status || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail_log coordinator
        [ "$rc" -eq 1 ] || die "the coordinator exited"
        die "the coordinator is not reachable at $NET.1:$COORD_PORT after ${timeout}s"
    fi

    # One at a time, each once registered: a new pool then numbers its
    # workers as the script does (w3 in status is host3, namespace NAME-w3).
    for ((i = 1; i <= workers; i++)); do
        start_in "$NAME-w$i" "w$i" worker --coordinator "$NET.1:$COORD_PORT" --dir "$DIR/w$i" \
            --mem "$mem" --disk "$disk" --listen "$(ip_of "$i"):$WORKER_PORT" \
            --host "host$i" --rack "r$(((i - 1) % racks + 1))" "${common[@]}"
        rc=0
        wait_until "$(read_pid "w$i")" "$timeout" worker_listed "$(ip_of "$i"):$WORKER_PORT" || rc=$?
        if [ "$rc" -ne 0 ]; then
            tail_log "w$i"
            [ "$rc" -eq 1 ] || die "worker $i exited"
            die "worker $i did not register within ${timeout}s"
        fi
    done
    rc=0
    wait_until "$(read_pid coordinator)" "$timeout" workers_alive "$workers" || rc=$?
    if [ "$rc" -ne 0 ]; then
        pid_alive "$(read_pid coordinator)" || tail_log coordinator
        die "not every worker is alive after ${timeout}s"
    fi
    UP_DONE=1

    echo "pool $NAME up: coordinator $NET.1:$COORD_PORT, $workers workers ($NET.11..$NET.$((10 + workers))), MEM $mem + DISK $disk each; state in $DIR"
    for id in "${!rate_of[@]}"; do echo "  $NAME-$([ "$id" = coord ] || echo w)$id link shaped to ${rate_of[$id]}"; done
    echo "export TIERPOOL_COORDINATOR=$NET.1:$COORD_PORT"
    [ -z "$SECRET" ] || echo "export TIERPOOL_SECRET_FILE=$SECRET"
}

# ---- down -------------------------------------------------------------------

# Stops every process of the pool and deletes every namespace and link it
# made; each step tolerates what is already gone.
teardown() {
    local -a pids=()
    local f p ns
    if [ -n "${DIR:-}" ] && [ -d "$DIR/pids" ]; then
        for f in "$DIR"/pids/*.pid; do
            [ -f "$f" ] || continue
            p="$(cat "$f")"
            pid_alive "$p" && pids+=("$p")
            rm -f "$f"
        done
    fi
    # Also what runs inside our namespaces without a pid file (exec, iperf3).
    for ns in $(our_namespaces); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
    done
    if [ ${#pids[@]} -gt 0 ]; then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        local t
        for t in $(seq 50); do
            local left=()
            for p in "${pids[@]}"; do pid_alive "$p" && left+=("$p"); done
            [ ${#left[@]} -gt 0 ] || break
            [ "$t" -lt 50 ] || kill -KILL "${left[@]}" 2>/dev/null || true
            sleep 0.1
        done
    fi
    for ns in $(our_namespaces); do ip netns delete "$ns" 2>/dev/null || true; done
    # Deleting a namespace deletes its end of each pair, and so the pair; what
    # an interrupted up left in the root namespace goes here.
    for f in $(our_links); do ip link delete "$f" 2>/dev/null || true; done
    rm -f "$(state_file)"
    local left_ns left_links
    left_ns="$(our_namespaces)"
    left_links="$(our_links)"
    [ -z "$left_ns$left_links" ] || die "could not delete: $left_ns $left_links"
}

cmd_down() {
    local purge=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --purge) purge=1; shift ;;
            --name) NAME="${2:?}"; shift 2 ;;
            -h | --help) usage; exit 0 ;;
            *) die "down: unknown argument $1 (see --help)" ;;
        esac
    done
    check_name
    [ "$(id -u)" = 0 ] || die "network namespaces need root"
    DIR=""
    # shellcheck disable=SC1090
    [ ! -f "$(state_file)" ] || source "$(state_file)"
    teardown
    if [ "$purge" = 1 ] && [ -n "$DIR" ]; then rm -rf "$DIR"; fi
    echo "pool $NAME down"
}

# ---- status, shape, exec, cut, heal -----------------------------------------

cmd_status() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --name) NAME="${2:?}"; shift 2 ;;
            -h | --help) usage; exit 0 ;;
            *) die "status: unknown argument $1 (see --help)" ;;
        esac
    done
    check_name
    load_state
    local st reach="reachable"
    st="$(pool_cli status)" || reach="NOT reachable"
    echo "pool $NAME: bridge $NAME-br $NET.254/24, coordinator $NET.1:$COORD_PORT ($reach), state in $DIR"
    printf '%-12s %-12s %-15s %-8s %-7s %-5s %-10s %-10s %s\n' \
        ID NAMESPACE ADDRESS PID PROCESS LINK "RATE IN" "RATE OUT" "POOL ALIVE"
    local id ns pid proc link rin rout pool
    for id in coord $(seq "$WORKERS"); do
        ns="$(ns_of "$id")"
        if [ "$id" = coord ]; then pid="$(read_pid coordinator)"; else pid="$(read_pid "w$id")"; fi
        proc=dead
        pid_alive "$pid" && proc=alive
        link="missing"
        if ip link show "$ns" >/dev/null 2>&1; then
            link="cut"
            ip link show "$ns" | grep -Eq '[<,]UP[,>]' && link=up
        fi
        rin="$(qdisc_rate "$ns" "")"
        rout="$(qdisc_rate eth0 "$ns")"
        pool=-
        [ "$id" = coord ] || pool="$(pool_alive_of "$st" "$(ip_of "$id"):$WORKER_PORT")"
        printf '%-12s %-12s %-15s %-8s %-7s %-5s %-10s %-10s %s\n' \
            "$id" "$ns" "$(ip_of "$id")" "${pid:--}" "$proc" "$link" "$rin" "$rout" "$pool"
    done
}

# Parses "[--name NAME] ID" for the commands that act on one namespace.
one_id() {
    check_name
    load_state
    [ "$(id -u)" = 0 ] || die "network namespaces need root"
}

main() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --name) NAME="${2:?}"; shift 2 ;;
            -h | --help | help) usage; exit 0 ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || { usage >&2; exit 2; }
    local cmd="$1"
    shift
    case "$cmd" in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) cmd_status "$@" ;;
        shape)
            [ $# -eq 2 ] || die "usage: shape ID RATE|off"
            one_id
            local ns
            ns="$(ns_of "$1")"
            [ "$2" = off ] || rate_bits "$2" >/dev/null
            apply_rate "$ns" "$2"
            echo "$ns: rate $2 both ways"
            ;;
        exec)
            [ $# -ge 2 ] || die "usage: exec ID CMD [ARGS]..."
            one_id
            local ns
            ns="$(ns_of "$1")"
            shift
            # The pool's own binary comes first on PATH: `exec 2 tierpool ls /`.
            local -a env=(TIERPOOL_COORDINATOR="$NET.1:$COORD_PORT" PATH="$(dirname "$BIN"):$PATH")
            [ -z "${SECRET:-}" ] || env+=(TIERPOOL_SECRET_FILE="$SECRET")
            exec ip netns exec "$ns" env "${env[@]}" "$@"
            ;;
        cut | heal)
            [ $# -eq 1 ] || die "usage: $cmd ID"
            one_id
            local ns state=down
            ns="$(ns_of "$1")"
            [ "$cmd" = cut ] || state=up
            ip link set "$ns" "$state"
            echo "$ns: link $state"
            ;;
        *) die "unknown command $cmd (see --help)" ;;
    esac
}

main "$@"
