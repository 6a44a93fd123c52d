"""Plug-in classes named by configuration, as Nova's ``nova/loadables.py`` does it: a dotted
path names a class, or a function returning classes; installed plug-ins are found by stevedore
under an entry point namespace (a package adds its own by declaring entry points there)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from oslo_utils import importutils
from stevedore import ExtensionManager

from fleetcache.common import exception

T = TypeVar("T")


def from_namespace(namespace: str) -> list[type]:
    """Every class installed under entry point ``namespace``."""
    manager: ExtensionManager[type] = ExtensionManager(namespace, invoke_on_load=False)
    return [ext.plugin for ext in manager]


def from_paths(option: str, paths: Iterable[str], base: type[T]) -> dict[str, type[T]]:
    """``{class name: class}`` of the classes ``paths`` name (first of a name wins).

    :param option: the option the paths came from, for the error message.
    :raises InvalidConfiguration: a path that does not import, or names something else.
    """
    known: dict[str, type[T]] = {}
    for path in paths:
        try:
            found = importutils.import_class(path)
        except (ImportError, ValueError, AttributeError) as exc:
            raise exception.InvalidConfiguration(
                reason=f"{option}: cannot import {path}: {exc}") from exc
        classes = [found] if isinstance(found, type) else list(found())
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise exception.InvalidConfiguration(
                    reason=f"{option}: {path} gave {cls!r}, not a {base.__name__}")
            known.setdefault(cls.__name__, cls)
    return known
