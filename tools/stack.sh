#!/usr/bin/env bash
# The real local stack: Keystone 30, Glance 33, Placement, the fleetcache API, a conductor and
# three computes.
#
#   tools/stack.sh up        start everything (stopping a previous stack first), write .stack/env
#   tools/stack.sh down      stop exactly what `up` started (pid files), TERM then KILL
#   tools/stack.sh status    what runs, what answers
#   tools/stack.sh stop NAME [--kill]   stop one daemon (e.g. compute2; --kill = SIGKILL now)
#   tools/stack.sh start NAME           start it again with the same command and config
#
# Pieces (all on 127.0.0.1, state under .stack/ in the checkout, or $FLEETCACHE_STACK_DIR):
# - keystone:  Keystone 30.0.0 in its own venv on :15000, fernet tokens, PostgreSQL database
#              fleetcache_keystone; users, projects, roles and the catalog (compute, image,
#              placement): tools/keystone/stack-keystone.bash says which. Every other service
#              validates tokens against it (keystonemiddleware) and uses service users.
# - ceph:      a throwaway single-node Ceph (tools/ceph.sh: one mon, one OSD, pools images and
#              instances, users glance, compute, instances) in .stack/ceph.
# - glance:    Glance 33.0.0 in its own venv (.stack/glance-venv, tools/glance/requirements.txt,
#              rebuilt only when that file changes; Debian's rados/rbd bindings linked in) under
#              gunicorn on :19292; SQLite, behind Keystone (paste "keystone" flavor;
#              tools/glance/).
#              Stores: "file" (the default, 4 MiB chunks) and "ceph" (rbd, user glance, pool
#              images). Its access log (.stack/log/glance-access.log) records every request.
# - placement: OpenStack Placement (openstack-placement 16.0.0) in its own venv
#              (.stack/placement-venv, tools/placement/requirements.txt, rebuilt only when that
#              file changes) under gunicorn on :18778, behind Keystone; its database
#              fleetcache_placement on the machine's PostgreSQL (dropped and created at each
#              `up`, like every other piece of state), `placement-manage db sync`. The conductor
#              keeps one resource provider per compute in it (docs/placement.md).
# - api:       fleetcache-api (gunicorn) on 127.0.0.1:STACK_API_BACKEND_PORT (18775),
#              [api] auth_strategy = keystone, behind
#   api-front: Debian's nginx on :18774 (the catalog's compute endpoint), running
#              etc/nginx/fleetcache-api.conf with the ports substituted: it reads whole
#              requests itself and hands the API complete ones only (docs/api.md).
# - conductor: one fleetcache-conductor; DEFAULT transport_url vhost fleetcache. It reads
#              .stack/etc/fleetcache.conf (shared with the API), then .stack/etc/conductor.conf
#              (Glance as the service user fleetcache), then .stack/etc/conductor.d/*.conf
#              (empty: for tests that restart it with options).
# - compute1, compute2 (cell1, vhost fleetcache_cell1) and compute3 (cell2, fleetcache_cell2):
#              fleetcache-compute, disk driver, each with its own config and instances_path,
#              and .stack/etc/<host>.d/*.conf (empty: for tests). Images in Glance's rbd store
#              are exported from Ceph directly (client.compute; HTTP when that fails), over
#              HTTP as the service user fleetcache ([glance] auth options).
# metrics:   the conductor and every compute serve Prometheus metrics on 127.0.0.1:
#              conductor on STACK_METRICS_PORT (18790), compute N on STACK_METRICS_PORT + N.
# Two sample images (a real qcow2 and a raw, a few MiB each) are uploaded to Glance's file store,
# and one raw image to its rbd store (direct_url rbd://<fsid>/images/<id>/snap).
#
# Every daemon runs in its own session (setsid), so stopping its process group stops its
# children too and nothing else. Everything `up` writes is private (umask 077: configs and env
# files hold passwords). `up` fails naming the piece that did not come up, with the
# tail of its log, and stops what it had started. One stack.sh command runs at a time (flock).
#
# FLEETCACHE_GLANCE_HASHING_ALGORITHM (default sha512, Glance's default) is Glance's
# [DEFAULT] hashing_algorithm, the os_hash_algo of every image uploaded to this stack: an
# operator's choice that the benchmarks run both ways (docs/performance.md, "Hash speed per
# core").
#
# FLEETCACHE_TOKEN_CACHE_TIME (default 10) is the services' [keystone_authtoken]
# token_cache_time: the integration tests need a revoked token refused within seconds (and
# tools/run-integration.sh always runs with 10); the benchmarks (bench/run.sh) run with
# keystonemiddleware's default, 300.
#
# FLEETCACHE_STACK_PEER_TLS=1 runs the computes' peer image servers over mutual TLS
# ([image_cache] peer_ssl_*, docs/peer-distribution.md): `up` makes a CA of the stack's own and
# one certificate per compute (openssl, P-256, the compute's my_ip as IP SAN) in
# .stack/peer-tls. Default 0: plain HTTP.
#
# STACK_GLANCE_PORT, STACK_API_PORT, STACK_API_BACKEND_PORT, STACK_PLACEMENT_PORT, STACK_PLACEMENT_DB, STACK_KEYSTONE_PORT,
# STACK_KEYSTONE_DB, STACK_VHOST_PREFIX
# (vhosts <prefix>, <prefix>_cell1, <prefix>_cell2, which must exist) and tools/ceph.sh's STACK_CEPH_* ports with
# FLEETCACHE_STACK_DIR run a second stack beside this one.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${FLEETCACHE_STACK_DIR:-$ROOT/.stack}
VENV_BIN=${FLEETCACHE_VENV:-$ROOT/.venv}/bin
GLANCE_PYTHON=${GLANCE_PYTHON:-python3}
GLANCE_VENV=$STACK/glance-venv
GLANCE_REQS=$ROOT/tools/glance/requirements.txt
GLANCE_DIR=$STACK/glance
GLANCE_HASHING_ALGORITHM=${FLEETCACHE_GLANCE_HASHING_ALGORITHM:-sha512}
PEER_TLS=${FLEETCACHE_STACK_PEER_TLS:-0}
[[ $GLANCE_HASHING_ALGORITHM =~ ^(sha1|sha256|sha384|sha512|sha3_256|sha3_512|blake2b|md5)$ ]] \
    || { echo "stack: FLEETCACHE_GLANCE_HASHING_ALGORITHM=$GLANCE_HASHING_ALGORITHM is not a" \
        "hashlib algorithm Glance accepts" >&2; exit 2; }
CEPH_SH=$ROOT/tools/ceph.sh
CEPH_DIR=$STACK/ceph
# Glance's rbd store (glance-api.conf.in: enabled_backends)
GLANCE_RBD_STORE=ceph
PLACEMENT_VENV=$STACK/placement-venv
PLACEMENT_REQS=$ROOT/tools/placement/requirements.txt
PLACEMENT_DIR=$STACK/placement
ETC=$STACK/etc
LOG=$STACK/log
# One line per Glance request, written when the response ends: client, time, request line,
# status, bytes sent, seconds taken, X-OpenStack-Request-ID (the job's global request id when
# a compute downloads), user agent, and when the request started (epoch seconds to the
# microsecond, stamped by tools/glance/gunicorn_hooks.py). Tests count image downloads in it,
# and how many ran at once.
GLANCE_ACCESS_LOG=$LOG/glance-access.log
GLANCE_ACCESS_FORMAT='%(h)s %(t)s "%(r)s" %(s)s %(B)s %(L)s %({x-openstack-request-id}i)s "%(a)s" %({x-fleetcache-started}i)s'
RUN=$STACK/run
CONF=$ETC/fleetcache.conf
CONDUCTOR_CONF=$ETC/conductor.conf
GLANCE_PORT=${STACK_GLANCE_PORT:-19292}
API_PORT=${STACK_API_PORT:-18774}
API_BACKEND_PORT=${STACK_API_BACKEND_PORT:-18775}
# Debian installs nginx in /usr/sbin, which a non-root PATH lacks.
NGINX=${STACK_NGINX:-$(PATH=$PATH:/usr/sbin command -v nginx || echo /usr/sbin/nginx)}
PLACEMENT_PORT=${STACK_PLACEMENT_PORT:-18778}
# Prometheus exporters: the conductor's, then one per compute (18791, 18792, 18793).
METRICS_PORT=${STACK_METRICS_PORT:-18790}
# The computes' image servers for peers (18801, 18802, 18803).
PEER_PORT=${STACK_PEER_PORT:-18800}
PLACEMENT_DB=${STACK_PLACEMENT_DB:-fleetcache_placement}
PLACEMENT_URL=http://127.0.0.1:$PLACEMENT_PORT
PSQL=(psql -h 127.0.0.1 -p 5432 -U postgres -w -v ON_ERROR_STOP=1 -qtA)
# RabbitMQ vhosts: <prefix> (API, conductor) and <prefix>_cell1, <prefix>_cell2.
VHOST_PREFIX=${STACK_VHOST_PREFIX:-fleetcache}
GLANCE_URL=http://127.0.0.1:$GLANCE_PORT
API_URL=http://127.0.0.1:$API_PORT
API_BACKEND_URL=http://127.0.0.1:$API_BACKEND_PORT
RABBIT=rabbit://guest:guest@127.0.0.1:5672
CELLS=(cell1 cell2)
COMPUTES=(compute1:cell1 compute2:cell1 compute3:cell2)   # host:cell
WAIT=${STACK_WAIT:-90}                 # seconds each piece may take to come up
STOP_TIMEOUT=${STACK_STOP_TIMEOUT:-15}  # seconds between TERM and KILL
# Short heartbeats so tests see a killed compute go down quickly.
REPORT_INTERVAL=2
SERVICE_DOWN_TIME=10

# shellcheck source=tools/keystone/stack-keystone.bash
source "$ROOT/tools/keystone/stack-keystone.bash"

T0=$SECONDS
GLANCE_START_PID=
CEPH_START_PID=
PLACEMENT_START_PID=

log() { echo "stack: $*"; }
phase() { log "[$((SECONDS - T0))s] $*"; }

# -- processes ------------------------------------------------------------------------------

proc_start_time() {  # pid -> kernel start time (ticks), to tell our pid from a reused one
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"
}

group_alive() { kill -0 -- "-$1" 2>/dev/null; }

# Is the daemon NAME (its process group) still running? Echoes its pid when it is.
daemon_pid() {
    local pidfile=$RUN/$1.pid pid started now
    [[ -f $pidfile ]] || return 1
    read -r pid started <"$pidfile"
    if now=$(proc_start_time "$pid"); then
        [[ $now == "$started" ]] || return 1   # the pid was reused by someone else
    fi
    group_alive "$pid" || return 1
    echo "$pid"
}

start_daemon() {  # name cmd... ; runs cmd in its own session, output to $LOG/name.log
    local name=$1 pid
    shift
    printf '%q ' "$@" >"$RUN/$name.cmd"
    setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null 9>&- &   # fd 9: the stack lock
    pid=$!
    echo "$pid $(proc_start_time "$pid" || echo 0)" >"$RUN/$name.pid"
}

restart_daemon() {  # name: start again with the command recorded by start_daemon
    local name=$1 cmd
    [[ -f $RUN/$name.cmd ]] || { echo "stack: no recorded command for $name" >&2; return 1; }
    if daemon_pid "$name" >/dev/null; then
        echo "stack: $name is already running" >&2
        return 1
    fi
    eval "cmd=($(<"$RUN/$name.cmd"))"
    start_daemon "$name" "${cmd[@]}"
    log "started $name (pid $(cut -d' ' -f1 "$RUN/$name.pid"))"
}

stop_groups() {  # sig name=pid... ; signal each process group, wait, then KILL what is left
    local sig=$1 entry name deadline
    shift
    local -A pids=()
    for entry in "$@"; do
        pids[${entry%%=*}]=${entry#*=}
        kill -"$sig" -- "-${entry#*=}" 2>/dev/null || true
    done
    deadline=$((SECONDS + STOP_TIMEOUT))
    while ((${#pids[@]})); do
        for name in "${!pids[@]}"; do
            group_alive "${pids[$name]}" || unset "pids[$name]"
        done
        ((${#pids[@]})) || break
        if ((SECONDS >= deadline)); then
            for name in "${!pids[@]}"; do
                log "$name did not stop within ${STOP_TIMEOUT}s: SIGKILL"
                kill -KILL -- "-${pids[$name]}" 2>/dev/null || true
            done
            break
        fi
        sleep 0.2
    done
}

stop_daemons() {  # [--kill] names... ; stop the daemons recorded in pid files
    local sig=TERM name pid entries=()
    if [[ ${1:-} == --kill ]]; then sig=KILL; shift; fi
    for name in "$@"; do
        if pid=$(daemon_pid "$name"); then entries+=("$name=$pid"); fi
    done
    ((${#entries[@]})) && stop_groups "$sig" "${entries[@]}"
    for name in "$@"; do rm -f "$RUN/$name.pid"; done
}

stray_daemons() {  # name=pid of group leaders writing to this stack's logs, without pid file
    local dir pid stat fields out
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        stat=$(cat "$dir/stat" 2>/dev/null) || continue
        read -ra fields <<<"${stat##*) }"
        [[ ${fields[2]} == "$pid" ]] || continue   # not a process group leader
        out=$(readlink "$dir/fd/1" 2>/dev/null) || continue
        [[ $out == "$LOG/"* ]] && echo "stray-$pid=$pid"
    done
    return 0
}

all_daemons() {  # names that have a pid file, API first so it stops taking requests first
    local name f
    for name in api-front api conductor "${COMPUTES[@]%%:*}" glance placement keystone; do
        [[ -f $RUN/$name.pid ]] && echo "$name"
    done
    for f in "$RUN"/*.pid; do   # anything else a test may have started through this script
        [[ -e $f ]] || continue
        name=$(basename "$f" .pid)
        [[ " api-front api conductor ${COMPUTES[*]%%:*} glance placement keystone " \
            == *" $name "* ]] \
            || echo "$name"
    done
}

# -- failure reporting ----------------------------------------------------------------------

# The pieces `up` starts in the background, in the order they underlie one another (Glance's
# rbd store reads the Ceph configuration; every service validates tokens against Keystone).
BACKGROUND=(keystone ceph placement glance)
FAILED_STARTS=()

background_failures() {  # wait for the background starts still running; FAILED_STARTS gets
    # "piece status" of each that failed, in BACKGROUND's order (in this shell, not a
    # subshell: only this shell can wait for its children; one waited for is not repeated)
    local piece var status
    FAILED_STARTS=()
    [[ $BASHPID == "$$" ]] || return 0  # fail() from a $(...): the starts are not its children
    for piece in "${BACKGROUND[@]}"; do
        var=${piece^^}_START_PID
        [[ -n ${!var} ]] || continue
        [[ $piece == glance ]] && echo "stack: waiting for Glance's start (a venv build stays" \
            "cached)" >&2
        status=0
        wait "${!var}" || status=$?
        printf -v "$var" '%s' ""
        ((status == 0)) || FAILED_STARTS+=("$piece $status")
    done
}

cause_line() {  # piece: the line of its logs that says what failed (its own FAILED line, or
    # the first error), else its last line
    local files=() f line
    for f in "$LOG/$1.log" "$LOG/$1-"*.log; do [[ -s $f ]] && files+=("$f"); done
    ((${#files[@]})) || { echo "(no log)"; return; }
    line=$(grep -h -m1 -E "FAILED|ERROR|Error|error" "${files[@]}" | head -n 1 || true)
    [[ -n $line ]] || line=$(tail -n 1 "${files[0]}")
    echo "$line"
}

show_logs() {  # name [--main]: the tail of each of its logs (--main: of name.log only)
    local f files=("$LOG/$1.log" "$LOG/$1-"*.log)
    [[ ${2:-} == --main ]] && files=("$LOG/$1.log")
    for f in "${files[@]}"; do
        [[ -s $f ]] || continue
        echo "----- last lines of $f -----" >&2
        tail -n 40 "$f" >&2
    done
}

fail() {  # name message: report with the tail of name's logs, stop everything, exit 1
    # A piece started in the background that failed is named first, with the line of its log
    # that says why: what fails after it is its consequence (with Ceph's monitor port taken,
    # Glance exited for want of the Ceph configuration that was never written).
    local name=$1 first="" entry piece
    shift
    background_failures
    for entry in "${FAILED_STARTS[@]}"; do
        piece=${entry% *}
        [[ $name != "$piece" && $name != "$piece"-* ]] || continue
        first=$piece
        echo "stack: FAILED: $piece failed first (status ${entry#* }): $(cause_line "$piece")" >&2
        break
    done
    if [[ -n $first ]]; then
        echo "stack: then $name: $*" >&2
        show_logs "$first"
        show_logs "$name" --main
    else
        echo "stack: FAILED: $name: $*" >&2
        show_logs "$name"
    fi
    echo "stack: stopping what was started" >&2
    cmd_down >&2 || true
    exit 1
}

http_code() {  # url -> HTTP status, 000 when nothing answers
    curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" || true
}

wait_http() {  # name url codes... ; until url answers with one of codes
    local name=$1 url=$2 code deadline=$((SECONDS + WAIT))
    shift 2
    while :; do
        code=$(http_code "$url")
        [[ " $* " == *" $code "* ]] && return 0
        daemon_pid "$name" >/dev/null || fail "$name" "exited before $url answered"
        ((SECONDS < deadline)) || fail "$name" "$url not answering after ${WAIT}s (last HTTP $code)"
        sleep 0.3
    done
}

# -- Service venvs -----------------------------------------------------------------------

ensure_service_venv() {  # name venv requirements what: reuse venv while the requirements hash matches
    local name=$1 venv=$2 reqs=$3 what=$4 want have=""
    want=$({ cat "$reqs"; "$GLANCE_PYTHON" -VV; } | sha256sum | cut -d' ' -f1)
    [[ -f $venv/.requirements.sha256 ]] && have=$(<"$venv/.requirements.sha256")
    if [[ $want == "$have" && -x $venv/bin/gunicorn ]]; then
        return 0
    fi
    log "building the $name venv (pinned $what; about a minute)"
    rm -rf "$venv"
    "$GLANCE_PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q -r "$reqs" >"$LOG/${name,,}-venv.log" 2>&1 || return 1
    echo "$want" >"$venv/.requirements.sha256"
}

# -- Glance ---------------------------------------------------------------------------------

ensure_glance_venv() {
    ensure_service_venv Glance "$GLANCE_VENV" "$GLANCE_REQS" "glance 33.0.0"
}

write_glance_config() {
    mkdir -p "$GLANCE_DIR"/{etc,images,staging,tasks,cache,locks}
    local f
    for f in glance-api.conf glance-api-paste.ini; do
        sed -e "s#@GLANCE_DIR@#$GLANCE_DIR#g" -e "s#@LOG_DIR@#$LOG#g" \
            -e "s#@CEPH_CONF@#$CEPH_DIR/ceph.conf#g" \
            -e "s#@HASHING_ALGORITHM@#$GLANCE_HASHING_ALGORITHM#g" \
            "$ROOT/tools/glance/$f.in" >"$GLANCE_DIR/etc/$f"
    done
    cp "$ROOT/tools/glance/policy.yaml" "$GLANCE_DIR/etc/policy.yaml"
    keystone_authtoken_section glance "$GLANCE_SERVICE_PASSWORD" >>"$GLANCE_DIR/etc/glance-api.conf"
}

start_glance() {  # in the background during `up`: report failure by status, not through fail()
    ensure_glance_venv || return 10
    # Glance's rbd store needs rados/rbd; re-linked every time, a rebuilt venv lacks them
    "$ROOT/tools/ceph-bindings.sh" "$GLANCE_VENV" >"$LOG/glance-bindings.log" 2>&1 || return 12
    "$GLANCE_VENV/bin/glance-manage" --config-file "$GLANCE_DIR/etc/glance-api.conf" db_sync \
        >"$LOG/glance-manage.log" 2>&1 || return 11
    start_daemon glance env OS_GLANCE_CONFIG_DIR="$GLANCE_DIR/etc" \
        "$GLANCE_VENV/bin/gunicorn" --bind "127.0.0.1:$GLANCE_PORT" --workers 1 --threads 4 \
        --timeout 600 --graceful-timeout 5 --config "$ROOT/tools/glance/gunicorn_hooks.py" \
        --access-logfile "$GLANCE_ACCESS_LOG" --access-logformat "$GLANCE_ACCESS_FORMAT" \
        glance.wsgi.api:application
}

wait_glance_started() {
    local status=0
    wait "$GLANCE_START_PID" || status=$?
    GLANCE_START_PID=
    case $status in
    0) ;;
    10) fail glance-venv "pip install -r $GLANCE_REQS failed" ;;
    11) fail glance-manage "glance-manage db_sync failed" ;;
    12) fail glance-bindings "tools/ceph-bindings.sh $GLANCE_VENV failed" ;;
    *) fail glance "could not start (status $status)" ;;
    esac
}

# -- Placement ------------------------------------------------------------------------------

ensure_placement_venv() {
    ensure_service_venv Placement "$PLACEMENT_VENV" "$PLACEMENT_REQS" "openstack-placement 16.0.0"
}

reset_placement_db() {  # a fresh database for a fresh stack, as every other piece of state
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $PLACEMENT_DB" \
        && "${PSQL[@]}" -d postgres -c "CREATE DATABASE $PLACEMENT_DB"
}

start_placement() {  # in the background during `up`: report failure by status, not through fail()
    mkdir -p "$PLACEMENT_DIR/etc"
    sed -e "s#@PLACEMENT_DB_URL@#postgresql+psycopg2://postgres@127.0.0.1:5432/$PLACEMENT_DB#g" \
        "$ROOT/tools/placement/placement.conf.in" >"$PLACEMENT_DIR/etc/placement.conf"
    keystone_authtoken_section placement "$PLACEMENT_SERVICE_PASSWORD" \
        >>"$PLACEMENT_DIR/etc/placement.conf"
    ensure_placement_venv || return 10
    reset_placement_db >"$LOG/placement-db.log" 2>&1 || return 12
    # placement-manage reads --config-file; the WSGI app reads $OS_PLACEMENT_CONFIG_DIR.
    "$PLACEMENT_VENV/bin/placement-manage" --config-file "$PLACEMENT_DIR/etc/placement.conf" \
        db sync >"$LOG/placement-manage.log" 2>&1 || return 11
    start_daemon placement env OS_PLACEMENT_CONFIG_DIR="$PLACEMENT_DIR/etc" \
        "$PLACEMENT_VENV/bin/gunicorn" --bind "127.0.0.1:$PLACEMENT_PORT" --workers 1 \
        --threads 8 --access-logfile "$LOG/placement-access.log" placement.wsgi.api:application
}

wait_placement_started() {
    local status=0
    wait "$PLACEMENT_START_PID" || status=$?
    PLACEMENT_START_PID=
    case $status in
    0) ;;
    10) fail placement-venv "pip install -r $PLACEMENT_REQS failed" ;;
    11) fail placement-manage "placement-manage db sync failed" ;;
    12) fail placement-db "cannot create PostgreSQL database $PLACEMENT_DB" ;;
    *) fail placement "could not start (status $status)" ;;
    esac
    wait_http placement "$PLACEMENT_URL/" 200
}

json_field() {  # field: read a JSON object on stdin, print one top-level field
    "$VENV_BIN/python" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

make_sample_images() {  # -> $STACK/samples/sample.qcow2, sample.raw (random content)
    local dir=$STACK/samples
    mkdir -p "$dir"
    head -c $((4 * 1024 * 1024)) /dev/urandom >"$dir/qcow2-source.raw"
    qemu-img convert -q -f raw -O qcow2 "$dir/qcow2-source.raw" "$dir/sample.qcow2"
    rm -f "$dir/qcow2-source.raw"
    head -c $((3 * 1024 * 1024)) /dev/urandom >"$dir/sample.raw"
    # 12 MiB: one whole 8 MiB RBD object and a partial one
    head -c $((12 * 1024 * 1024)) /dev/urandom >"$dir/sample-rbd.raw"
}

upload_image() {  # name disk_format file [store] -> image id (store: Glance's default, file)
    local name=$1 fmt=$2 file=$3 store=${4:-} body id status headers=()
    [[ -n $store ]] && headers=(-H "X-Image-Meta-Store: $store")
    body=$(curl -sf -m 30 -X POST -H @"$RUN/admin-token.header" -H 'Content-Type: application/json' \
        -d "{\"name\": \"$name\", \"disk_format\": \"$fmt\", \"container_format\": \"bare\",
             \"visibility\": \"public\"}" "$GLANCE_URL/v2/images") \
        || fail glance "cannot create image $name"
    id=$(json_field id <<<"$body")
    curl -sf -m 120 -X PUT -H @"$RUN/admin-token.header" \
        -H 'Content-Type: application/octet-stream' "${headers[@]}" \
        -T "$file" "$GLANCE_URL/v2/images/$id/file" || fail glance "upload of $name ($id) failed"
    status=$(curl -sf -m 30 -H @"$RUN/admin-token.header" "$GLANCE_URL/v2/images/$id" \
        | json_field status)
    [[ $status == active ]] || fail glance "image $name ($id) is $status after upload"
    echo "$id"
}

# -- fleetcache -----------------------------------------------------------------------------

cell_url() { echo "$RABBIT/${VHOST_PREFIX}_$1"; }

write_common_options() {  # [DEFAULT] lines every fleetcache daemon shares
    cat <<EOF
debug = true
use_stderr = true
report_interval = $REPORT_INTERVAL
service_down_time = $SERVICE_DOWN_TIME
EOF
}

write_fleetcache_config() {  # the API's and the conductor's config
    mkdir -p "$STACK/state"
    cat >"$CONF" <<EOF
# fleetcache API and conductor of the local stack (written by tools/stack.sh up).
[DEFAULT]
$(write_common_options)
state_path = $STACK/state
transport_url = $RABBIT/$VHOST_PREFIX

[database]
connection = sqlite:///$STACK/fleetcache.sqlite

[api]
auth_strategy = keystone
bind_host = 127.0.0.1
bind_port = $API_BACKEND_PORT
workers = 1
threads = 4
graceful_timeout = 5

# No auth options here: the API passes the caller's token on to Glance (a member sees only
# the images its project may see). The conductor's service user is in conductor.conf.
[glance]
api_servers = $GLANCE_URL

[image_source]
backend = glance

# The conductor keeps the computes' resource providers in Placement (endpoint from the catalog)
# as the service user fleetcache.
[placement]
$(service_auth_options fleetcache "$FLEETCACHE_SERVICE_PASSWORD")

$(keystone_authtoken_section fleetcache "$FLEETCACHE_SERVICE_PASSWORD")

# Quotas: Keystone's unified limits of the compute service (tools/keystone/setup_identity.py
# registers them), read as the service user fleetcache.
[quota]
driver = unified_limits

$(oslo_limit_section)

# The scheduler: the image-type request filter, and both isolation filters beside the
# extra-specs one (a test that shows AggregateImagePropertiesIsolation's leak alone drops a
# file into conductor.d).
[scheduler]
filter_hosts_by_image_type_support = true

[filter_scheduler]
enabled_filters = ComputeFilter,AggregateImagePropertiesIsolation,AggregateInstanceExtraSpecsFilter,AggregateImageStrictIsolation

# aggregate.cache_images.* notifications on the default transport (integration tests read them)
[oslo_messaging_notifications]
driver = messaging
topics = notifications

[oslo_concurrency]
lock_path = $STACK/state/locks

# The conductor's Prometheus exporter (the API reads this file too and serves none).
[metrics]
conductor_port = $METRICS_PORT
EOF
}

write_conductor_config() {  # what the conductor alone reads, after fleetcache.conf
    cat >"$CONDUCTOR_CONF" <<EOF
# fleetcache-conductor of the local stack (written by tools/stack.sh up), read after
# fleetcache.conf. A job taken over from a dead conductor, or caught up hours later, runs
# without a caller's token: the conductor looks images up as the service user fleetcache.
[glance]
$(service_auth_options fleetcache "$FLEETCACHE_SERVICE_PASSWORD")

[conductor]
# A job waiting for its window starts within a second of its opening (tests time it).
job_window_interval = 1
EOF
}

write_compute_config() {  # host cell metrics-port peer-port
    local host=$1 cell=$2 port=$3 peer_port=$4 base=$STACK/$1
    mkdir -p "$base/instances" "$base/locks"
    cat >"$ETC/$host.conf" <<EOF
# fleetcache-compute $host in $cell of the local stack (written by tools/stack.sh up).
[DEFAULT]
$(write_common_options)
host = $host
state_path = $base
instances_path = $base/instances
compute_driver = disk
transport_url = $(cell_url "$cell")

[glance]
api_servers = $GLANCE_URL
# A download may run long after the request that caused it: the compute authenticates to
# Glance as the service user fleetcache rather than with the caller's token.
$(service_auth_options fleetcache "$FLEETCACHE_SERVICE_PASSWORD")
# Images in the stack's Ceph come straight from it (rbd export through privsep) as
# client.compute, read-only on pool images; short Ceph timeouts so that a dead OSD means a
# quick fallback to HTTP.
allowed_direct_url_schemes = rbd
rbd_user = compute
rbd_ceph_conf = $CEPH_DIR/ceph.conf
rbd_keyring = $CEPH_DIR/ceph.client.compute.keyring
rbd_connect_timeout = 5
rbd_osd_op_timeout = 10
rbd_export_timeout = 300

[image_source]
backend = glance

[oslo_concurrency]
lock_path = $base/locks

[metrics]
compute_port = $port

[image_cache]
# Each compute serves its cache to the hosts of its cell when a conductor with
# peer_distribution on names it as a source (the stack's conductor has it off; the peer
# tests turn it on).
peer_distribution = true
peer_listen_port = $peer_port
$(peer_tls_options "$host")
EOF
}

make_peer_certs() {  # with FLEETCACHE_STACK_PEER_TLS=1: a CA and each compute's certificate
    [[ $PEER_TLS == 1 ]] || return 0
    local dir=$STACK/peer-tls entry host my_ip
    # The address a compute's image server listens on and registers: its my_ip, which the
    # stack leaves to its default (fleetcache.common.config.default).
    my_ip=$("$VENV_BIN/python" -c 'from oslo_utils import netutils; print(netutils.get_my_ipv4())')
    rm -rf "$dir"
    mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=fleetcache stack peer CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" \
        >>"$LOG/peer-tls.log" 2>&1 || fail peer-tls "openssl could not make the peer CA"
    for entry in "${COMPUTES[@]}"; do
        host=${entry%%:*}
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$host" \
            -keyout "$dir/$host.key" -out "$dir/$host.csr" >>"$LOG/peer-tls.log" 2>&1 \
            && openssl x509 -req -in "$dir/$host.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
                -CAcreateserial -days 30 -out "$dir/$host.crt" -extfile <(printf \
                'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$my_ip") \
                >>"$LOG/peer-tls.log" 2>&1 \
            || fail peer-tls "openssl could not make $host's peer certificate"
    done
    log "peer TLS: CA and certificates for $my_ip in $dir"
}

peer_tls_options() {  # host: its [image_cache] peer_ssl_* lines (none without peer TLS)
    [[ $PEER_TLS == 1 ]] || return 0
    local dir=$STACK/peer-tls
    printf 'peer_ssl_cert_file = %s\npeer_ssl_key_file = %s\npeer_ssl_ca_file = %s\n' \
        "$dir/$1.crt" "$dir/$1.key" "$dir/ca.crt"
}

manage() {  # fleetcache-manage on the stack's config, output to its log
    echo "+ fleetcache-manage $*" >>"$LOG/manage.log"
    "$VENV_BIN/fleetcache-manage" --config-file "$CONF" "$@" >>"$LOG/manage.log" 2>&1
}

setup_database() {
    manage db sync || fail manage "fleetcache-manage db sync failed"
    local cell
    for cell in "${CELLS[@]}"; do
        manage cell create --name "$cell" --transport-url "$(cell_url "$cell")" \
            || fail manage "fleetcache-manage cell create $cell failed"
    done
}

start_fleetcache() {
    local entry host
    # conductor.d: options a test drops in (e.g. precache_concurrency) before restarting it.
    mkdir -p "$ETC/conductor.d"
    start_daemon conductor "$VENV_BIN/fleetcache-conductor" --config-file "$CONF" \
        --config-file "$CONDUCTOR_CONF" --config-dir "$ETC/conductor.d"
    # NOTE: a compute's registration sent before the conductor listens on its cell's broker
    # is lost and waits out rpc_response_timeout; the conductor registers itself once it does.
    wait_services fleetcache-conductor "*:*"
    for entry in "${COMPUTES[@]}"; do
        host=${entry%%:*}
        # $host.d: options a test drops in (e.g. another Ceph user) before restarting it.
        mkdir -p "$ETC/$host.d"
        start_daemon "$host" "$VENV_BIN/fleetcache-compute" --config-file "$ETC/$host.conf" \
            --config-dir "$ETC/$host.d"
    done
    start_daemon api "$VENV_BIN/fleetcache-api" --config-file "$CONF"
    start_daemon api-front "$NGINX" -c "$ETC/api-front.conf" -p "$STACK/api-front/"
}

write_api_front_config() {  # nginx before the API: etc/nginx/fleetcache-api.conf, ports set
    local site=$ETC/api-front-site.conf
    mkdir -p "$STACK/api-front"
    sed -e "s/^\( *listen \)8774;/\1127.0.0.1:$API_PORT;/" \
        -e "s/^\( *server \)127\.0\.0\.1:18774;/\1127.0.0.1:$API_BACKEND_PORT;/" \
        "$ROOT/etc/nginx/fleetcache-api.conf" >"$site"
    grep -q "listen 127.0.0.1:$API_PORT;" "$site" \
        && grep -q "server 127.0.0.1:$API_BACKEND_PORT;" "$site" \
        || fail api-front "etc/nginx/fleetcache-api.conf: no 'listen 8774;' or upstream line"
    # Workers run as the user who runs the stack, as every other daemon here: the temporary
    # files are under .stack, which only that user may enter (umask 077).
    cat >"$ETC/api-front.conf" <<EOF
# nginx in front of the stack's fleetcache-api (written by tools/stack.sh up).
daemon off;
user $(id -un) $(id -gn);
worker_processes 1;
pid $RUN/api-front.nginx.pid;
error_log $LOG/api-front.log notice;
events {
    worker_connections 1024;
}
http {
    access_log $LOG/api-front-access.log;
    client_body_temp_path $STACK/api-front/client_body;
    proxy_temp_path $STACK/api-front/proxy;
    fastcgi_temp_path $STACK/api-front/fastcgi;
    uwsgi_temp_path $STACK/api-front/uwsgi;
    scgi_temp_path $STACK/api-front/scgi;
    include $site;
}
EOF
    "$NGINX" -t -q -c "$ETC/api-front.conf" -p "$STACK/api-front/" >>"$LOG/api-front.log" 2>&1 \
        || fail api-front "nginx -t refused $ETC/api-front.conf"
}

services_not_up() {  # binary host:cell... -> those not up in `fleetcache-manage service list`
    local listing
    listing=$("$VENV_BIN/fleetcache-manage" --config-file "$CONF" service list 2>/dev/null) || true
    "$VENV_BIN/python" -c '
import sys
binary, want = sys.argv[1], dict(arg.split(":") for arg in sys.argv[2:])
for line in sys.stdin:  # | Host | Binary | Cell | State | Status | ...
    fields = [f.strip() for f in line.strip().strip("|").split("|")]
    if len(fields) >= 4 and fields[1] == binary and fields[3] == "up":
        host = fields[0] if fields[0] in want else "*"
        if want.get(host) in (fields[2], "*"):
            del want[host]
print(" ".join(sorted(want)))
' "$@" <<<"$listing"
}

wait_services() {  # binary host:cell... ; until each is up (host "*" = any host, cell "*" = any)
    local binary=$1 missing deadline=$((SECONDS + WAIT)) name names
    shift
    while :; do
        missing=$(services_not_up "$binary" "$@")
        [[ -z $missing ]] && return 0
        read -ra names <<<"$missing"
        for name in conductor "${names[@]}"; do
            [[ $name == "*" ]] && continue
            daemon_pid "$name" >/dev/null || fail "$name" "exited before it was up"
        done
        if ((SECONDS >= deadline)); then
            name=${missing%% *}
            [[ $name == "*" ]] && name=conductor
            fail "$name" "$binary not up in fleetcache-manage service list after ${WAIT}s"
        fi
        sleep 0.5
    done
}

wait_in_placement() {  # until `fleetcache-manage status` finds every up compute in Placement
    local deadline=$((SECONDS + WAIT))
    until manage status; do
        ((SECONDS < deadline)) \
            || fail conductor "computes not in Placement after ${WAIT}s (fleetcache-manage status)"
        sleep 0.5
    done
}

write_env() {  # rbd-image-id file-image-ids...
    local rbd=$1
    shift
    local computes=() metrics=() entry host n=0
    for entry in "${COMPUTES[@]}"; do
        host=${entry%%:*}
        n=$((n + 1))
        computes+=("$host:$STACK/$host/instances")
        metrics+=("$host=http://127.0.0.1:$((METRICS_PORT + n))/metrics")
    done
    write_identity_env >"$STACK/env"
    cat >>"$STACK/env" <<EOF
export FLEETCACHE_API_URL=$API_URL/v2.1
export FLEETCACHE_API_BACKEND_URL=$API_BACKEND_URL/v2.1
export FLEETCACHE_GLANCE_URL=$GLANCE_URL
export FLEETCACHE_CONF=$CONF
export FLEETCACHE_CONDUCTOR_CONF=$CONDUCTOR_CONF
export FLEETCACHE_COMPUTES="${computes[*]}"
export FLEETCACHE_METRICS_CONDUCTOR=http://127.0.0.1:$METRICS_PORT/metrics
export FLEETCACHE_METRICS_COMPUTES="${metrics[*]}"
export FLEETCACHE_SAMPLE_IMAGES="$*"
export FLEETCACHE_STACK_DIR=$STACK
export FLEETCACHE_GLANCE_ACCESS_LOG=$GLANCE_ACCESS_LOG
export FLEETCACHE_GLANCE_RBD_STORE=$GLANCE_RBD_STORE
export FLEETCACHE_RBD_SAMPLE_IMAGE=$rbd
export FLEETCACHE_PLACEMENT_URL=$PLACEMENT_URL
export FLEETCACHE_KEYSTONE_URL=$KEYSTONE_URL
EOF
    # `source .stack/placement-env`, then the unmodified `openstack resource provider ...`
    # (osc-placement): the admin, Placement's endpoint from the catalog.
    write_identity_env >"$STACK/placement-env"
    # FLEETCACHE_CEPH_CONF, FLEETCACHE_CEPH_FSID, FLEETCACHE_CEPH_KEYRING_<USER>
    cat "$CEPH_DIR/env" >>"$STACK/env"
}

# -- Ceph -----------------------------------------------------------------------------------

ceph_sh() {  # tools/ceph.sh on this stack's directory, without the stack lock (fd 9): the
    # daemons it starts outlive it and must not hold the lock
    FLEETCACHE_STACK_DIR=$STACK "$CEPH_SH" "$@" 9>&-
}

start_ceph() {  # in the background during `up`, output in $LOG/ceph.log
    ceph_sh up >"$LOG/ceph.log" 2>&1
}

wait_ceph_started() {
    wait "$CEPH_START_PID" \
        || { CEPH_START_PID=; fail ceph "tools/ceph.sh up failed: $(cause_line ceph)"; }
    CEPH_START_PID=
    log "$(tail -n 1 "$LOG/ceph.log")"
}

check_rbd_image() {  # id: Glance stored it in Ceph (direct_url rbd://<fsid>/images/<id>/snap)
    local url
    url=$(curl -sf -m 30 -H @"$RUN/admin-token.header" "$GLANCE_URL/v2/images/$1" \
        | json_field direct_url)
    [[ $url == rbd://*/images/$1/snap ]] \
        || fail glance "image $1 uploaded to store $GLANCE_RBD_STORE has direct_url $url"
}

# -- commands -------------------------------------------------------------------------------

check_prerequisites() {
    local port tool vhosts vh
    for tool in curl qemu-img setsid "$NGINX" "$VENV_BIN/fleetcache-api"; do
        command -v "$tool" >/dev/null \
            || fail prerequisites "$tool missing (run make venv / tools/install-debian-deps.sh)"
    done
    for port in $GLANCE_PORT $API_PORT $API_BACKEND_PORT $PLACEMENT_PORT $KEYSTONE_PORT $(seq "$METRICS_PORT" \
            $((METRICS_PORT + ${#COMPUTES[@]}))); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            fail prerequisites "port $port is already taken by another process"
        fi
    done
    "${PSQL[@]}" -d postgres -c 'SELECT 1' >/dev/null 2>&1 \
        || fail prerequisites "PostgreSQL (127.0.0.1:5432, user postgres) does not answer"
    vhosts=$(rabbitmqctl -q list_vhosts name 2>&1) \
        || fail prerequisites "RabbitMQ does not answer: $vhosts"
    for vh in "$VHOST_PREFIX" "${CELLS[@]/#/${VHOST_PREFIX}_}"; do
        grep -qxF "$vh" <<<"$vhosts" \
            || fail prerequisites "RabbitMQ vhost $vh missing (run tools/test-services.sh)"
    done
}

reset_state() {  # everything of a previous stack except the cached service and Tempest venvs
    local entry
    for entry in "$STACK"/* "$STACK"/.[!.]*; do
        case $entry in
        # tempest-venv: tools/tempest.sh's, built once like the services' venvs
        "$GLANCE_VENV" | "$PLACEMENT_VENV" | "$KEYSTONE_VENV" | "$STACK/tempest-venv" \
            | "$STACK/.lock") continue ;;
        esac
        [[ -e $entry ]] && rm -rf "$entry"
    done
    mkdir -p "$ETC" "$LOG" "$RUN"
}

cmd_up() {
    local qcow2 raw rbd entry
    T0=$SECONDS
    mkdir -p "$STACK" "$RUN"
    cmd_down   # pid files and strays both: a daemon that lost its pid file dies here too
    reset_state
    umask 077  # configs, env files and logs: readable by root only (passwords, tokens)
    check_prerequisites
    make_passwords
    # Keystone first (about 20 s with a cached venv): Placement, the conductor and Glance's
    # uploads need it; it is set up while the other pieces start.
    start_keystone &
    KEYSTONE_START_PID=$!
    # Ceph (about 15 s) starts while Glance and fleetcache do; Glance's rbd store connects
    # only when an image is stored or read.
    start_ceph &
    CEPH_START_PID=$!
    write_glance_config
    # Glance (with its venv: about a minute when not cached) starts while fleetcache does.
    start_glance &
    GLANCE_START_PID=$!
    # Placement before the conductor, so that the computes' registrations reach it at once.
    start_placement &
    PLACEMENT_START_PID=$!
    make_sample_images
    write_fleetcache_config
    write_api_front_config
    write_conductor_config
    make_peer_certs
    local n=0
    for entry in "${COMPUTES[@]}"; do
        n=$((n + 1))
        write_compute_config "${entry%%:*}" "${entry#*:}" $((METRICS_PORT + n)) \
            $((PEER_PORT + n))
    done
    setup_database
    wait_keystone_started
    setup_identity
    phase "Keystone up on $KEYSTONE_URL, users and catalog set up"
    wait_placement_started
    phase "Placement up on $PLACEMENT_URL"
    start_fleetcache
    phase "conductor up; computes and API starting"
    wait_glance_started
    wait_http glance "$GLANCE_URL/" 300
    admin_token_header
    qcow2=$(upload_image fleetcache-sample-qcow2 qcow2 "$STACK/samples/sample.qcow2")
    raw=$(upload_image fleetcache-sample-raw raw "$STACK/samples/sample.raw")
    phase "Glance up, sample images $qcow2 (qcow2) $raw (raw) active"
    wait_ceph_started
    rbd=$(upload_image fleetcache-sample-rbd raw "$STACK/samples/sample-rbd.raw" \
        "$GLANCE_RBD_STORE")
    check_rbd_image "$rbd"
    phase "Ceph up, sample image $rbd (raw) active in Glance's rbd store"
    wait_http api "$API_BACKEND_URL/" 200
    wait_http api-front "$API_URL/" 200
    wait_services fleetcache-compute "${COMPUTES[@]}"
    wait_in_placement
    write_env "$rbd" "$qcow2" "$raw"
    log "up in $((SECONDS - T0))s: Keystone $AUTH_URL, Glance $GLANCE_URL, API $API_URL/v2.1," \
        "Placement $PLACEMENT_URL, computes ${COMPUTES[*]}, Ceph $CEPH_DIR; source $STACK/env"
}

cmd_down() {
    local names=() strays=()
    [[ -d $RUN ]] && mapfile -t names < <(all_daemons)
    ((${#names[@]})) && stop_daemons "${names[@]}"
    # NOTE: a daemon started again (`stack.sh start`) while another `up` or `down` ran can lose
    # its pid file; it still runs this stack's config, so it is stopped here as well.
    mapfile -t strays < <(stray_daemons)
    ((${#strays[@]})) && stop_groups TERM "${strays[@]}"
    ceph_sh down
    rm -f "$STACK/env" "$STACK/placement-env" "$STACK"/env.*
    names+=("${strays[@]%%=*}")
    ((${#names[@]})) && log "stopped ${names[*]}"
    return 0
}

cmd_status() {
    local name pid entry rc=0
    for name in $(all_daemons); do
        if pid=$(daemon_pid "$name"); then
            echo "$name: running (pid $pid)"
        else
            echo "$name: NOT running (log: $LOG/$name.log)"
            rc=1
        fi
    done
    for entry in $(stray_daemons); do
        pid=${entry#*=}
        grep -qs "^$pid " "$RUN"/*.pid && continue
        echo "STRAY: pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))," \
            "no pid file; tools/stack.sh down stops it"
        rc=1
    done
    [[ -f $RUN/glance.pid ]] || { echo "stack: not up"; return 1; }
    echo "glance $GLANCE_URL/: HTTP $(http_code "$GLANCE_URL/")"
    echo "api $API_BACKEND_URL/: HTTP $(http_code "$API_BACKEND_URL/")"
    echo "api-front $API_URL/: HTTP $(http_code "$API_URL/")"
    echo "placement $PLACEMENT_URL/: HTTP $(http_code "$PLACEMENT_URL/")"
    echo "keystone $AUTH_URL: HTTP $(http_code "$AUTH_URL")"
    "$VENV_BIN/fleetcache-manage" --config-file "$CONF" service list || rc=1
    ceph_sh status || rc=1
    return "$rc"
}

lock_stack() {  # one up/down/start/stop at a time (a test restarting a compute during an `up`)
    mkdir -p "$STACK"
    exec 9>"$STACK/.lock"
    flock -w 600 9 || { echo "stack: another tools/stack.sh holds $STACK/.lock" >&2; exit 1; }
}

main() {
    [[ ${1:-} == status ]] || lock_stack
    case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    start) restart_daemon "${2:?usage: stack.sh start NAME}" ;;
    stop)
        [[ -f $RUN/${2:?usage: stack.sh stop NAME [--kill]}.pid ]] \
            || { echo "stack: $2 was not started by this stack" >&2; exit 1; }
        if [[ ${3:-} == --kill ]]; then stop_daemons --kill "$2"; else stop_daemons "$2"; fi
        ;;
    *)
        sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

main "$@"
