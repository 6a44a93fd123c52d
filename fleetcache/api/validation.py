"""JSON Schema validation of request bodies and query strings, with Nova's error messages."""

from __future__ import annotations

from typing import Any

import jsonschema
import webob
from oslo_utils import strutils, uuidutils

from fleetcache.api import util
from fleetcache.common import exception

FORMAT_CHECKER = jsonschema.FormatChecker()
#: Longest rendering of a refused value in an error message (a body may hold 100 KiB).
MAX_VALUE_REPR = 100


@FORMAT_CHECKER.checks("uuid")
def _is_uuid(value: object) -> bool:
    return not isinstance(value, str) or uuidutils.is_uuid_like(value)


def validate(body: Any, schema: dict[str, Any]) -> None:
    """:raises InvalidInput: (400) naming the first field that does not match ``schema``."""
    validator = jsonschema.Draft4Validator(schema, format_checker=FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(body))
    if error is None:
        return
    # absolute_path: an error under anyOf/oneOf has a path relative to that keyword only.
    path = "/".join(str(p) for p in error.absolute_path)
    value = _short(repr(error.instance))
    reason = _short(error.message)
    if error.validator == "pattern" and isinstance(error.schema, dict):
        # The message would quote the whole pattern (12 KB for a name): say what it means.
        reason = f"{value} is not {error.schema.get('description', 'of the expected form')}"
    elif error.validator in ("minimum", "maximum"):
        # jsonschema's own words, with the value shortened and the limit kept (a number of
        # 400 digits would otherwise push the limit out of the message).
        side = "less than the minimum" if error.validator == "minimum" else \
            "greater than the maximum"
        reason = f"{value} is {side} of {error.validator_value}"
    elif error.validator == "maxLength":
        # jsonschema's "... is too long" does not say how long may be.
        reason = f"{value} is too long (at most {error.validator_value} characters)"
    if path:
        message = f"Invalid input for field/attribute {path}. Value: {value}. {reason}"
    else:
        message = f"Invalid input: {reason}"
    raise exception.InvalidInput(message)


def validate_query(req: webob.Request, schema: dict[str, Any]) -> None:
    """Check the request's query string, as a dict of lists, against ``schema`` (Nova's
    ``query_schema``).

    :raises InvalidInput: (400) naming the first parameter that does not match.
    """
    query = req.GET.dict_of_lists()
    validator = jsonschema.Draft4Validator(schema, format_checker=FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(query))
    if error is None:
        return
    if error.validator == "additionalProperties":
        unknown = sorted(set(query) - set(schema.get("properties", {})))
        raise exception.InvalidInput(
            f"Invalid input for query parameters: unknown parameter {_short(unknown[0])}")
    name = str(error.absolute_path[0]) if error.absolute_path else "?"
    value = _short(repr(query.get(name)))
    reason = _short(error.message)
    if error.validator == "pattern" and isinstance(error.schema, dict):
        reason = f"{_short(repr(error.instance))} is not " \
                 f"{error.schema.get('description', 'of the expected form')}"
    elif error.validator == "maxItems":
        reason = "given more than once"
    raise exception.InvalidInput(
        f"Invalid input for query parameters {_short(name)}. Value: {value}. {reason}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_VALUE_REPR else text[:MAX_VALUE_REPR] + "..."


def extract_body(req: webob.Request, schema: dict[str, Any]) -> Any:
    """The request's JSON body, validated against ``schema``."""
    body = util.read_json(req)
    validate(body, schema)
    return body


def to_int(value: int | str, name: str, minimum: int, maximum: int) -> int:
    """A validated integer parameter (:func:`parameter_types.integer`) as an int.

    :raises InvalidInput: (400, Nova's message) when it is outside ``[minimum, maximum]``.
    """
    number = int(value)
    if number < minimum:
        raise exception.InvalidInput(
            f"Invalid input for field/attribute {name}. Value: {_short(str(value))}. "
            f"{name} must be >= {minimum}")
    if number > maximum:
        raise exception.InvalidInput(
            f"Invalid input for field/attribute {name}. Value: {_short(str(value))}. "
            f"{name} must be <= {maximum}")
    return number


def to_bool(value: bool | str) -> bool:
    """A validated boolean parameter (:data:`parameter_types.BOOLEAN`) as a bool."""
    return strutils.bool_from_string(value, strict=True)
