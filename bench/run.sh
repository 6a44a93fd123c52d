#!/usr/bin/env bash
# Every benchmark of bench/, each with what it needs started before it and stopped after it,
# even when it fails: what `make bench` runs.
#
#   bench/run.sh            all of them, with the parameters docs/performance.md quotes
#   bench/run.sh NAME...    only those (fanout, convert, download, ...)
#
# The benchmarks are not changed: each still runs alone (`.venv/bin/python bench/NAME.py`)
# when what it needs is there. This script only provides it:
# - SELF_CONTAINED start what they need themselves (fanout.py: a private RabbitMQ node, the
#   API and a conductor; convert.py: qemu-img only; schedule.py: a Placement under gunicorn on
#   a database of its own in the machine's PostgreSQL);
# - ON_STACK need the local stack (tools/stack.sh: Glance on :19292, Ceph and Glance's rbd
#   store, fleetcache's daemons). The stack is brought up once (after tools/test-services.sh
#   has prepared the RabbitMQ vhosts it uses) for all of them, and down at the end, on
#   failure or interruption too.
# Each benchmark's output is shown as it runs; the end lists each one's status and headline.
# Exit status: 0 when every benchmark ran to its end, else 1.
#
# The stack binds fixed ports: on a machine shared with others, run it under their lock, e.g.
# `flock /tmp/fc-integration.lock make bench`.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${FLEETCACHE_VENV:-$ROOT/.venv}/bin/python
cd "$ROOT"

# name -> arguments
declare -A SELF_CONTAINED=(
    [fanout]="--hosts 1000 --concurrency 64 --rounds 3"
    [convert]="--size-mib 1024 --rounds 7"
    # its own Placement (gunicorn) on the machine's PostgreSQL, database fleetcache_bench_placement
    [schedule]="--providers 10000 --cells 4 --rounds 15"
)
declare -A ON_STACK=(
    [download]="--size-mib 1024 --rounds 3"
    # a benchmark of Glance's rbd store (bench/rbd.py) goes here: the stack runs its Ceph
)
ORDER=(fanout convert schedule download)

log() { echo "bench: $*"; }

names=("$@")
if ((${#names[@]} == 0)); then
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
    rm -rf "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_bench() {  # name args...
    local name=$1 t0=$SECONDS status=0
    shift
    log "$name: $PYTHON bench/$name.py $*"
    "$PYTHON" "bench/$name.py" "$@" 2>&1 | tee "$OUT/$name.log" || status=${PIPESTATUS[0]}
    STATUS[$name]="status $status, $((SECONDS - t0)) s"
    HEADLINE[$name]=$(grep -E "^$name: " "$OUT/$name.log" | tail -1)
}

for name in "${names[@]}"; do
    if [[ -v SELF_CONTAINED[$name] ]]; then
        # shellcheck disable=SC2086 # the arguments are words
        run_bench "$name" ${SELF_CONTAINED[$name]}
    fi
done
for name in "${names[@]}"; do
    [[ -v ON_STACK[$name] ]] || continue
    if ((!STACK_UP)); then
        log "starting the local stack (tools/stack.sh up)"
        STACK_UP=1
        if ! { tools/test-services.sh && tools/stack.sh up; }; then
            log "the local stack did not come up: not running ${name} and the rest on it"
            for rest in "${names[@]}"; do
                [[ -v ON_STACK[$rest] ]] && STATUS[$rest]="not run: no stack"
            done
            break
        fi
    fi
    # shellcheck disable=SC2086
    run_bench "$name" ${ON_STACK[$name]}
done

failed=0
log "summary"
for name in "${names[@]}"; do
    [[ ${STATUS[$name]} == "status 0,"* ]] || failed=1
    log "  $name: ${STATUS[$name]}${HEADLINE[$name]:+; ${HEADLINE[$name]}}"
done
exit "$failed"
