"""Small helpers the handlers share: request state, JSON bodies, timestamps, URLs."""

from __future__ import annotations

import datetime
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
    """The request's JSON body. :raises webob.exc.HTTPBadRequest: when it is not JSON."""
    if not req.body:
        raise webob.exc.HTTPBadRequest(explanation="The request body is missing.")
    try:
        return jsonutils.loads(req.body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise webob.exc.HTTPBadRequest(explanation="Malformed request body") from exc


def format_time(value: datetime.datetime | str | None) -> str | None:
    """Nova's timestamp form, ``2026-01-02T03:04:05.000000`` (naive UTC), or ``None``."""
    if value is None or isinstance(value, str):
        return value
    return value.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.%f")


def base_url(req: webob.Request) -> str:
    """The URL clients reach the API at: ``[api] public_endpoint`` or the request's own."""
    public: str | None = get_state(req).conf.api.public_endpoint
    return (public or req.application_url).rstrip("/")


def int_id(value: str) -> int | None:
    """``value`` as a positive database id, or ``None`` when it is not one."""
    if not value.isdigit() or len(value) > 18:
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
