"""Nova's filters of the server lists: ``name`` (a regular expression), ``image``, ``flavor``.

Nova hands ``name`` to its database as a regular expression (``REGEXP``, searched anywhere in
the name). Here Python's ``re`` searches each visible server's name, and an engine that
backtracks can be made to work for minutes by one pattern (``(a|aa)*c`` on a name of 30
``a``: a second; each further ``a`` doubles it), which would stall an API thread. So a
pattern is refused (400) when it repeats a group, holds a back-reference, or has more than
:data:`MAX_REPEATS` repeated atoms; what is left (literals, classes, ``.``, anchors,
alternation, up to two ``*``/``+``/``{m,n}``, as ``^.*-instance-.*$``) costs at most tens of
milliseconds on a 255-character name, and a list stops with 400 past
:data:`MATCH_BUDGET_SECONDS` of matching in all.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from fleetcache.common import exception
from fleetcache.common.db.instances import InstanceDict

#: The longest name filter (a server name's own limit).
MAX_PATTERN_LENGTH = 255
#: Repeated atoms (``*``, ``+``, ``{m,n}``) a name filter may hold.
MAX_REPEATS = 2
#: Matching time one list may spend on its name filter.
MATCH_BUDGET_SECONDS = 1.0

_REPEAT = re.compile(r"\*|\+|\{[0-9]*,?[0-9]*\}")


def ref_id(ref: str | int) -> str:
    """An image or flavor reference as an id: a URL's last segment, or the value itself."""
    return str(ref).rstrip("/").rsplit("/", 1)[-1]


def _too_costly(pattern: str) -> str | None:
    """Why ``pattern`` could backtrack for long, or ``None``."""
    if "(?P=" in pattern or "(?(" in pattern:
        return "it holds a back-reference"
    repeats = 0
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if pattern[index + 1:index + 2].isdigit():
                return "it holds a back-reference"
            index += 2
            continue
        if in_class:
            in_class = char != "]"
            index += 1
            continue
        if char == "[":
            in_class = True
            index += 1
            if pattern[index:index + 1] == "^":
                index += 1
            if pattern[index:index + 1] == "]":  # a "]" first is a member, not the end
                index += 1
            continue
        found = _REPEAT.match(pattern, index)
        if found:
            repeats += 1
            if index > 0 and pattern[index - 1] == ")":
                return "it repeats a group"
            index = found.end()
            continue
        index += 1
    if repeats > MAX_REPEATS:
        return f"it holds more than {MAX_REPEATS} repetitions (*, +, {{m,n}})"
    return None


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """A search for Nova's ``name`` filter.

    :raises InvalidInput: (400) for a pattern that is not a regular expression, is longer than
        :data:`MAX_PATTERN_LENGTH`, or could take long to match (see the module docstring).
    """
    reason = None
    if len(pattern) > MAX_PATTERN_LENGTH:
        reason = f"it is longer than {MAX_PATTERN_LENGTH} characters"
    else:
        reason = _too_costly(pattern)
    if reason is None:
        try:
            compiled = re.compile(pattern)
        except (re.error, OverflowError, RecursionError) as exc:
            reason = f"it is not a regular expression ({exc})"
    if reason is not None:
        raise exception.InvalidInput(reason=f"Invalid name filter [{pattern[:64]}]: {reason}")
    deadline = time.monotonic() + MATCH_BUDGET_SECONDS

    def matches(name: str) -> bool:
        if time.monotonic() > deadline:
            raise exception.InvalidInput(
                reason="the name filter took too long to match; make it simpler")
        return compiled.search(name) is not None

    return matches


def from_query(query: Mapping[str, str]) -> Callable[[InstanceDict], bool]:
    """The test a server must pass for the ``name``, ``image`` and ``flavor`` of ``query``
    (each optional; an image or flavor is its id, or a URL ending in it, as Nova)."""
    name = query.get("name")
    image = query.get("image")
    flavor = query.get("flavor")
    name_ok = name_matcher(name) if name is not None else None

    def wanted(instance: InstanceDict) -> bool:
        if image is not None and instance["image_ref"] != ref_id(image):
            return False
        if flavor is not None and instance["flavor"].get("flavorid") != ref_id(flavor):
            return False
        return name_ok is None or name_ok(instance["display_name"])

    return wanted
