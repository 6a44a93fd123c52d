#!/usr/bin/env bash
# Integration tests on the real local stack: stack up, pytest -m integration, stack down.
#
# Exits non-zero when any piece of the stack fails to start (tools/stack.sh names it) or when
# a test fails; the stack is always stopped at the end. Extra arguments go to pytest.
#
# FLEETCACHE_TEMPEST=1 (`make test`): first, on the fresh stack, OpenStack's Tempest on the
# compute API fleetcache serves (tools/tempest.sh: tools/tempest/selection.txt minus
# exclusion.txt, pinned Tempest in its own venv); non-zero when one of its tests fails.
#
# FLEETCACHE_BENCH_SMOKE=1 (`make test`): after the tests, every benchmark once at a tiny size
# while the stack is still up (`bench/run.sh --smoke --stack-up`), so that a benchmark that no
# longer runs fails the run; non-zero when one fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${FLEETCACHE_STACK_DIR:-$ROOT/.stack}
VENV_BIN=${FLEETCACHE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

trap 'tools/stack.sh down' EXIT
t0=$SECONDS
# The tests' stack keeps a validated token 10 s (tools/keystone/stack-keystone.bash):
# tests/integration/test_keystone_policy.py waits for a revoked token to be refused.
unset FLEETCACHE_TOKEN_CACHE_TIME
tools/stack.sh up
# shellcheck disable=SC1091
source "$STACK/env"
up=$((SECONDS - t0))
status=0
if [[ ${FLEETCACHE_TEMPEST:-0} == 1 ]]; then
    t1=$SECONDS
    tools/tempest.sh || status=$?
    echo "run-integration: Tempest $((SECONDS - t1))s, status $status"
fi
t1=$SECONDS
pytest_status=0
"$VENV_BIN/pytest" -q -p no:cacheprovider --durations=20 -m integration tests/integration "$@" || pytest_status=$?
echo "run-integration: stack up ${up}s, tests $((SECONDS - t1))s, pytest status $pytest_status"
((status)) || status=$pytest_status
if [[ ${FLEETCACHE_BENCH_SMOKE:-0} == 1 ]]; then
    t2=$SECONDS
    bench_status=0
    bench/run.sh --smoke --stack-up || bench_status=$?
    echo "run-integration: benchmark smoke run $((SECONDS - t2))s, status $bench_status"
    ((status)) || status=$bench_status
fi
exit "$status"
