#!/usr/bin/env bash
# Make Debian's `rados` and `rbd` Python bindings importable in a venv.
#
#   tools/ceph-bindings.sh VENV...   link them into each venv's site-packages, then import them
#
# Why a link: the bindings are not on PyPI (no `rados`/`rbd` distribution there), and building
# them means Cython against Ceph's source tree. Debian's python3-rados and python3-rbd ship each
# binding as one self-contained extension module (rados.cpython-311-x86_64-linux-gnu.so,
# rbd.cpython-311-...), built for Debian's /usr/bin/python3 (3.11.2 on bookworm). CPython keeps
# the extension ABI within a minor version, so any CPython 3.11 (the project's pyenv 3.11.7,
# Glance's venv) loads them. Exactly those two files are linked: putting all of
# /usr/lib/python3/dist-packages on the path would let Debian's other packages shadow the
# venv's pinned ones.
#
# A venv on another minor version (3.12...) has another extension suffix; this script then
# fails naming the suffixes Debian has, and tests/unit/test_ceph_bindings.py fails too.
# Idempotent; the packages come from tools/install-debian-deps.sh.
set -euo pipefail

DIST=${CEPH_BINDINGS_DIR:-/usr/lib/python3/dist-packages}
MODULES=(rados rbd)

(($#)) || { sed -n '4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

for venv in "$@"; do
    python=$venv/bin/python
    [[ -x $python ]] || { echo "ceph-bindings: $python not found" >&2; exit 1; }
    read -r suffix site < <("$python" -c 'import sysconfig as s
print(s.get_config_var("EXT_SUFFIX"), s.get_path("platlib"))')
    for module in "${MODULES[@]}"; do
        so=$DIST/$module$suffix
        if [[ ! -f $so ]]; then
            echo "ceph-bindings: no $so for $python ($("$python" -V));" \
                "Debian has: $(cd "$DIST" && echo "$module".*.so)" \
                "(tools/install-debian-deps.sh installs them; the venv's Python must be" \
                "Debian's minor version)" >&2
            exit 1
        fi
        ln -sfn "$so" "$site/$module$suffix"
    done
    "$python" -c 'import rados, rbd' || {
        echo "ceph-bindings: $python cannot import rados and rbd after linking them" >&2
        exit 1
    }
done
