#!/bin/sh
# A private RabbitMQ node for the benchmarks (bench/fanout.py): port 5674, node fcbench@localhost,
# distribution port 25674, with a raised file-descriptor limit.
#
#   tools/rabbitmq-bench-node.sh start [VHOST...]   start (if not running) and create the vhosts
#   tools/rabbitmq-bench-node.sh stop               stop it (non-durable queues go with it)
#   tools/rabbitmq-bench-node.sh status             exit 0 when it answers
#   tools/rabbitmq-bench-node.sh ctl ARGS...        rabbitmqctl against this node
#
# NOTE: the machine's shared broker (5672) runs with 1024 fds, which RabbitMQ turns into ~830
# sockets; the 833rd connection hangs instead of being refused (research/runtime-probe.md, P2).
# 1,000 fake computes need 1,000+ connections, so this node runs the server script directly
# (not through the `su rabbitmq` wrapper, whose PAM session resets the limit) after
# `ulimit -n`. It runs as the calling user with HOME in its own directory (private Erlang
# cookie), and reads none of /etc/rabbitmq: its own env and config files live in BASE.
set -eu

PORT=${FCBENCH_RABBIT_PORT:-5674}
DIST_PORT=${FCBENCH_RABBIT_DIST_PORT:-25674}
NODE=${FCBENCH_RABBIT_NODE:-fcbench@localhost}
BASE=${FCBENCH_RABBIT_BASE:-/var/tmp/fcbench-rabbitmq}
NOFILE=${FCBENCH_RABBIT_NOFILE:-20000}
SBIN=/usr/lib/rabbitmq/bin

setup_env() {
    mkdir -p "$BASE/mnesia" "$BASE/log" "$BASE/home"
    cat >"$BASE/rabbitmq-env.conf" <<EOF
NODENAME=$NODE
EOF
    cat >"$BASE/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$PORT
loopback_users.guest = true
log.file.level = warning
EOF
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

case "${1:-}" in
start)
    shift
    setup_env
    if ! running; then
        ulimit -n "$NOFILE"
        nohup "$SBIN/rabbitmq-server" >"$BASE/log/startup.log" 2>&1 &
        i=0
        until ctl await_startup >/dev/null 2>&1; do
            i=$((i + 1))
            if [ "$i" -gt 60 ]; then
                echo "rabbitmq node $NODE did not start; see $BASE/log" >&2
                exit 1
            fi
            sleep 1
        done
    fi
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
*)
    echo "usage: $0 start [VHOST...] | stop | status | ctl ARGS..." >&2
    exit 2
    ;;
esac
