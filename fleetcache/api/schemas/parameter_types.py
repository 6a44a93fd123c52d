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


def printable_pattern() -> str:
    """Printable text, spaces anywhere, empty allowed (Nova's ``valid_description_regex``)."""
    return f"^{char_class(_printable)}*{END}"


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

#: Nova's ``boolean`` parameter type: JSON booleans and the strings oslo's
#: ``bool_from_string`` reads ("True", "on", "0"...); ``to_bool`` turns a valid one into bool.
BOOLEAN: dict[str, object] = {
    "type": ["boolean", "string"],
    "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
             False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"],
}
#: The largest value of an integer column (Nova's ``db.MAX_INT``).
MAX_INT = 0x7FFFFFFF


def integer(minimum: int, maximum: int = MAX_INT) -> dict[str, object]:
    """Nova's integer parameter: a JSON integer or a string of digits. The bounds apply to
    integers only (JSON Schema's ``minimum`` ignores strings): the handler converts a string
    with :func:`fleetcache.api.validation.to_int`, which checks them again."""
    return {
        "type": ["integer", "string"],
        "pattern": "^[0-9]+" + END,
        "minLength": 1,
        "maxLength": 255,
        "minimum": minimum,
        "maximum": maximum,
    }
