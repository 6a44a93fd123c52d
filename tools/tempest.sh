#!/usr/bin/env bash
# Tempest, OpenStack's API conformance suite (tempest 47.0.0, pinned), on the local stack.
#
#   tools/tempest.sh [--with-stack] [REGEX...]
#
# On a running stack (`tools/stack.sh up`; --with-stack starts it first and stops it after,
# as `make tempest` does):
# 1. builds Tempest's venv once (.stack/tempest-venv, tools/tempest/requirements.txt, PyPI;
#    rebuilt only when that file's hash changes; `stack.sh up` keeps it like Glance's);
# 2. writes .stack/tempest/tempest.conf from the stack (tools/tempest/configure.py: the admin
#    of .stack/env with dynamic credentials on Keystone v3, the catalog's compute endpoint,
#    the microversions its GET /v2.1/ announces, flavors and sample images; the services and
#    features fleetcache lacks switched off, so Tempest itself skips the tests needing them);
# 3. runs `tempest run` (stestr) on tools/tempest/selection.txt minus
#    tools/tempest/exclusion.txt (each line with its reason), or on REGEX... when given;
# 4. prints per group of selection.txt: run, passed, failed, skipped, and each failure's
#    message (tools/tempest/summary.py), also kept in .stack/tempest/summary.txt.
# Exits non-zero when a test fails, after the API log's ERROR lines of the run. Output:
# .stack/tempest/ (tempest.log: every request and answer; .stestr/: the subunit streams), out
# of git like all of .stack/.
#
# TEMPEST_CONCURRENCY (default 2) workers; the stack is shared, no test needs to be alone on it
# but the serial ones, which stestr runs in one worker anyway.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${FLEETCACHE_STACK_DIR:-$ROOT/.stack}
VENV_BIN=${FLEETCACHE_VENV:-$ROOT/.venv}/bin
TEMPEST_PYTHON=${TEMPEST_PYTHON:-python3}
TEMPEST_VENV=$STACK/tempest-venv
TEMPEST_REQS=$ROOT/tools/tempest/requirements.txt
SELECTION=$ROOT/tools/tempest/selection.txt
EXCLUSION=$ROOT/tools/tempest/exclusion.txt
OUT=$STACK/tempest
CONCURRENCY=${TEMPEST_CONCURRENCY:-2}

log() { echo "tempest: $*"; }

ensure_tempest_venv() {  # as tools/stack.sh's ensure_service_venv: keyed on the file's hash
    local want have=""
    want=$({ cat "$TEMPEST_REQS"; "$TEMPEST_PYTHON" -VV; } | sha256sum | cut -d' ' -f1)
    [[ -f $TEMPEST_VENV/.requirements.sha256 ]] && have=$(<"$TEMPEST_VENV/.requirements.sha256")
    [[ $want == "$have" && -x $TEMPEST_VENV/bin/tempest ]] && return 0
    log "building the Tempest venv (pinned tempest 47.0.0; about a minute)"
    rm -rf "$TEMPEST_VENV"
    mkdir -p "$STACK"
    "$TEMPEST_PYTHON" -m venv "$TEMPEST_VENV"
    "$TEMPEST_VENV/bin/pip" install -q -r "$TEMPEST_REQS" >"$STACK/tempest-venv.log" 2>&1 \
        || { log "pip install -r $TEMPEST_REQS failed: $STACK/tempest-venv.log"; return 1; }
    echo "$want" >"$TEMPEST_VENV/.requirements.sha256"
}

api_errors() {  # log lines-before: the API's errors during the run, which a failure's "Details:
    # 503" alone does not say (CI keeps only this output, not .stack/). oslo.log prefixes each
    # line of a traceback with "ERROR <logger>" too: of those only the exception's own line
    # ("KeyError: 'x'") is kept beside the logged messages ("ERROR <logger> [req-...] ...").
    [[ -r $1 ]] || return 0
    log "the API's ERROR lines during the run (last 20, tracebacks' frames left out):"
    tail -n "+$(($2 + 1))" "$1" | awk '
        match($0, /^[0-9-]+ [0-9:.]+ [0-9]+ (ERROR|CRITICAL) [^ ]+ /) {
            rest = substr($0, RLENGTH + 1)
            sub(/^\[instance: [^]]*\] /, "", rest)    # logging_exception_prefix %(instance)s
            if (rest ~ /^\[/ || rest ~ /^[A-Za-z_][A-Za-z0-9_.]*(: |$)/) print substr($0, 1, 400)
        }' | tail -n 20 || true
}

run_tempest() {  # [REGEX...]
    local status=0 filter=(--include-list "$SELECTION" --exclude-list "$EXCLUSION") listing
    listing=("${filter[@]}")
    if (($#)); then
        filter=(--regex "$(IFS='|'; echo "$*")")
        listing=("$@")
    fi
    [[ -f $STACK/env ]] || { log "no stack: $STACK/env missing (tools/stack.sh up)"; return 2; }
    ensure_tempest_venv
    # shellcheck disable=SC1091
    source "$STACK/env"
    rm -rf "$OUT"
    mkdir -p "$OUT"
    "$VENV_BIN/python" "$ROOT/tools/tempest/configure.py" "$OUT"
    cd "$OUT"
    local t0=$SECONDS api_log=$STACK/log/api.log api_lines=0
    [[ -r $api_log ]] && { api_lines=$(wc -l <"$api_log") || api_lines=0; }
    "$TEMPEST_VENV/bin/tempest" run --config-file "$OUT/tempest.conf" \
        --concurrency "$CONCURRENCY" "${filter[@]}" >"$OUT/run.log" 2>&1 || status=$?
    tail -n 12 "$OUT/run.log"
    "$TEMPEST_VENV/bin/stestr" last --subunit 2>/dev/null \
        | "$TEMPEST_VENV/bin/python" "$ROOT/tools/tempest/summary.py" "$SELECTION" \
            <("$TEMPEST_VENV/bin/stestr" list "${listing[@]}" 2>/dev/null) \
        | tee "$OUT/summary.txt"
    log "tempest run: $((SECONDS - t0))s, status $status (log: $OUT/run.log, $OUT/tempest.log)"
    ((status == 0)) || api_errors "$api_log" "$api_lines"
    return "$status"
}

main() {
    if [[ ${1:-} == --with-stack ]]; then
        shift
        trap '"$ROOT/tools/stack.sh" down' EXIT
        "$ROOT/tools/stack.sh" up
    fi
    run_tempest "$@"
}

main "$@"
