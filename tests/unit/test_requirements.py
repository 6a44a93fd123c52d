"""Every library that ``fleetcache/`` imports directly is declared in ``setup.cfg``.

A library that only arrives as another one's dependency can disappear with that dependency's
next release; declaring it keeps the install honest (issue 25). Debian's ``rados`` and ``rbd``
bindings are not on PyPI: ``tools/ceph-bindings.sh`` links them into the venv.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import pathlib
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Imported modules that no PyPI distribution provides, with where they come from.
NOT_ON_PYPI = {"rados": "Debian's python3-rados", "rbd": "Debian's python3-rbd"}


def _imported_top_level_modules() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "fleetcache").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"fleetcache"}


def _declared() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options"]["install_requires"].splitlines()
    for extra in parser["options.extras_require"].values():
        lines += extra.splitlines()
    return {canonicalize_name(Requirement(line.strip()).name)
            for line in lines if line.strip() and not line.strip().startswith("#")}


def test_every_directly_imported_library_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = _declared()
    undeclared = {
        module: providers.get(module, [])
        for module in _imported_top_level_modules() - set(NOT_ON_PYPI)
        if not {canonicalize_name(d) for d in providers.get(module, [])} & declared
    }
    assert undeclared == {}


def test_every_requirement_line_parses_as_one_requirement() -> None:
    """``a>=1; b>=2`` on one line is one requirement whose marker is ``b>=2``: a library
    silently left out (the osc extra was written so)."""
    assert {"python-openstackclient", "osc-lib"} <= _declared()
