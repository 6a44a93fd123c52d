#!/usr/bin/env python3
"""Enforce the import rule of docs/architecture.md on ``fleetcache/``.

Layers, from top to bottom::

    cmd -> api | conductor | compute -> image | privsep -> common

A module may import its own room and any room below it. Across the three roles in the middle,
only another role's ``rpcapi`` module may be imported (the RPC client), e.g. the conductor may
import ``fleetcache.compute.rpcapi`` and nothing else of ``fleetcache.compute``.

Exit status 1 lists every violation as ``path:line: FC001 message``.
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "fleetcache"
LEVEL = {"cmd": 3, "api": 2, "conductor": 2, "compute": 2, "image": 1, "privsep": 1, "common": 0}
ROLES = {"api", "conductor", "compute"}


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


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.count(".") == 1:  # "from fleetcache.room import module"
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def main() -> int:
    errors = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent)
        src_room = _room(".".join(rel.with_suffix("").parts))
        if src_room is None:
            continue
        for lineno, target in _imports(ast.parse(path.read_text(), str(path))):
            problem = _violation(src_room, target)
            if problem:
                errors.append(f"{rel}:{lineno}: FC001 {problem}")
    for line in errors:
        print(line)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
