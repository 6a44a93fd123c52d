#!/usr/bin/env python3
"""Enforce the import rule of docs/architecture.md on ``fleetcache/``.

Layers, from top to bottom::

    cmd -> demo -> api | conductor | compute -> image | privsep -> common | client

A module may import its own room and any room below it. ``cmd`` (entry points) is above
``demo`` because the ``fleetcache`` command hands the demo the daemons' ``build_service``;
``client`` (the operator's client of the REST API) is at the bottom beside ``common`` because
it imports nothing else of fleetcache: it speaks HTTP to the API.

Across the three roles in the middle, only another role's ``rpcapi`` module may be imported
(the RPC client), e.g. the conductor may import ``fleetcache.compute.rpcapi`` and nothing else
of ``fleetcache.compute``.

Every import statement counts, wherever it is: at module level, inside a function, and under
``if TYPE_CHECKING:`` (a circle hidden in a function is still a circle). What a statement
imports, both for the rule and for circles:

* ``import a.b.c`` imports ``a.b.c``. Python also runs the ``__init__`` of ``a`` and ``a.b``,
  but these are not counted: a package ``__init__`` that imports its submodules would otherwise
  make every import of one of them a circle.
* ``from a.b import name`` imports ``a.b.name`` when that is a module of the tree, else ``a.b``
  (``name`` is then something ``a.b`` defines). So ``from fleetcache import compute`` imports
  the package ``fleetcache.compute``, and ``from fleetcache.compute import rpcapi`` imports
  ``fleetcache.compute.rpcapi``.
* A relative import (``from . import x``, ``from ..compute import y``) is resolved against the
  module it is in and then counted as above; it is also refused in itself, since the project
  writes absolute imports only.

Exit status 1 lists every violation as ``path:line: CODE message``:

* FC001: an import the layer rule forbids;
* FC002: a relative import (the message names its absolute form);
* FC003: an import circle between modules of the tree, reported once, at the import that
  starts it, with the modules in import order (``a -> b -> a``).

``--root`` names the package directory to check (``fleetcache/`` of this repository by default;
the tests point it at small fake trees).
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from collections.abc import Iterator, Sequence
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent / "fleetcache"
LEVEL = {
    "cmd": 4, "demo": 3, "api": 2, "conductor": 2, "compute": 2, "image": 1, "privsep": 1,
    "common": 0, "client": 0,
}
ROLES = {"api", "conductor", "compute"}
#: Elementary circles reported per tangle at most: past that, the tangle is named as a whole.
MAX_CYCLES = 20


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "fleetcache" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LEVEL else None


def _violation(src_room: str, target: str) -> str | None:
    dst_room = _room(target)
    if dst_room is None or dst_room == src_room:
        return None
    if src_room in ROLES and dst_room in ROLES:
        if target == f"fleetcache.{dst_room}.rpcapi":
            return None
        return f"{src_room} may import only fleetcache.{dst_room}.rpcapi, not {target}"
    if LEVEL[dst_room] >= LEVEL[src_room]:
        return f"{src_room} must not import {target} (imports run downwards)"
    return None


class Import(NamedTuple):
    """One module a statement imports: ``relative`` is the statement as written, if it was."""

    lineno: int
    target: str
    relative: str | None = None


class Module(NamedTuple):
    name: str
    path: pathlib.Path
    is_package: bool


def _modules(root: pathlib.Path) -> dict[str, Module]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = Module(name, path, is_package)
    return found


def _anchor(module: Module, level: int) -> str | None:
    """The package a relative import of ``level`` dots starts from, or None above the top."""
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    keep = len(parts) - (level - 1)
    return ".".join(parts[:keep]) if keep > 0 else None


def _imports(module: Module, tree: ast.AST, known: dict[str, Module]) -> Iterator[Import]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            if node.level:
                anchor = _anchor(module, node.level)
                if anchor is None:
                    yield Import(node.lineno, "", relative=written)
                    continue
                base = ".".join(p for p in (anchor, node.module) if p)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                relative = written if node.level else None
                yield Import(node.lineno, sub if sub in known else base, relative)


def _cycles(graph: dict[str, dict[str, int]]) -> Iterator[tuple[list[str], bool]]:
    """Each elementary circle once, from its smallest module, in import order.

    Yields ``(modules, True)`` per circle; a tangle with more than ``MAX_CYCLES`` circles ends
    with ``(its modules, False)`` instead of listing them all.
    """
    for component in _components(graph):
        if len(component) == 1:
            continue
        members = set(component)
        count = 0
        for start in sorted(component):
            # Circles through ``start`` that use no module smaller than it: each circle is
            # found once, from its smallest module.
            stack = [(start, [start])]
            while stack:
                node, path = stack.pop()
                for nxt in sorted(graph[node], reverse=True):
                    if nxt not in members or nxt < start:
                        continue
                    if nxt == start:
                        count += 1
                        if count > MAX_CYCLES:
                            yield sorted(component), False
                            break
                        yield path, True
                    elif nxt not in path:
                        stack.append((nxt, [*path, nxt]))
                else:
                    continue
                break
            if count > MAX_CYCLES:
                break


def _components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    result.append(component)
    return result


def check(root: pathlib.Path) -> list[str]:
    """Every violation under the package directory ``root``, as ``path:line: CODE message``."""
    modules = _modules(root)
    errors: list[str] = []
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, module in modules.items():
        rel = module.path.relative_to(root.parent)
        src_room = _room(name)
        for imp in _imports(module, ast.parse(module.path.read_text(), str(module.path)), modules):
            if imp.relative is not None:
                what = f"of {imp.target}" if imp.target else "beyond the top-level package"
                errors.append(
                    f"{rel}:{imp.lineno}: FC002 relative import 'from {imp.relative} import' "
                    f"{what}: write it absolute"
                )
            if not imp.target:
                continue
            problem = _violation(src_room, imp.target) if src_room else None
            if problem:
                errors.append(f"{rel}:{imp.lineno}: FC001 {problem}")
            if imp.target in modules and imp.target != name:
                line = graph[name].get(imp.target, imp.lineno)
                graph[name][imp.target] = min(line, imp.lineno)
    for cycle, whole in _cycles(graph):
        rel = modules[cycle[0]].path.relative_to(root.parent)
        if whole:
            circle = " -> ".join([*cycle, cycle[0]])
            errors.append(f"{rel}:{graph[cycle[0]][cycle[1]]}: FC003 import circle: {circle}")
        else:
            errors.append(
                f"{rel}:1: FC003 more than {MAX_CYCLES} import circles among: {', '.join(cycle)}"
            )
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="package directory")
    args = parser.parse_args(argv)
    errors = check(args.root.resolve())
    for line in errors:
        print(line)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
