#!/usr/bin/env bash
# Install the Debian packages the tests need, only when missing.
#
# Fast and silent when everything is present (one `command -v` per tool); otherwise one
# `apt-get update` and one `apt-get install` of exactly the missing packages. Idempotent.
set -euo pipefail

# tool on PATH -> Debian package that provides it
declare -A PACKAGES=(
    [qemu-img]=qemu-utils   # real qcow2 payloads (stack sample images, image format tests)
    [curl]=curl             # readiness probes and Glance uploads in tools/stack.sh
    [setsid]=util-linux     # one process group per stack daemon
    [flock]=util-linux      # one tools/stack.sh command at a time
    [psql]=postgresql-client  # tools/test-services.sh (the servers themselves must run already)
    [mysql]=mariadb-client
)

missing=()
for tool in "${!PACKAGES[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("${PACKAGES[$tool]}")
done
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
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

for tool in "${!PACKAGES[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "install-debian-deps: $tool still missing after installing ${PACKAGES[$tool]}" >&2
        exit 1
    }
done
