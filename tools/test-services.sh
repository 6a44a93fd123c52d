#!/usr/bin/env bash
# Check that the machine's shared test services answer, and prepare what the tests use on them.
#
# RabbitMQ 127.0.0.1:5672 (guest/guest), PostgreSQL 127.0.0.1:5432 (user postgres, trust) and
# MariaDB 127.0.0.1:3306 (root, no password) must already run; this script never starts or
# restarts them. It fails loudly naming every service that does not answer. Then it creates,
# when missing: the RabbitMQ vhosts below with full permissions for guest, and the database
# fleetcache_test on PostgreSQL and MariaDB. Idempotent.
#
# NOTE: in a transport URL the path names the vhost without its leading slash:
# rabbit://guest:guest@127.0.0.1:5672/fleetcache_cell1 reaches vhost "fleetcache_cell1", and
# .../5672//fleetcache_cell1 reaches "/fleetcache_cell1". Both spellings are created, so either
# URL form works.
set -euo pipefail

VHOSTS=(fleetcache fleetcache_cell1 fleetcache_cell2 fctest_daemons)
TEST_DB=fleetcache_test
RABBIT_USER=guest

log() { echo "test-services: $*"; }
die() { echo "test-services: $*" >&2; exit 1; }

port_open() {  # host port
    timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

check_rabbitmq() {
    port_open 127.0.0.1 5672 || { echo "RabbitMQ: nothing listens on 127.0.0.1:5672"; return 1; }
    local out
    out=$(timeout 30 rabbitmqctl -q list_vhosts 2>&1) || {
        echo "RabbitMQ: rabbitmqctl does not answer: ${out##*$'\n'}"; return 1; }
}

check_postgresql() {
    local out
    out=$(timeout 10 psql -h 127.0.0.1 -p 5432 -U postgres -w -tAc 'SELECT 1' 2>&1) || {
        echo "PostgreSQL (127.0.0.1:5432, user postgres): $out"; return 1; }
}

check_mariadb() {
    local out
    out=$(timeout 10 mysql -h 127.0.0.1 -P 3306 -uroot -N -e 'SELECT 1' 2>&1) || {
        echo "MariaDB (127.0.0.1:3306, user root): $out"; return 1; }
}

check_all() {
    local failures=() name msg
    for name in rabbitmq postgresql mariadb; do
        msg=$("check_$name") || failures+=("$msg")
    done
    if ((${#failures[@]})); then
        printf 'test-services: NOT ANSWERING: %s\n' "${failures[@]}" >&2
        exit 1
    fi
}

ensure_vhosts() {
    local existing vhost
    existing=$(rabbitmqctl -q list_vhosts name | tail -n +2)
    for vhost in "${VHOSTS[@]}" "${VHOSTS[@]/#//}"; do
        if ! grep -qxF -- "$vhost" <<<"$existing"; then
            rabbitmqctl -q add_vhost "$vhost" >/dev/null || die "cannot create vhost $vhost"
            log "created vhost $vhost"
        fi
        rabbitmqctl -q set_permissions -p "$vhost" "$RABBIT_USER" '.*' '.*' '.*' >/dev/null \
            || die "cannot grant $RABBIT_USER on vhost $vhost"
    done
}

ensure_databases() {
    local found
    found=$(psql -h 127.0.0.1 -U postgres -w -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$TEST_DB'")
    if [[ $found != 1 ]]; then
        psql -h 127.0.0.1 -U postgres -w -qc "CREATE DATABASE $TEST_DB" \
            || die "cannot create PostgreSQL database $TEST_DB"
        log "created PostgreSQL database $TEST_DB"
    fi
    mysql -h 127.0.0.1 -uroot -e \
        "CREATE DATABASE IF NOT EXISTS $TEST_DB CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci" \
        || die "cannot create MariaDB database $TEST_DB"
}

check_all
ensure_vhosts
ensure_databases
log "RabbitMQ, PostgreSQL and MariaDB answer; vhosts ${VHOSTS[*]} and databases $TEST_DB ready"
