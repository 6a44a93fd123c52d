#!/usr/bin/env bash
# A throwaway single-node Ceph (pacific, Debian's packages) for the tests: one mon, one OSD
# (BlueStore on a sparse file), no mgr, cephx, 127.0.0.1 only, no systemd.
#
#   tools/ceph.sh up       create and start it (reuses a healthy running one, says so)
#   tools/ceph.sh down     stop exactly the daemons `up` started (pid files), delete its directory
#   tools/ceph.sh status   what runs, and whether the mon answers (exit 1 when not up)
#   tools/ceph.sh env      the `export` lines a client needs (also in <dir>/env)
#
# Everything lives in $FLEETCACHE_STACK_DIR/ceph (default <repo>/.stack/ceph): ceph.conf, every
# keyring (mode 0600), the mon store, the OSD's block file, pid files, admin sockets, logs.
# Nothing is written under /etc/ceph, /var/lib/ceph or /var/log/ceph: the daemons get
# `--conf <dir>/ceph.conf`, which points every path of theirs into the directory.
#
# Ports (127.0.0.1): mon msgr2 on STACK_CEPH_MON_PORT (13390) and msgr1 on STACK_CEPH_MON_V1_PORT
# (16790); the OSD binds its 8 ports (public, cluster, two heartbeats; v1 and v2 each) in
# STACK_CEPH_OSD_PORTS (16800-16831) instead of Ceph's shared default range 6800-7300.
#
# Pools, users (keyring <dir>/ceph.client.<user>.keyring, found through the conf):
#   images     rbd; Glance's store   client.glance     profile rbd pool=images
#                                    client.compute    profile rbd-read-only pool=images
#   instances  rbd; instance disks   client.instances  profile rbd pool=instances,
#                                                      profile rbd-read-only pool=images
# client.admin (all caps) is what this script and tests use to set things up.
#
# `up` fails naming the daemon or step that did not work, with the tail of its log, and stops
# what it had started (the logs stay in <dir>/log until `down`). Takes about 10-15 s.
set -euo pipefail
umask 077   # keyrings and the conf carry secrets: 0600 from creation

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${FLEETCACHE_STACK_DIR:-$ROOT/.stack}
D=$STACK/ceph
CONF=$D/ceph.conf
MON_PORT=${STACK_CEPH_MON_PORT:-13390}
MON_V1_PORT=${STACK_CEPH_MON_V1_PORT:-16790}
OSD_PORTS=${STACK_CEPH_OSD_PORTS:-16800-16831}
WAIT=${STACK_CEPH_WAIT:-120}   # seconds the mon, then the OSD, may take to come up
DAEMONS=(osd.0 mon.a)          # stop order
# Pool -> PGs. One OSD holds everything; 8 PGs each keep the OSD's per-PG overhead small.
POOLS=(images instances)
PGS=8

T0=$EPOCHREALTIME
log() { echo "ceph: $*"; }
elapsed() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
phase() { log "[$(elapsed)s] $*"; }

# The admin CLI on this cluster. --connect-timeout: a dead mon fails in seconds, not 300.
admin() { ceph --conf "$CONF" --name client.admin --connect-timeout 10 "$@"; }

# -- daemons --------------------------------------------------------------------------------

daemon_log() { echo "$D/log/ceph-$1.log"; }
pid_file() { echo "$D/run/ceph-$1.pid"; }

# Is daemon NAME (mon.a, osd.0) of THIS cluster running? Echoes its pid. The pid must be a
# ceph-<type> started with this cluster's conf, so a reused pid or another cluster's daemon
# (other tests run their own) is never taken for ours.
daemon_pid() {
    local name=$1 pid cmdline
    [[ -f $(pid_file "$name") ]] || return 1
    read -r pid <"$(pid_file "$name")" || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    { cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline"); } 2>/dev/null || return 1
    [[ $cmdline == *"ceph-${name%%.*} "* && $cmdline == *" --conf $CONF "* ]] || return 1
    echo "$pid"
}

# Daemons of this cluster whatever their pid files say: ceph-mon/ceph-osd with our conf.
own_daemons() {
    local dir cmdline daemon='^([^ ]*/)?ceph-(mon|osd) '
    for dir in /proc/[0-9]*; do
        { cmdline=$(tr '\0' ' ' <"$dir/cmdline"); } 2>/dev/null || continue
        [[ $cmdline =~ $daemon && $cmdline == *" --conf $CONF "* ]] && echo "${dir#/proc/}"
    done
    return 0
}

start_daemon() {  # type id: the daemon forks into the background and writes its pid file
    local type=$1 id=$2
    # stdio to the directory's log: the daemon must not keep a caller's pipe or log open
    "ceph-$type" --conf "$CONF" -i "$id" >>"$D/log/ceph-$type.$id.start.log" 2>&1 </dev/null \
        || fail "$type.$id" "ceph-$type -i $id exited $?"
}

stop_pids() {  # pid...: TERM, wait up to 10 s, then KILL
    local pid i
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid did not stop within 10s: SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
}

stop_all() {  # every daemon of this cluster; echoes what it stopped
    local name pid pids=() stopped=()
    for name in "${DAEMONS[@]}"; do
        if pid=$(daemon_pid "$name"); then pids+=("$pid"); stopped+=("$name($pid)"); fi
    done
    # a daemon whose pid file is gone (killed mid-start) still carries our conf
    for pid in $(own_daemons); do
        [[ " ${pids[*]} " == *" $pid "* ]] || { pids+=("$pid"); stopped+=("stray($pid)"); }
    done
    ((${#pids[@]})) && stop_pids "${pids[@]}"
    echo "${stopped[*]}"
}

fail() {  # what message: report with the tail of what's logs, stop what runs, exit 1
    local what=$1 f stopped
    shift
    echo "ceph: FAILED: $what: $*" >&2
    for f in "$D/log/ceph-$what.log" "$D/log/ceph-$what".*.log "$D/log/$what".log; do
        [[ -s $f ]] || continue
        echo "----- last lines of $f -----" >&2
        tail -n 20 "$f" >&2
    done
    stopped=$(stop_all)
    [[ -n $stopped ]] && echo "ceph: stopped $stopped; logs kept in $D/log" >&2
    exit 1
}

# -- up -------------------------------------------------------------------------------------

write_conf() {  # fsid
    cat >"$CONF" <<EOF
# Throwaway single-node Ceph of fleetcache's tests (written by tools/ceph.sh up).
[global]
fsid = $1
mon_host = [v2:127.0.0.1:$MON_PORT,v1:127.0.0.1:$MON_V1_PORT]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
# clients find ceph.client.<user>.keyring here, so --id <user> is enough
keyring = $D/\$cluster.\$name.keyring
run_dir = $D/run
crash_dir = $D/crash
# one OSD: no replication, no PG autoscaler (that lives in the mgr, which is not run)
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = $PGS
osd_pool_default_pgp_num = $PGS
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_allow_pool_delete = true

# Daemon-only paths: with admin_socket/log_file in [global], every CLI and librados client
# shares one socket and log and warns about it.
[mon]
mon_data = $D/mon/\$cluster-\$id
keyring = $D/mon/\$cluster-\$id/keyring
admin_socket = $D/run/\$cluster-\$name.asok
pid_file = $D/run/\$cluster-\$name.pid
log_file = $D/log/\$cluster-\$name.log
mon_cluster_log_file = $D/log/\$cluster.log
# the machine's disk is shared: do not stop the mon because it is fuller than 30 %/5 %
mon_data_avail_warn = 2
mon_data_avail_crit = 1
# RBD clone format 2 (mimic and later): a clone attaches to its parent through the rbd class
# (child_attach), which "profile rbd-read-only" grants, instead of writing the parent pool's
# rbd_children object, which it does not. client.instances clones Glance's snapshots with it.
mon_osd_initial_require_min_compat_client = mimic

[osd]
osd_data = $D/osd/\$cluster-\$id
keyring = $D/osd/\$cluster-\$id/keyring
admin_socket = $D/run/\$cluster-\$name.asok
pid_file = $D/run/\$cluster-\$name.pid
log_file = $D/log/\$cluster-\$name.log
ms_bind_port_min = ${OSD_PORTS%-*}
ms_bind_port_max = ${OSD_PORTS#*-}
osd_objectstore = bluestore
# BlueStore creates "block" in osd_data as a sparse regular file of this size (setting
# bluestore_block_path to osd_data/block instead makes it a symlink to itself: mkfs fails with
# ELOOP). It needs O_DIRECT, so not tmpfs.
bluestore_block_create = true
bluestore_block_size = 10737418240
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_cache_autotune = false
bluestore_cache_size = 268435456
osd_memory_target = 1073741824

[client]
# a client of a dead cluster gives up after 30 s instead of the default 300 s
client_mount_timeout = 30
EOF
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

check_prerequisites() {
    local tool port
    for tool in ceph ceph-mon ceph-osd ceph-authtool monmaptool; do
        command -v "$tool" >/dev/null || fail prerequisites \
            "$tool missing (tools/install-debian-deps.sh installs it)"
    done
    for port in "$MON_PORT" "$MON_V1_PORT"; do
        port_taken "$port" && fail prerequisites "port $port is already taken by another process"
    done
    return 0
}

running() {  # every daemon runs and the mon answers
    local name
    for name in "${DAEMONS[@]}"; do daemon_pid "$name" >/dev/null || return 1; done
    admin health >/dev/null 2>&1
}

start_mon() {  # fsid
    ceph-authtool --create-keyring "$D/mon.seed.keyring" --gen-key -n mon. \
        --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$D/ceph.client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
    ceph-authtool "$D/mon.seed.keyring" --import-keyring "$D/ceph.client.admin.keyring" >/dev/null
    monmaptool --create --fsid "$1" \
        --addv a "[v2:127.0.0.1:$MON_PORT,v1:127.0.0.1:$MON_V1_PORT]" "$D/monmap" >/dev/null
    ceph-mon --conf "$CONF" --mkfs -i a --monmap "$D/monmap" --keyring "$D/mon.seed.keyring" \
        >>"$D/log/ceph-mon.a.mkfs.log" 2>&1 || fail mon.a "ceph-mon --mkfs failed"
    rm -f "$D/mon.seed.keyring" "$D/monmap"
    start_daemon mon a
    local deadline=$((SECONDS + WAIT))
    until admin mon stat >/dev/null 2>>"$D/log/ceph-mon.a.start.log"; do
        daemon_pid mon.a >/dev/null || fail mon.a "exited before it answered"
        ((SECONDS < deadline)) || fail mon.a "not answering on 127.0.0.1:$MON_PORT after ${WAIT}s"
        sleep 0.2
    done
    phase "mon.a up on 127.0.0.1:$MON_PORT (v2), :$MON_V1_PORT (v1)"
}

start_osd() {
    local uuid key id
    uuid=$(</proc/sys/kernel/random/uuid)
    key=$(ceph-authtool --gen-print-key)
    printf '[osd.0]\n\tkey = %s\n' "$key" >"$D/osd/ceph-0/keyring"
    # `osd new` allocates the id and registers the OSD's cephx key in one mon command
    printf '{"cephx_secret": "%s"}\n' "$key" >"$D/osd.0.secrets.json"
    id=$(admin osd new "$uuid" -i "$D/osd.0.secrets.json" 2>>"$D/log/ceph-osd.0.start.log") \
        || fail osd.0 "ceph osd new failed"
    rm -f "$D/osd.0.secrets.json"
    [[ $id == 0 ]] || fail osd.0 "ceph osd new gave id $id, not 0"
    ceph-osd --conf "$CONF" -i 0 --mkfs --osd-uuid "$uuid" \
        >>"$D/log/ceph-osd.0.mkfs.log" 2>&1 || fail osd.0 "ceph-osd --mkfs failed"
    start_daemon osd 0
    local deadline=$((SECONDS + WAIT))
    until admin osd dump -f json 2>/dev/null | grep -q '"up":1,"in":1'; do
        daemon_pid osd.0 >/dev/null || fail osd.0 "exited before it was up and in"
        ((SECONDS < deadline)) || fail osd.0 "not up and in after ${WAIT}s"
        sleep 0.5
    done
    phase "osd.0 up and in (BlueStore on $D/osd/ceph-0/block)"
}

create_pools_and_users() {
    local pool pids=()
    for pool in "${POOLS[@]}"; do
        admin osd pool create "$pool" "$PGS" "$PGS" >/dev/null 2>>"$D/log/pools.log" \
            || fail pools "ceph osd pool create $pool failed"
    done
    for pool in "${POOLS[@]}"; do   # about 3 s each, independent
        rbd --conf "$CONF" --id admin pool init "$pool" 2>>"$D/log/pools.log" &
        pids+=($!)
    done
    for pool in "${!pids[@]}"; do
        wait "${pids[$pool]}" || fail pools "rbd pool init ${POOLS[$pool]} failed"
    done
    user glance osd 'profile rbd pool=images'
    user compute osd 'profile rbd-read-only pool=images'
    user instances osd 'profile rbd pool=instances, profile rbd-read-only pool=images'
    phase "pools ${POOLS[*]} (rbd), users glance, compute, instances"
}

user() {  # name osd-caps: client.<name> with its keyring in the directory (0600, umask)
    admin auth get-or-create "client.$1" mon 'profile rbd' "$2" "$3" \
        -o "$D/ceph.client.$1.keyring" 2>>"$D/log/users.log" \
        || fail users "ceph auth get-or-create client.$1 failed"
}

write_env() {  # fsid
    local name
    {
        echo "export FLEETCACHE_CEPH_CONF=$CONF"
        echo "export FLEETCACHE_CEPH_FSID=$1"
        for name in admin glance compute instances; do
            echo "export FLEETCACHE_CEPH_KEYRING_${name^^}=$D/ceph.client.$name.keyring"
        done
    } >"$D/env"
}

cmd_up() {
    local fsid
    if [[ -e $CONF ]]; then
        if running; then
            log "already up in $D (fsid $(admin fsid)): reusing it; tools/ceph.sh down to renew"
            return 0
        fi
        log "$D holds a cluster that is not (fully) running: removing it"
        cmd_down
    fi
    check_prerequisites
    (umask 022 && mkdir -p "$STACK")   # only the cluster's own directory is private
    mkdir -p "$D"/{mon/ceph-a,osd/ceph-0,log,run,crash}
    fsid=$(</proc/sys/kernel/random/uuid)
    write_conf "$fsid"
    start_mon "$fsid"
    start_osd
    create_pools_and_users
    write_env "$fsid"
    log "up in $(elapsed)s: fsid $fsid, conf $CONF, mon 127.0.0.1:$MON_PORT; source $D/env"
}

cmd_down() {
    local stopped
    stopped=$(stop_all)
    rm -rf "$D"
    if [[ -n $stopped ]]; then log "stopped $stopped; removed $D"; fi
    return 0
}

cmd_status() {
    local name pid rc=0
    [[ -e $CONF ]] || { log "not up ($D has no ceph.conf)"; return 1; }
    for name in mon.a osd.0; do
        if pid=$(daemon_pid "$name"); then
            echo "$name: running (pid $pid)"
        else
            echo "$name: NOT running (log: $(daemon_log "$name"))"
            rc=1
        fi
    done
    admin -s || rc=1
    return "$rc"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cat "$D/env" ;;
*)
    sed -n '5,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
