#!/bin/sh
# A private RabbitMQ node that tests may stop and start at will (broker-restart tests):
# port 5673, node fctest@localhost, distribution port 25673. Never touches the machine's
# shared node (rabbit@localhost on 5672); only epmd (4369) is shared, which is fine.
#
#   tools/rabbitmq-node.sh start [VHOST...]   start (if not running), create the vhosts with
#                                             full permissions for guest, print the base URL
#   tools/rabbitmq-node.sh stop               stop it; its data directory stays, so vhosts,
#                                             users and permissions survive a restart
#   tools/rabbitmq-node.sh status             exit 0 when it answers
#   tools/rabbitmq-node.sh ctl ARGS...        rabbitmqctl against this node
#   tools/rabbitmq-node.sh purge              stop it and delete its data directory
#
# Everything lives in FCTEST_RABBIT_BASE (default ${TMPDIR:-/tmp}/fctest-rabbitmq): mnesia,
# logs, its own env and config files (none of /etc/rabbitmq is read) and HOME, hence a private
# Erlang cookie. It runs as the calling user, which also means its file-descriptor limit is
# the caller's (not the `su rabbitmq` wrapper's PAM-reset 1024): FCTEST_RABBIT_NOFILE raises
# it before the server starts (with 1024 fds RabbitMQ allows 832 sockets, and the 833rd
# connection hangs instead of being refused; seen with Debian 12's RabbitMQ 3.10.8). Every FCTEST_RABBIT_* variable
# below may be set by a caller; tools/rabbitmq-bench-node.sh is this script with other values.
set -eu

PORT=${FCTEST_RABBIT_PORT:-5673}
DIST_PORT=${FCTEST_RABBIT_DIST_PORT:-25673}
NODE=${FCTEST_RABBIT_NODE:-fctest@localhost}
BASE=${FCTEST_RABBIT_BASE:-${TMPDIR:-/tmp}/fctest-rabbitmq}
START_TIMEOUT=${FCTEST_RABBIT_START_TIMEOUT:-90}
NOFILE=${FCTEST_RABBIT_NOFILE:-}
LOG_LEVEL=${FCTEST_RABBIT_LOG_LEVEL:-info}
SBIN=/usr/lib/rabbitmq/bin

setup_env() {
    mkdir -p "$BASE/mnesia" "$BASE/log" "$BASE/home"
    printf 'NODENAME=%s\n' "$NODE" >"$BASE/rabbitmq-env.conf"
    cat >"$BASE/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$PORT
loopback_users.guest = true
log.file.level = $LOG_LEVEL
CONF
    echo '[].' >"$BASE/enabled_plugins"
    export HOME="$BASE/home"
    export RABBITMQ_NODENAME="$NODE"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$PORT"
    export RABBITMQ_DIST_PORT="$DIST_PORT"
    export RABBITMQ_CONF_ENV_FILE="$BASE/rabbitmq-env.conf"
    export RABBITMQ_CONFIG_FILE="$BASE/rabbitmq.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$BASE/enabled_plugins"
    export RABBITMQ_MNESIA_BASE="$BASE/mnesia"
    export RABBITMQ_LOG_BASE="$BASE/log"
    export RABBITMQ_PID_FILE="$BASE/node.pid"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

ctl() {
    "$SBIN/rabbitmqctl" -n "$NODE" "$@"
}

running() {
    ctl status >/dev/null 2>&1
}

start() {
    if running; then
        return 0
    fi
    if [ -n "$NOFILE" ]; then
        ulimit -n "$NOFILE"
    fi
    nohup "$SBIN/rabbitmq-server" >>"$BASE/log/startup.log" 2>&1 &
    deadline=$(($(date +%s) + START_TIMEOUT))
    until ctl await_startup >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "rabbitmq-node: $NODE did not start within ${START_TIMEOUT}s; see $BASE/log" >&2
            tail -n 20 "$BASE/log/startup.log" >&2 || true
            exit 1
        fi
        sleep 1
    done
}

case "${1:-}" in
start)
    shift
    setup_env
    start
    for vhost in "$@"; do
        ctl add_vhost "$vhost" >/dev/null 2>&1 || true
        ctl set_permissions -p "$vhost" guest '.*' '.*' '.*' >/dev/null
    done
    echo "rabbit://guest:guest@127.0.0.1:$PORT/"
    ;;
stop)
    setup_env
    if running; then
        ctl stop "$RABBITMQ_PID_FILE" >/dev/null
    fi
    ;;
status)
    setup_env
    running
    ;;
ctl)
    shift
    setup_env
    ctl "$@"
    ;;
purge)
    setup_env
    if running; then
        ctl stop "$RABBITMQ_PID_FILE" >/dev/null
    fi
    rm -rf "$BASE"
    ;;
*)
    echo "usage: $0 start [VHOST...] | stop | status | ctl ARGS... | purge" >&2
    exit 2
    ;;
esac
