"""Nova's extra-spec operators (``nova/scheduler/filters/extra_specs_ops.py``), hand-written
here because Nova is not a library fleetcache can depend on.

``match(value, req)`` reads the first word of ``req`` as the operator: ``=`` (numeric at
least), ``==`` ``!=`` ``>=`` ``<=`` (numeric), ``s==`` ``s!=`` ``s<`` ``s<=`` ``s>`` ``s>=``
(string), ``<in>`` (substring), ``<all-in>`` (every word a substring), ``<or>`` (``<or> a <or>
b``: equal to one of them). Without a known operator ``req`` must equal ``value`` exactly.
One difference: a numeric operator on a value that is not a number does not match, where
Nova's raises ``ValueError`` out of the scheduler.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def method(value: str, wanted: str) -> bool:
        try:
            return compare(float(value), float(wanted))
        except ValueError:
            return False
    return method


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": _numeric(operator.ge),
    "==": _numeric(operator.eq),
    "!=": _numeric(operator.ne),
    ">=": _numeric(operator.ge),
    "<=": _numeric(operator.le),
    "<in>": lambda value, wanted: wanted in value,
    "<all-in>": lambda value, wanted: all(word in value for word in wanted),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}

OR = "<or>"


def match(value: str | None, req: str) -> bool:
    """Whether aggregate metadata ``value`` satisfies extra spec ``req``."""
    words = req.split()
    op = words.pop(0) if words else None
    method = _OPS.get(op) if op is not None else None
    if op != OR and method is None:
        return value == req
    if value is None:
        return False
    if op == OR:
        # "<or> a <or> b": every other word is an alternative.
        return value in words[::2]
    if not words:
        return False
    assert method is not None
    if op == "<all-in>":
        return method(value, words)
    return method(value, words[0])
