#!/usr/bin/env bash
# Integration tests on the real local stack: stack up, pytest -m integration, stack down.
#
# Exits non-zero when any piece of the stack fails to start (tools/stack.sh names it) or when
# a test fails; the stack is always stopped at the end. Extra arguments go to pytest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${FLEETCACHE_STACK_DIR:-$ROOT/.stack}
VENV_BIN=${FLEETCACHE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

trap 'tools/stack.sh down' EXIT
t0=$SECONDS
tools/stack.sh up
# shellcheck disable=SC1091
source "$STACK/env"
t1=$SECONDS
status=0
"$VENV_BIN/pytest" -q -p no:cacheprovider -m integration tests/integration "$@" || status=$?
echo "run-integration: stack up $((t1 - t0))s, tests $((SECONDS - t1))s, pytest status $status"
exit "$status"
