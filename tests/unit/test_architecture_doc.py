"""docs/architecture.md names every module of ``fleetcache/``, and only modules that exist.

A newcomer opens the architecture page to find where a concept lives; a module missing from it
is a room nobody was told about (issue 25). The alembic migrations are ``alembic history``'s.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fleetcache"
DOC = ROOT / "docs" / "architecture.md"


def _modules() -> set[str]:
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
            if path.parent.name != "versions"}


def _index_entries() -> set[str]:
    text = DOC.read_text()
    index = text[text.index("## Module index"):]
    return set(re.findall(r"^- `([\w/]+\.py)`:", index, flags=re.MULTILINE))


def test_every_module_is_in_the_index() -> None:
    assert sorted(_modules() - _index_entries()) == []


def test_the_index_names_no_module_that_is_gone() -> None:
    assert sorted(_index_entries() - _modules()) == []
