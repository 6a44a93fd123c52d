"""The import rule of docs/architecture.md, as enforced by tools/check_imports.py."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools/check_imports.py")
assert _spec and _spec.loader
check_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_imports)


@pytest.mark.parametrize(
    ("room", "target"),
    [
        ("conductor", "fleetcache.compute.rpcapi"),
        ("api", "fleetcache.conductor.rpcapi"),
        ("compute", "fleetcache.image.glance"),
        ("cmd", "fleetcache.compute.manager"),
        ("image", "fleetcache.common.exception"),
    ],
)
def test_allowed(room: str, target: str) -> None:
    assert check_imports._violation(room, target) is None


@pytest.mark.parametrize(
    ("room", "target"),
    [
        ("conductor", "fleetcache.compute.manager"),
        ("conductor", "fleetcache.compute.virt.driver"),
        ("api", "fleetcache.conductor.precache"),
        ("image", "fleetcache.compute.imagecache"),
        ("common", "fleetcache.image.glance"),
        ("compute", "fleetcache.cmd.compute"),
    ],
)
def test_refused(room: str, target: str) -> None:
    assert check_imports._violation(room, target) is not None


def test_tree_follows_the_rule() -> None:
    assert check_imports.main() == 0
