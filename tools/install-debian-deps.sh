#!/usr/bin/env bash
# Install the Debian packages the tests need, only when missing (with `venv`: only python3-venv).
#
# Fast and silent when everything is present (one `command -v` per tool, one import per Python
# module); otherwise one `apt-get update` and one `apt-get install` of exactly the missing
# packages. Idempotent.
set -euo pipefail
# Debian puts daemons (nginx) in /usr/sbin, which a non-root PATH lacks.
PATH=$PATH:/usr/sbin

# tool on PATH -> Debian package that provides it
declare -A PACKAGES=(
    [qemu-img]=qemu-utils   # real qcow2 payloads (stack sample images, image format tests)
    [curl]=curl             # readiness probes and Glance uploads in tools/stack.sh
    [setsid]=util-linux     # one process group per stack daemon
    [nginx]=nginx           # the buffering front of the stack's API (etc/nginx/fleetcache-api.conf)
    [flock]=util-linux      # one tools/stack.sh command at a time
    [psql]=postgresql-client  # tools/test-services.sh (the servers themselves must run already)
    [mysql]=mariadb-client
    # the throwaway Ceph of tools/ceph.sh (no ceph-mgr: nothing the tests use needs one)
    [ceph-mon]=ceph-mon
    [monmaptool]=ceph-base  # a dependency of ceph-mon, named so a broken install is caught
    [ceph-osd]=ceph-osd
    [ceph]=ceph-common
    [ceph-authtool]=ceph-common
    [rbd]=ceph-common
    # the browser test of the status page (Playwright drives Debian's build, never its own)
    [chromium]=chromium
    # bench/p2p.py: one network namespace per host, links shaped with tc tbf
    [ip]=iproute2
    [tc]=iproute2
)

# Python module -> Debian package. Debian builds them for its own interpreter (/usr/bin/python3,
# 3.11 on bookworm); tools/ceph-bindings.sh exposes exactly these to the project's venvs.
DEBIAN_PYTHON=/usr/bin/python3
declare -A PY_MODULES=(
    [rados]=python3-rados
    [rbd]=python3-rbd
)

# `install-debian-deps.sh venv`: only what creating the project's venv needs (`make venv`):
# Debian ships the standard library's ensurepip, without which `python3 -m venv` fails, apart.
if [[ ${1:-} == venv ]]; then
    PACKAGES=()
    PY_MODULES=([ensurepip]=python3-venv)
fi

have_module() { "$DEBIAN_PYTHON" -c "import $1" >/dev/null 2>&1; }

missing=()
for tool in "${!PACKAGES[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("${PACKAGES[$tool]}")
done
for module in "${!PY_MODULES[@]}"; do
    have_module "$module" || missing+=("${PY_MODULES[$module]}")
done
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | sed '/^$/d')
if ((${#missing[@]} == 0)); then
    exit 0
fi

sudo=()
if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "install-debian-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    }
    sudo=(sudo)
fi

echo "install-debian-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Another apt run on the machine holds the dpkg lock for a while: wait for it, do not fail.
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
    "${missing[@]}" >/dev/null

for tool in "${!PACKAGES[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "install-debian-deps: $tool still missing after installing ${PACKAGES[$tool]}" >&2
        exit 1
    }
done
for module in "${!PY_MODULES[@]}"; do
    have_module "$module" || {
        echo "install-debian-deps: $DEBIAN_PYTHON cannot import $module after installing" \
            "${PY_MODULES[$module]}" >&2
        exit 1
    }
done
