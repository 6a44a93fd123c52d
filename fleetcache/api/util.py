"""Small helpers the handlers share: request state, JSON bodies, ids, timestamps, URLs."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import webob
import webob.exc
from oslo_serialization import jsonutils

from fleetcache.api.state import ApiState
from fleetcache.common.context import RequestContext

STATE_KEY = "fleetcache.state"
CONTEXT_KEY = "fleetcache.context"
JSON = "application/json"
#: Deepest JSON nesting a body may have: the deepest schema needs 4 levels; recursive code
#: (the JSON decoder, jsonschema) must never meet a depth near Python's recursion limit.
MAX_JSON_DEPTH = 32
#: A database id in a URL: ASCII digits only (``str.isdigit`` also takes "³" and Arabic-Indic
#: digits), at most 18 of them so that it fits a signed 64-bit column.
_INT_ID = re.compile(r"[0-9]{1,18}")


def get_state(req: webob.Request) -> ApiState:
    state: ApiState = req.environ[STATE_KEY]
    return state


def get_context(req: webob.Request) -> RequestContext:
    context: RequestContext = req.environ[CONTEXT_KEY]
    return context


def json_response(body: Any, status: int = 200) -> webob.Response:
    response = webob.Response(status=status, content_type=JSON, charset="UTF-8")
    response.text = jsonutils.dumps(body)
    return response


def empty_response(status: int, headers: dict[str, str] | None = None) -> webob.Response:
    """A response without a body (Nova's 200 on delete, 202 on pre-cache)."""
    response = webob.Response(status=status, content_type=JSON, charset="UTF-8")
    response.body = b""
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def read_json(req: webob.Request) -> Any:
    """The request's JSON body: UTF-8, at most :data:`MAX_JSON_DEPTH` deep, no lone surrogate.

    A lone surrogate (``"\\ud800"``) is valid JSON but cannot be stored or encoded as UTF-8;
    it is refused here, for every field at once, as Nova's schema layer refuses it (400).

    :raises webob.exc.HTTPBadRequest: when it is not such a body.
    """
    if not req.body:
        raise webob.exc.HTTPBadRequest(explanation="The request body is missing.")
    try:
        body = json.loads(req.body.decode("utf-8"))
    except RecursionError as exc:
        raise _too_deep() from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise webob.exc.HTTPBadRequest(explanation="Malformed request body") from exc
    _check_json_value(body)
    return body


def _too_deep() -> webob.exc.HTTPBadRequest:
    return webob.exc.HTTPBadRequest(
        explanation=f"Malformed request body: nested deeper than {MAX_JSON_DEPTH} levels"
    )


def _check_json_value(body: Any) -> None:
    """Depth and text checks over a decoded body, without recursion."""
    pending: list[tuple[Any, int]] = [(body, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key)
                pending.append((item, depth + 1))
        elif isinstance(value, list):
            pending.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            _check_text(value)


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise webob.exc.HTTPBadRequest(
            explanation="Malformed request body: a string holds a lone surrogate "
            f"({text[exc.start]!r}), which is not Unicode text"
        ) from exc


def format_time(value: datetime.datetime | str | None) -> str | None:
    """Nova's timestamp form, ``2026-01-02T03:04:05.000000`` (naive UTC), or ``None``."""
    if value is None or isinstance(value, str):
        return value
    return value.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.%f")


def request_path(req: webob.Request) -> str:
    """The request's path and query for logs, whatever bytes the client sent.

    ``req.path`` raises ``UnicodeDecodeError`` on a path that is not UTF-8 (``/%ff``); here
    such bytes are shown escaped (``/\\xff``).
    """
    raw = req.environ.get("SCRIPT_NAME", "") + req.environ.get("PATH_INFO", "")
    path = raw.encode("latin-1", "replace").decode("utf-8", "backslashreplace")
    query = req.environ.get("QUERY_STRING")
    return f"{path}?{query}" if query else path


def base_url(req: webob.Request) -> str:
    """The URL clients reach the API at: ``[api] public_endpoint`` or the request's own."""
    public: str | None = get_state(req).conf.api.public_endpoint
    return (public or req.application_url).rstrip("/")


def int_id(value: str) -> int | None:
    """``value`` as a positive database id, or ``None`` when it is not one.

    The one parser of integer ids in URLs, for every route.
    """
    if _INT_ID.fullmatch(value) is None:
        return None
    number = int(value)
    return number if number > 0 else None


class Middleware:
    """A WSGI middleware written against WebOb: subclasses implement :meth:`process`."""

    def __init__(self, application: Callable[..., Any]) -> None:
        self.application = application

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = self.process(webob.Request(environ))
        result: Iterable[bytes] = response(environ, start_response)
        return result

    def process(self, req: webob.Request) -> webob.Response:
        raise NotImplementedError

    def forward(self, req: webob.Request) -> webob.Response:
        """The response of the wrapped application."""
        response: webob.Response = req.get_response(self.application)
        return response
