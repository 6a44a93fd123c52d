"""Options of the ``[api]`` group: authentication mode and REST behaviour."""

from __future__ import annotations

from oslo_config import cfg
from oslo_middleware import sizelimit

api_group = cfg.OptGroup("api", title="REST API options")
#: Nova's own option for the body size limit (oslo.middleware's ``sizelimit``, 114,688 bytes).
oslo_middleware_group = cfg.OptGroup("oslo_middleware", title="oslo.middleware options")

api_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            ("keystone", "Validate tokens with keystonemiddleware ([keystone_authtoken])."),
            ("noauth", "No authentication, for labs and tests: trust identity headers."),
        ],
        help="""
How API requests are authenticated.

``noauth`` trusts the client completely: the request's ``X-User-Id``, ``X-Project-Id`` and
``X-Roles`` headers are taken as given, and a request without ``X-Roles`` gets
``noauth_default_roles``. Never expose a ``noauth`` API outside a lab.

Related options:
* noauth_default_roles
""",
    ),
    cfg.ListOpt(
        "noauth_default_roles",
        default=["admin", "member", "reader"],
        help="Roles given to a request without ``X-Roles`` when ``auth_strategy = noauth``.",
    ),
    cfg.HostAddressOpt(
        "bind_host",
        default="0.0.0.0",  # noqa: S104 - an API listens on every address unless told otherwise
        help="Address ``fleetcache-api`` listens on (Nova: ``osapi_compute_listen``).",
    ),
    cfg.PortOpt(
        "bind_port",
        default=8774,
        help="TCP port ``fleetcache-api`` listens on (Nova: ``osapi_compute_listen_port``).",
    ),
    cfg.IntOpt(
        "workers",
        default=1,
        min=1,
        help="""
Worker processes of ``fleetcache-api`` (Nova: ``osapi_compute_workers``).

Each worker serves ``threads`` requests at once (gunicorn ``gthread`` workers).

Related options:
* threads
""",
    ),
    cfg.IntOpt(
        "threads",
        default=8,
        min=1,
        help="Request threads per ``fleetcache-api`` worker process.",
    ),
    cfg.IntOpt(
        "graceful_timeout",
        default=30,
        min=0,
        help="""
Seconds ``fleetcache-api`` lets requests in flight finish after SIGTERM before it exits.
""",
    ),
    cfg.IntOpt(
        "keepalive",
        default=75,
        min=0,
        help="""
Seconds ``fleetcache-api`` keeps an idle keep-alive connection open for the client's next
request (0: one request per connection).

A client that sends its next request just as the server closes the idle connection gets
"Remote end closed connection without response". gunicorn's default of 2 s met the
``openstack`` client's own 2 s polls of ``server delete --wait`` (an integration test failed
so); 75 s is nginx's default. An idle connection holds a file descriptor, not a thread.
""",
    ),
    cfg.IntOpt(
        "client_timeout",
        default=10,
        min=1,
        help="""
Seconds a client has to send a whole request, headers and body, to ``fleetcache-api``.

A client still sending when they are up gets 408 (or, in the middle of its headers, a closed
connection), and the request thread it held is free again. Until then a slow client holds one
of the ``threads``: put a buffering proxy in front of an API that faces untrusted networks.

Related options:
* threads
""",
    ),
    cfg.StrOpt(
        "public_endpoint",
        help="""
Base URL clients use to reach the API, e.g. ``https://cloud.example.com/compute``.

Used in version discovery links and ``Location`` headers. When unset, the request's own host
URL is used.
""",
    ),
]


#: Nova's availability zone defaults, shown by ``GET /os-services`` (``[DEFAULT]`` as in Nova).
availability_zone_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "internal_service_availability_zone",
        default="internal",
        help="Availability zone shown for services other than compute agents.",
    ),
    cfg.StrOpt(
        "default_availability_zone",
        default="nova",
        help="Availability zone shown for compute hosts in no aggregate with a zone.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)
    conf.register_opts(availability_zone_opts)
    conf.register_group(oslo_middleware_group)
    conf.register_opts(sizelimit.OPTS, group=oslo_middleware_group)


def list_opts() -> list[tuple[cfg.OptGroup | None, list[cfg.Opt]]]:
    return [
        (api_group, api_opts),
        (None, availability_zone_opts),
        (oslo_middleware_group, list(sizelimit.OPTS)),
    ]
