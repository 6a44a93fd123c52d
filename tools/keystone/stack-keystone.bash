# shellcheck shell=bash
# Keystone in the local stack: sourced by tools/stack.sh, which calls these functions from
# `up` (start_keystone, wait_keystone_started, setup_identity, write_identity_env) and uses
# keystone_authtoken_section / service_auth_options in the configs it writes.
#
# - Keystone 30.0.0 in its own venv (.stack/keystone-venv, tools/keystone/requirements.txt,
#   rebuilt only when that file's hash changes) under gunicorn on :15000
#   (tools/keystone/keystone_gunicorn.py); its database fleetcache_keystone on the machine's
#   PostgreSQL (dropped and created at each `up`); fernet tokens; `keystone-manage bootstrap`
#   makes the admin user and project, the roles (admin, manager, member, reader, service) and
#   the identity endpoints; tools/keystone/setup_identity.py the rest:
#     project admin:            user admin (admin)
#     project fleetcache-demo:  user member (member), user reader (reader)
#     project fleetcache-other: user other-member (member)   (cross-project tests)
#     project service:          users fleetcache (admin, service), glance (service),
#                               placement (service)
#   and the catalog (public and internal, region RegionOne): compute (the fleetcache API,
#   .../v2.1), image (Glance), placement; and the compute service's unified limits (quotas):
#   registered limits with Nova's names and devstack's defaults (COMPUTE_REGISTERED_LIMITS),
#   and no limit (-1) for the projects the integration tests boot anything in
#   (admin, fleetcache-demo, fleetcache-other: whole-host and 4 TiB flavors), so that only a project
#   of its own (the quota tests', Tempest's) meets the defaults.
# - Every password is random, made at `up`, and lives only in files of mode 0600: the configs
#   (umask 077 in `up`), .stack/etc/passwords and the env files:
#     .stack/env          the admin's OS_* (password auth, catalog) and the stack's FLEETCACHE_*
#     .stack/env.member, .stack/env.reader, .stack/env.other   the other users' OS_*
#   `source` any one of them and the unmodified `openstack` client works.

KEYSTONE_VENV=$STACK/keystone-venv
KEYSTONE_REQS=$ROOT/tools/keystone/requirements.txt
KEYSTONE_DIR=$STACK/keystone
KEYSTONE_PORT=${STACK_KEYSTONE_PORT:-15000}
KEYSTONE_DB=${STACK_KEYSTONE_DB:-fleetcache_keystone}
KEYSTONE_URL=http://127.0.0.1:$KEYSTONE_PORT
AUTH_URL=$KEYSTONE_URL/v3
REGION=RegionOne
PASSWORDS=$ETC/passwords
KEYSTONE_START_PID=
# Seconds keystonemiddleware trusts a token it validated before (its in-process cache; the
# default is 300): a revoked token is refused by the API and Glance within this time
# (tests/integration/test_keystone_policy.py relies on 10). FLEETCACHE_TOKEN_CACHE_TIME sets
# it otherwise: the benchmarks run with keystonemiddleware's default, since a request that
# comes after the cache's time waits for Keystone again (0.13-0.18 s on this stack's Glance
# against 0.01 s, every 10 s; measured 2026-11-29), about 5 % of a 1 GiB download.
TOKEN_CACHE_TIME=${FLEETCACHE_TOKEN_CACHE_TIME:-10}
[[ $TOKEN_CACHE_TIME =~ ^[0-9]+$ ]] \
    || { echo "stack: FLEETCACHE_TOKEN_CACHE_TIME=$TOKEN_CACHE_TIME is not a number of seconds" >&2
         exit 2; }
DEMO_PROJECT=fleetcache-demo
OTHER_PROJECT=fleetcache-other
# Every project's quota (the compute service's registered limits, Nova's resource names): the
# defaults devstack registers for Nova with unified limits.
COMPUTE_REGISTERED_LIMITS='{"servers": 10, "class:VCPU": 20, "class:MEMORY_MB": 51200,
  "class:DISK_GB": 20, "server_metadata_items": 128, "server_injected_files": 5,
  "server_injected_file_content_bytes": 10240, "server_injected_file_path_bytes": 255,
  "server_key_pairs": 100, "server_groups": 10, "server_group_members": 10}'
UNLIMITED_SERVERS='{"servers": -1, "class:VCPU": -1, "class:MEMORY_MB": -1, "class:DISK_GB": -1}'

ensure_keystone_venv() {
    ensure_service_venv Keystone "$KEYSTONE_VENV" "$KEYSTONE_REQS" "keystone 30.0.0"
}

new_password() { head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

make_passwords() {  # -> $PASSWORDS (0600: umask 077), then sourced: *_PASSWORD variables
    local name
    for name in ADMIN MEMBER READER OTHER FLEETCACHE_SERVICE GLANCE_SERVICE PLACEMENT_SERVICE; do
        echo "${name}_PASSWORD=$(new_password)"
    done >"$PASSWORDS"
    # shellcheck disable=SC1090
    source "$PASSWORDS"
}

keystone_manage() {  # keystone-manage on the stack's config, output to its log
    echo "+ keystone-manage $1" >>"$LOG/keystone-manage.log"
    "$KEYSTONE_VENV/bin/keystone-manage" --config-file "$KEYSTONE_DIR/etc/keystone.conf" "$@" \
        >>"$LOG/keystone-manage.log" 2>&1
}

start_keystone() {  # in the background during `up`: report failure by status, not through fail()
    mkdir -p "$KEYSTONE_DIR"/{etc,fernet-keys,credential-keys}
    sed -e "s#@KEYSTONE_DIR@#$KEYSTONE_DIR#g" -e "s#@LOG_DIR@#$LOG#g" \
        -e "s#@KEYSTONE_DB_URL@#postgresql+psycopg2://postgres@127.0.0.1:5432/$KEYSTONE_DB#g" \
        "$ROOT/tools/keystone/keystone.conf.in" >"$KEYSTONE_DIR/etc/keystone.conf"
    ensure_keystone_venv || return 10
    { "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $KEYSTONE_DB" \
        && "${PSQL[@]}" -d postgres -c "CREATE DATABASE $KEYSTONE_DB"; } \
        >"$LOG/keystone-db.log" 2>&1 || return 12
    keystone_manage db_sync || return 11
    keystone_manage fernet_setup --keystone-user root --keystone-group root || return 11
    keystone_manage credential_setup --keystone-user root --keystone-group root || return 11
    # The password goes through the environment (OS_BOOTSTRAP_PASSWORD), not argv.
    OS_BOOTSTRAP_PASSWORD=$ADMIN_PASSWORD keystone_manage bootstrap \
        --bootstrap-username admin --bootstrap-project-name admin \
        --bootstrap-role-name admin --bootstrap-region-id "$REGION" \
        --bootstrap-admin-url "$AUTH_URL" --bootstrap-internal-url "$AUTH_URL" \
        --bootstrap-public-url "$AUTH_URL" || return 11
    start_daemon keystone env OS_KEYSTONE_CONFIG_DIR="$KEYSTONE_DIR/etc" \
        "$KEYSTONE_VENV/bin/gunicorn" --bind "127.0.0.1:$KEYSTONE_PORT" --workers 1 \
        --threads 8 --graceful-timeout 5 --access-logfile "$LOG/keystone-access.log" \
        --pythonpath "$ROOT/tools/keystone" keystone_gunicorn:application
}

wait_keystone_started() {
    local status=0
    wait "$KEYSTONE_START_PID" || status=$?
    KEYSTONE_START_PID=
    case $status in
    0) ;;
    10) fail keystone-venv "pip install -r $KEYSTONE_REQS failed" ;;
    11) fail keystone-manage "keystone-manage failed" ;;
    12) fail keystone-db "cannot create PostgreSQL database $KEYSTONE_DB" ;;
    *) fail keystone "could not start (status $status)" ;;
    esac
    wait_http keystone "$AUTH_URL" 200
}

identity_user() {  # name password project roles...: one user of setup_identity's spec
    local name=$1 password=$2 project=$3 roles
    shift 3
    roles=$(printf '"%s",' "$@")
    printf '{"name": "%s", "password": "%s", "project": "%s", "roles": [%s]}' \
        "$name" "$password" "$project" "${roles%,}"
}

setup_identity() {  # projects, users, roles and the catalog (tools/keystone/setup_identity.py)
    "$VENV_BIN/python" "$ROOT/tools/keystone/setup_identity.py" >>"$LOG/keystone-setup.log" 2>&1 \
        <<EOF || fail keystone-setup "tools/keystone/setup_identity.py failed"
{"auth_url": "$AUTH_URL", "admin_password": "$ADMIN_PASSWORD", "region": "$REGION",
 "projects": ["$DEMO_PROJECT", "$OTHER_PROJECT", "service"],
 "users": [$(identity_user member "$MEMBER_PASSWORD" "$DEMO_PROJECT" member),
           $(identity_user reader "$READER_PASSWORD" "$DEMO_PROJECT" reader),
           $(identity_user other-member "$OTHER_PASSWORD" "$OTHER_PROJECT" member),
           $(identity_user fleetcache "$FLEETCACHE_SERVICE_PASSWORD" service admin service),
           $(identity_user glance "$GLANCE_SERVICE_PASSWORD" service service),
           $(identity_user placement "$PLACEMENT_SERVICE_PASSWORD" service service)],
 "services": [{"type": "compute", "name": "fleetcache", "url": "$API_URL/v2.1"},
              {"type": "image", "name": "glance", "url": "$GLANCE_URL"},
              {"type": "placement", "name": "placement", "url": "$PLACEMENT_URL"}],
 "limits": {"service": "compute", "registered": $COMPUTE_REGISTERED_LIMITS,
            "projects": {"admin": $UNLIMITED_SERVERS, "$DEMO_PROJECT": $UNLIMITED_SERVERS,
                         "$OTHER_PROJECT": $UNLIMITED_SERVERS}}}
EOF
}

oslo_limit_section() {  # [oslo_limit] of the API: Keystone's limits of the compute endpoint
    cat <<EOF
[oslo_limit]
$(service_auth_options fleetcache "$FLEETCACHE_SERVICE_PASSWORD")
endpoint_service_type = compute
endpoint_region_name = $REGION
endpoint_interface = public
# Seconds one attempt of a Keystone call may take: with connect_retries 2 (the default) a hung
# Keystone costs a server create a 503 after 3 x 10 + 1.5 s, not a thread.
timeout = 10
EOF
}

service_auth_options() {  # user password: keystoneauth password options (a service user)
    cat <<EOF
auth_type = password
auth_url = $AUTH_URL
username = $1
password = $2
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = $REGION
EOF
}

keystone_authtoken_section() {  # user password: [keystone_authtoken] of a service
    cat <<EOF
[keystone_authtoken]
www_authenticate_uri = $KEYSTONE_URL
$(service_auth_options "$1" "$2")
token_cache_time = $TOKEN_CACHE_TIME
EOF
}

os_env() {  # user password project: the OS_* lines of one user (password auth, catalog)
    cat <<EOF
export OS_AUTH_TYPE=password
export OS_AUTH_URL=$AUTH_URL
export OS_IDENTITY_API_VERSION=3
export OS_USERNAME=$1
export OS_PASSWORD=$2
export OS_PROJECT_NAME=$3
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=$REGION
export OS_INTERFACE=public
EOF
}

write_identity_env() {  # .stack/env's OS_* lines on stdout; .stack/env.{member,reader,other}
    os_env member "$MEMBER_PASSWORD" "$DEMO_PROJECT" >"$STACK/env.member"
    os_env reader "$READER_PASSWORD" "$DEMO_PROJECT" >"$STACK/env.reader"
    os_env other-member "$OTHER_PASSWORD" "$OTHER_PROJECT" >"$STACK/env.other"
    os_env admin "$ADMIN_PASSWORD" admin
}

admin_token_header() {  # -> $RUN/admin-token.header ("X-Auth-Token: ...", 0600) for curl -H @
    local headers
    headers=$(curl -sf -m 30 -D - -o /dev/null -H 'Content-Type: application/json' -d @- \
        "$AUTH_URL/auth/tokens" <<EOF
{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin",
  "domain": {"id": "default"}, "password": "$ADMIN_PASSWORD"}}},
  "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}
EOF
    ) || fail keystone "cannot get a token for admin"
    headers=$(grep -i '^x-subject-token:' <<<"$headers" | tr -d '\r')
    [[ -n $headers ]] || fail keystone "no X-Subject-Token in Keystone's answer"
    echo "X-Auth-Token: ${headers#*: }" >"$RUN/admin-token.header"
}
