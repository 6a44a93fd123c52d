"""Debian's ``rados`` and ``rbd`` bindings must import in the project's venv.

They are not on PyPI: ``tools/ceph-bindings.sh`` links Debian's two extension modules (built for
Debian's Python 3.11) into the venv, and ``make test`` runs it. This test is the smoke alarm for
that arrangement: a venv on another Python minor version, or a machine without python3-rados /
python3-rbd, fails here by name instead of somewhere deep in the rbd code paths.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

FIX = ("run tools/install-debian-deps.sh, then tools/ceph-bindings.sh <venv> (make test does "
       "both); the venv's Python must be the minor version Debian built the bindings for")


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"cannot import {name} into {sys.executable} "
                    f"(Python {sys.version.split()[0]}): {exc}; {FIX}")


def test_rados_loads_librados() -> None:
    rados = _import("rados")
    # version() calls into librados.so: a module that imports but cannot reach the C library
    # fails here. Ceph pacific's librados reports API 3.x.
    assert rados.Rados().version().major == 3


def test_rbd_loads_librbd() -> None:
    rbd = _import("rbd")
    major, _minor, _extra = rbd.RBD().version()
    assert major == 1


@pytest.mark.parametrize("name", ["rados", "rbd"])
def test_binding_is_one_linked_extension(name: str) -> None:
    """Only the two modules come from Debian, not the rest of its dist-packages."""
    module = _import(name)
    path = Path(str(module.__file__))
    assert path.parent == Path(sysconfig.get_path("platlib"))
    assert path.is_symlink(), f"{path} should be the link tools/ceph-bindings.sh makes"
    assert "/usr/lib/python3/dist-packages" not in sys.path
