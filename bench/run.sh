#!/usr/bin/env bash
# Every benchmark of bench/, each with what it needs started before it and stopped after it,
# even when it fails: what `make bench` runs.
#
#   bench/run.sh            all of them, with the parameters docs/performance.md quotes
#   bench/run.sh NAME...    only those (fanout, convert, schedule, download, rbd,
#                           conductor_memory, metrics_hooks, p2p, peer_tls)
#   bench/run.sh --smoke [NAME...]   each once at a tiny size (its --smoke; fanout in both
#                           modes), no figure judged: proves every bench still runs (make
#                           test, through tools/run-integration.sh). Under 3 minutes.
#   --stack-up              the local stack is already up (tools/run-integration.sh): the
#                           ON_STACK benchmarks run once on it, nothing started or stopped.
#
# The benchmarks are not changed: each still runs alone (`.venv/bin/python bench/NAME.py`)
# when what it needs is there. This script only provides it:
# - SELF_CONTAINED start what they need themselves (fanout.py: a private RabbitMQ node, the
#   API and a conductor; convert.py: qemu-img only; schedule.py: a Placement under gunicorn on
#   a database of its own in the machine's PostgreSQL; p2p.py: root, iproute2 and network
#   namespaces for its computes and origin, which it creates and deletes itself);
# - ON_STACK need the local stack (tools/stack.sh: Glance on :19292, Ceph and Glance's rbd
#   store, fleetcache's daemons). The stack is brought up once (after tools/test-services.sh
#   has prepared the RabbitMQ vhosts it uses) for all of them, and down at the end, on
#   failure or interruption too. They run once per hash algorithm of BENCH_GLANCE_HASHES
#   (default "sha512 sha256"): the stack is brought up with Glance's hashing_algorithm set to
#   each in turn (FLEETCACHE_GLANCE_HASHING_ALGORITHM), since which hash a compute verifies is
#   Glance's choice; sha512 is Glance's default, sha256 an operator's option. Its services
#   keep a validated token for keystonemiddleware's default 300 s (FLEETCACHE_TOKEN_CACHE_TIME;
#   the tests' stack keeps it 10 s, and every 10 s a request waits 0.13-0.18 s for Keystone).
# Each benchmark's output is shown as it runs; the end lists each one's status and headline.
# Exit status: 0 when every benchmark ran to its end, else 1 (a missed target is no failure:
# the figures depend on the machine's load; the smoke run judges none).
#
# The stack binds fixed ports: on a machine shared with others, run it under their lock, e.g.
# `flock -o /tmp/fc-integration.lock make bench` (`-o`: the daemons the stack starts do not inherit the lock).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${FLEETCACHE_VENV:-$ROOT/.venv}/bin/python
cd "$ROOT"

SMOKE=0
STACK_GIVEN=0
while [[ ${1:-} == --* ]]; do
    case $1 in
        --smoke) SMOKE=1 ;;
        --stack-up) STACK_GIVEN=1 ;;
        *) echo "bench: unknown option $1 (known: --smoke, --stack-up)" >&2; exit 2 ;;
    esac
    shift
done

# name -> arguments
declare -A SELF_CONTAINED=(
    [fanout]="--hosts 1000 --concurrency 64 --rounds 3"
    # the realistic mode: each call a 64 MiB download at 1 Gbit/s (issue 25's target: 1.05x)
    [fanout_download]="--hosts 1000 --concurrency 64 --rounds 3 --image-mib 64 --host-mbps 1000"
    [convert]="--size-mib 1024 --rounds 7"
    # its own Placement (gunicorn) on the machine's PostgreSQL, database fleetcache_bench_placement
    [schedule]="--providers 10000 --cells 4 --rounds 15"
    [conductor_memory]="--hosts 1000 10000"
    [metrics_hooks]="--hosts 1000 --images 3 --rounds 15"
    # peer distribution in network namespaces behind tc tbf (root): origin-only beside
    # store-and-forward and cut-through, 4 MiB/s per site to the origin, 32 MiB/s per
    # compute (issue 22)
    [p2p]="--size-mib 32 --origin-mibps 4 --host-mibps 32 --hosts 2 4 8 16 32 --groups 1 2 --rounds 3"
    # one peer transfer over plain HTTP, then over mutual TLS ([image_cache] peer_ssl_*)
    [peer_tls]="--size-mib 512 --rounds 4"
)
# The bench each name runs, where it is not the name's own.
declare -A SCRIPT=([fanout_download]=fanout)
declare -A ON_STACK=(
    [download]="--size-mib 1024 --rounds 3"
    [rbd]="--size-mib 1024 --rounds 3"
)
ORDER=(fanout fanout_download convert schedule conductor_memory metrics_hooks p2p peer_tls download
       rbd)
read -r -a HASHES <<<"${BENCH_GLANCE_HASHES:-sha512 sha256}"
if ((SMOKE)); then
    for name in "${!SELF_CONTAINED[@]}"; do SELF_CONTAINED[$name]="--smoke"; done
    for name in "${!ON_STACK[@]}"; do ON_STACK[$name]="--smoke"; done
    # 1 MiB at 80 Mbit/s: 0.1 s per call. The first fanout leaves the bench broker up for the
    # second (20 s saved); cleanup stops it.
    SELF_CONTAINED[fanout]="--smoke --keep-broker"
    SELF_CONTAINED[fanout_download]="--smoke --image-mib 1 --host-mbps 80"
    HASHES=("${HASHES[0]}")
fi
((STACK_GIVEN)) && HASHES=("as it is")

log() { echo "bench: $*"; }

names=("$@")
if ((${#names[@]})); then  # fanout is both modes
    [[ " ${names[*]} " == *" fanout "* && " ${names[*]} " != *" fanout_download "* ]] \
        && names+=(fanout_download)
else
    names=("${ORDER[@]}")
    for name in "${!ON_STACK[@]}" "${!SELF_CONTAINED[@]}"; do  # any not yet in ORDER
        [[ " ${ORDER[*]} " == *" $name "* ]] || names+=("$name")
    done
fi
for name in "${names[@]}"; do
    if [[ ! -v SELF_CONTAINED[$name] && ! -v ON_STACK[$name] ]]; then
        echo "bench: unknown benchmark $name (known: ${!SELF_CONTAINED[*]} ${!ON_STACK[*]})" >&2
        exit 2
    fi
done

declare -A STATUS=() HEADLINE=()
OUT=$(mktemp -d)
STACK_UP=0
cleanup() {
    if ((STACK_UP)); then
        log "stopping the local stack"
        tools/stack.sh down || log "tools/stack.sh down failed"
    fi
    if ((SMOKE)); then
        tools/rabbitmq-bench-node.sh stop >/dev/null 2>&1 || true
    fi
    rm -rf "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_bench() {  # key name args... (key: the name, with the hash algorithm for ON_STACK)
    local key=$1 name=${SCRIPT[$2]:-$2} t0=$SECONDS status=0
    local output="$OUT/${key//\//-}.log"  # download/sha512 -> download-sha512.log
    shift 2
    log "$key: $PYTHON bench/$name.py $*"
    "$PYTHON" "bench/$name.py" "$@" 2>&1 | tee "$output" || status=${PIPESTATUS[0]}
    STATUS[$key]="status $status, $((SECONDS - t0)) s"
    HEADLINE[$key]=$(grep -E "^$name: " "$output" | tail -1)
    KEYS+=("$key")
}
KEYS=()

for name in "${names[@]}"; do
    if [[ -v SELF_CONTAINED[$name] ]]; then
        # shellcheck disable=SC2086 # the arguments are words
        run_bench "$name" "$name" ${SELF_CONTAINED[$name]}
    fi
done
on_stack=()
for name in "${names[@]}"; do
    [[ -v ON_STACK[$name] ]] && on_stack+=("$name")
done
for algo in "${HASHES[@]}"; do
    ((${#on_stack[@]})) || break
    if ((STACK_GIVEN)); then
        for name in "${on_stack[@]}"; do
            # shellcheck disable=SC2086
            run_bench "$name" "$name" ${ON_STACK[$name]}
        done
        break
    fi
    if ((STACK_UP)); then
        log "stopping the local stack to restart it with Glance hashing $algo"
        tools/stack.sh down || log "tools/stack.sh down failed"
        STACK_UP=0
    fi
    log "starting the local stack (tools/stack.sh up), Glance hashing $algo"
    STACK_UP=1
    if ! { tools/test-services.sh && FLEETCACHE_GLANCE_HASHING_ALGORITHM=$algo \
            FLEETCACHE_TOKEN_CACHE_TIME=300 tools/stack.sh up; }; then
        log "the local stack did not come up: not running ${on_stack[*]} with $algo"
        for name in "${on_stack[@]}"; do
            STATUS[$name/$algo]="not run: no stack"
            KEYS+=("$name/$algo")
        done
        continue
    fi
    for name in "${on_stack[@]}"; do
        # shellcheck disable=SC2086
        run_bench "$name/$algo" "$name" ${ON_STACK[$name]}
    done
done

failed=0
log "summary"
for key in "${KEYS[@]}"; do
    [[ ${STATUS[$key]} == "status 0,"* ]] || failed=1
    log "  $key: ${STATUS[$key]}${HEADLINE[$key]:+; ${HEADLINE[$key]}}"
done
exit "$failed"
