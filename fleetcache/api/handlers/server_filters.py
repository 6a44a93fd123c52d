"""Nova's filters of the server lists: ``name`` (a regular expression), ``status``, ``image``,
``flavor``.

``status`` (repeatable: any of them) selects by state as Nova's does
(:func:`~fleetcache.common.instance_states.states_of_statuses`): ``SHUTOFF`` finds the
servers ``os-stop`` stopped. A status Nova does not know gives an empty list below 2.38 and
a 400 from 2.38, as Nova.

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

from fleetcache.api import microversion
from fleetcache.common import exception, instance_states
from fleetcache.common.db.instances import InstanceDict

#: From 2.38 a status Nova does not know is a 400 rather than an empty list.
STATUS_CHECKED_VERSION = microversion.Version(2, 38)

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


def status_matcher(statuses: list[str],
                   version: microversion.Version) -> Callable[[InstanceDict], bool]:
    """The test of Nova's ``status`` filter (``statuses``: every ``status`` of the query; none:
    no filter).

    :raises InvalidInput: (400, Nova's message) from 2.38 when no status is one Nova knows.
    """
    if not statuses:
        return lambda _instance: True
    if not {status.upper() for status in statuses} & instance_states.NOVA_STATUSES:
        if version.matches(STATUS_CHECKED_VERSION):
            raise exception.InvalidInput("Invalid status value")
        return lambda _instance: False
    vm_states, task_states = instance_states.states_of_statuses(statuses)

    def matches(instance: InstanceDict) -> bool:
        return instance["vm_state"] in vm_states and (
            task_states is None or instance["task_state"] in task_states)

    return matches
