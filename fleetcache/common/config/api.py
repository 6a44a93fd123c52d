"""Options of the ``[api]`` group: authentication mode and REST behaviour."""

from __future__ import annotations

from oslo_config import cfg

api_group = cfg.OptGroup("api", title="REST API options")

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
    cfg.StrOpt(
        "public_endpoint",
        help="""
Base URL clients use to reach the API, e.g. ``https://cloud.example.com/compute``.

Used in version discovery links and ``Location`` headers. When unset, the request's own host
URL is used.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(api_group, api_opts)]
