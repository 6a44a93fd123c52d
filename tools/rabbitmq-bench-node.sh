#!/usr/bin/env bash
# A private RabbitMQ node for the benchmarks (bench/fanout.py): port 5674, node fcbench@localhost,
# distribution port 25674, with a raised file-descriptor limit.
#
#   tools/rabbitmq-bench-node.sh start [VHOST...]   start (if not running) and create the vhosts
#   tools/rabbitmq-bench-node.sh stop               stop it (non-durable queues go with it)
#   tools/rabbitmq-bench-node.sh status             exit 0 when it answers
#   tools/rabbitmq-bench-node.sh ctl ARGS...        rabbitmqctl against this node
#   tools/rabbitmq-bench-node.sh purge              stop it and delete its data directory
#
# NOTE: the machine's shared broker (5672) runs with 1024 fds, which RabbitMQ turns into 832
# sockets; the 833rd connection hangs instead of being refused (its TCP connect times out, the
# broker logs `file descriptor limit alarm set`, and oslo.messaging retries forever).
# 1,000 fake computes need 1,000+ connections, hence the raised limit (docs/performance.md,
# "What oslo.messaging's threading RPC server costs"). The node itself is
# tools/rabbitmq-node.sh with the bench's values.
set -eu

export FCTEST_RABBIT_PORT=${FCBENCH_RABBIT_PORT:-5674}
export FCTEST_RABBIT_DIST_PORT=${FCBENCH_RABBIT_DIST_PORT:-25674}
export FCTEST_RABBIT_NODE=${FCBENCH_RABBIT_NODE:-fcbench@localhost}
export FCTEST_RABBIT_BASE=${FCBENCH_RABBIT_BASE:-/var/tmp/fcbench-rabbitmq}
export FCTEST_RABBIT_NOFILE=${FCBENCH_RABBIT_NOFILE:-20000}
export FCTEST_RABBIT_LOG_LEVEL=warning
exec "$(dirname "${BASH_SOURCE[0]}")/rabbitmq-node.sh" "$@"
