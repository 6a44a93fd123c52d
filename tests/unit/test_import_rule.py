"""The import rule of docs/architecture.md, as enforced by tools/check_imports.py.

The checks of whole trees run the script on small fake ``fleetcache/`` packages in ``tmp_path``.
"""

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
        ("cmd", "fleetcache.demo.harness"),
        ("demo", "fleetcache.conductor.placement"),
        ("demo", "fleetcache.client.api_client"),
        ("cmd", "fleetcache.client.cli"),
    ],
)
def test_allowed(room: str, target: str) -> None:
    assert check_imports._violation(room, target) is None


@pytest.mark.parametrize(
    ("room", "target"),
    [
        ("conductor", "fleetcache.compute.manager"),
        ("conductor", "fleetcache.compute.virt.driver"),
        ("api", "fleetcache.conductor.precache.job"),
        ("image", "fleetcache.compute.imagecache"),
        ("common", "fleetcache.image.glance"),
        ("compute", "fleetcache.cmd.compute"),
        ("demo", "fleetcache.cmd.conductor"),
        ("client", "fleetcache.common.exception"),
        ("client", "fleetcache.api.microversion"),
        ("common", "fleetcache.client.api_client"),
    ],
)
def test_refused(room: str, target: str) -> None:
    assert check_imports._violation(room, target) is not None


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """A fake ``fleetcache`` package: every directory gets an ``__init__.py``."""
    root = tmp_path / "fleetcache"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        for parent in reversed(path.relative_to(tmp_path).parents[:-1]):
            (tmp_path / parent).mkdir(exist_ok=True)
            (tmp_path / parent / "__init__.py").touch()
        path.write_text(text)
    return root


CLEAN = {
    "common/exception.py": "class Error(Exception):\n    pass\n",
    "image/glance.py": "from fleetcache.common import exception\n",
    "compute/rpcapi.py": "from fleetcache.common.exception import Error\n",
    "compute/manager.py": "from fleetcache.compute import rpcapi\nimport fleetcache.image.glance\n",
    "conductor/manager.py": "from fleetcache.compute import rpcapi\n",
    "cmd/compute.py": "from fleetcache import compute\nfrom fleetcache.compute import manager\n",
}


def test_clean_tree_passes(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, CLEAN)
    assert check_imports.main(["--root", str(root)]) == 0
    assert capsys.readouterr().out == ""


def test_package_init_importing_its_submodules_is_no_circle(tmp_path: pathlib.Path) -> None:
    init = "from fleetcache.compute import manager, rpcapi\n"
    root = _tree(tmp_path, {**CLEAN, "compute/__init__.py": init})
    assert check_imports.check(root) == []


def test_circle_fails_once_in_import_order(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same shape as the API's old circle: one edge hidden in a function, one under
    # TYPE_CHECKING.
    root = _tree(tmp_path, {
        "api/router.py": "from fleetcache.api.handlers import openapi\n",
        "api/handlers/openapi.py": "def get():\n    from fleetcache.api import document\n",
        "api/document.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from fleetcache.api.router import Router\n"
        ),
    })
    assert check_imports.main(["--root", str(root)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "fleetcache/api/document.py:3: FC003 import circle: fleetcache.api.document"
        " -> fleetcache.api.router -> fleetcache.api.handlers.openapi -> fleetcache.api.document"
    ]


def test_tangle_of_many_circles_is_named_as_a_whole(tmp_path: pathlib.Path) -> None:
    names = [f"m{i}" for i in range(5)]  # each imports all the others: 84 circles
    imports = "".join(f"from fleetcache.common import {n}\n" for n in names)
    root = _tree(tmp_path, {f"common/{n}.py": imports for n in names})
    errors = check_imports.check(root)
    assert len(errors) == check_imports.MAX_CYCLES + 1
    assert errors[-1] == (
        f"fleetcache/common/m0.py:1: FC003 more than {check_imports.MAX_CYCLES} import circles "
        "among: " + ", ".join(f"fleetcache.common.{n}" for n in names)
    )


def test_relative_upward_import_fails(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {**CLEAN, "image/qemu.py": "from ..compute import manager\n"})
    assert check_imports.check(root) == [
        "fleetcache/image/qemu.py:1: FC002 relative import 'from ..compute import' of "
        "fleetcache.compute.manager: write it absolute",
        "fleetcache/image/qemu.py:1: FC001 image must not import fleetcache.compute.manager "
        "(imports run downwards)",
    ]


def test_relative_import_within_a_room_is_refused(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {**CLEAN, "image/qemu.py": "from . import glance\n"})
    assert check_imports.check(root) == [
        "fleetcache/image/qemu.py:1: FC002 relative import 'from . import' of "
        "fleetcache.image.glance: write it absolute",
    ]


def test_from_fleetcache_import_room_is_checked(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {**CLEAN,
                            "conductor/precache/job.py": "from fleetcache import compute\n"})
    assert check_imports.check(root) == [
        "fleetcache/conductor/precache/job.py:1: FC001 conductor may import only "
        "fleetcache.compute.rpcapi, not fleetcache.compute",
    ]


def test_tree_follows_the_rule() -> None:
    assert check_imports.check(check_imports.ROOT) == []
