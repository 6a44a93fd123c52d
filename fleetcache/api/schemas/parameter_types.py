"""Text patterns shared by the request schemas, as explicit character classes.

A pattern is enforced by the validator (Python's ``re``, through jsonschema) and published in
the OpenAPI document, where clients read it as an ECMA-262 regular expression. Shorthands such
as ``\\S`` mean different things in the two (Python's ``\\s`` takes ``\\x1c``-``\\x1f``,
ECMA's takes ``\\ufeff``), so the patterns here spell every character out as ``\\uXXXX``
ranges, which both read the same way.

"Printable" is Nova's definition (``nova/api/validation/parameter_types.py``): a character of
the Basic Multilingual Plane that is not a control, format, private-use, unassigned or
surrogate character (category ``C*``) nor a line or paragraph separator; spaces (``Zs``)
count. So ``\\x00``, ``\\x1b``, ``\\x7f``, zero-width and bidi-override characters (``Cf``)
and characters beyond the BMP (emoji) are refused. The classes follow the Unicode database of
the Python that runs the API. Every pattern ends with :data:`END`, never a bare ``$``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

#: The end of the text. Python's ``$`` also matches before a final newline (``"c1\\n"``
#: would pass ``^[a-z0-9]+$``), ECMA's does not; ``$(?!\\n)`` means the same in both.
END = r"$(?!\n)"


def _printable(char: str) -> bool:
    category = unicodedata.category(char)
    return not category.startswith("C") and (not category.startswith("Z") or category == "Zs")


def _printable_not_space(char: str) -> bool:
    return _printable(char) and unicodedata.category(char) != "Zs"


def char_class(wanted: Callable[[str], bool], exclude: str = "") -> str:
    """A ``[...]`` class of the BMP characters ``wanted`` accepts, minus ``exclude``."""
    parts: list[str] = []
    start: int | None = None
    for code in range(0x10001):
        ok = code < 0x10000 and wanted(chr(code)) and chr(code) not in exclude
        if ok and start is None:
            start = code
        elif not ok and start is not None:
            end = code - 1
            parts.append(f"\\u{start:04x}" if start == end else f"\\u{start:04x}-\\u{end:04x}")
            start = None
    return "[" + "".join(parts) + "]"


def name_pattern(exclude: str = "") -> str:
    """Printable text (without ``exclude``) that neither starts nor ends with a space."""
    inner = char_class(_printable, exclude)
    edge = char_class(_printable_not_space, exclude)
    return f"^{edge}(?:{inner}*{edge})?{END}"


#: Nova's ``name``: 1-255 printable characters, no leading or trailing whitespace.
NAME: dict[str, object] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": name_pattern(),
    "description": "printable characters, not starting or ending with whitespace",
}
#: Nova's availability zone name: a name without ``:`` (or null: no zone).
AVAILABILITY_ZONE: dict[str, object] = {
    "type": ["string", "null"],
    "minLength": 1,
    "maxLength": 255,
    "pattern": name_pattern(exclude=":"),
    "description": "printable characters but ':', not starting or ending with whitespace",
}
