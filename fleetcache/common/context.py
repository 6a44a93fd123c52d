"""The request context that travels with every API request and RPC message.

It is oslo.context's ``RequestContext``: identity, roles and the request id, which shows up in
every log line (``[req-... user project]``) on every service a request touches.
"""

from __future__ import annotations

from typing import Any

from oslo_context import context


class RequestContext(context.RequestContext):
    """Who asks, and under which request id."""

    @classmethod
    def from_dict(cls, values: dict[str, Any], **kwargs: Any) -> RequestContext:
        return super().from_dict(values, **kwargs)


def get_admin_context() -> RequestContext:
    """A context for work the services do on their own behalf (heartbeats, periodic tasks)."""
    return RequestContext(is_admin=True, roles=["admin"], overwrite=False)
